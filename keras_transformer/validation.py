"""Argument checks whose errors name the argument and the received value."""


def check_positive_int(name: str, value) -> None:
    """Raises `ValueError` unless `value` is an integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"Received an invalid value for argument `{name}`, expected a "
            f"positive integer. Received: {name}={value!r}"
        )


def check_rate(name: str, value) -> None:
    """Raises `ValueError` unless `0 <= value < 1` (a dropout rate)."""
    if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"`{name}` must be in [0, 1). Received: {name}={value!r}")


def check_sequence_shape(name: str, shape) -> None:
    """Raises `ValueError` unless `shape` is `(batch_size, seq_len, d_model)`."""
    if len(shape) != 3:
        raise ValueError(
            f"`{name}` must have rank 3 (batch_size, seq_len, d_model). "
            f"Received: {name}.shape={tuple(shape)}"
        )
