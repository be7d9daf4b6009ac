"""The attention layer's 2-D matmul helpers."""

import math

from keras import ops


def dense(x, kernel, bias, input_rank):
    """`x` times `kernel` over the last `input_rank` axes of `x`.

    One 2-D matmul: `(B, T, *in)` x `(*in, *out)` -> `(B, T, *out)`. Einsums
    with a rank-3 kernel lower to broadcasting batch matmuls on some backends,
    whose weight gradients are much slower.
    """
    in_shape, out_shape = kernel.shape[:input_rank], kernel.shape[input_rank:]
    fan_in, fan_out = math.prod(in_shape), math.prod(out_shape)
    lead = leading_shape(x, len(x.shape) - input_rank)
    y = ops.matmul(ops.reshape(x, (-1, fan_in)), ops.reshape(kernel, (fan_in, fan_out)))
    if bias is not None:
        y = y + ops.reshape(bias, (fan_out,))
    return ops.reshape(y, (*lead, *out_shape))


def leading_shape(x, rank):
    """The first `rank` dimensions of `x`, for a reshape back to them.

    Static where known, with -1 for the one unknown dimension if there is
    only one (a batch of decoding steps, `(B, 1, D)`): a traced graph then
    needs no ops to read the shape.
    """
    static = tuple(x.shape[:rank])
    if sum(d is None for d in static) <= 1:
        return tuple(-1 if d is None else d for d in static)
    return ops.shape(x)[:rank]
