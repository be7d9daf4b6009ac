"""Training under `tf.distribute`: one device, several devices, several machines.

Two ways to train on several replicas:

- `MirroredStrategy` (several devices of one machine): build and compile the
  model inside `strategy.scope()` and call `model.fit` as usual.
- `MultiWorkerMirroredStrategy` (several processes or machines): Keras 3's
  `model.fit` fails under it ("Attempt to convert a value (PerReplica...)",
  keras-team/keras#20585), so `fit_distributed` runs a custom train step
  instead. It works under every strategy, the default one included.

See docs/training.md for the multi-machine recipe (`TF_CONFIG`).
"""

import logging
from collections.abc import Sequence

import keras
import tensorflow as tf

from keras_transformer.validation import check_positive_int

logger = logging.getLogger(__name__)

STRATEGIES = ("default", "mirrored", "multi_worker")


def make_strategy(
    name: str = "default", devices: Sequence[str] | None = None
) -> tf.distribute.Strategy:
    """A `tf.distribute` strategy by name.

    Args:
        name: "default" (no distribution: the current device), "mirrored"
            (synchronous data parallelism over the devices of this machine)
            or "multi_worker" (synchronous data parallelism over the
            processes listed in the `TF_CONFIG` environment variable; one
            process per machine, each calling this function at start-up,
            before any other TensorFlow operation).
        devices: only for "mirrored": the devices to mirror over, e.g.
            `["/cpu:0", "/cpu:1"]`; by default all GPUs, or the CPU.

    Returns:
        The strategy. Create the model and the optimizer inside its
        `scope()`.

    Raises:
        ValueError: for an unknown `name`, or `devices` with a strategy other
            than "mirrored".

    Example:

    >>> strategy = make_strategy("default")
    >>> strategy.num_replicas_in_sync
    1
    """
    if name not in STRATEGIES:
        raise ValueError(
            f"Unknown strategy. Received: name={name!r}; "
            f"expected one of {list(STRATEGIES)}"
        )
    if devices is not None and name != "mirrored":
        raise ValueError(
            "`devices` only applies to the 'mirrored' strategy. "
            f"Received: name={name!r}, devices={devices!r}"
        )
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(devices=devices)
    if name == "multi_worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    return tf.distribute.get_strategy()


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process is the chief: the one that writes checkpoints.

    The chief is the task of type "chief" if `TF_CONFIG` names one, else
    worker 0. Without a cluster (default or mirrored strategy) every process
    is the chief.

    Args:
        strategy: a `tf.distribute` strategy.

    Returns:
        `True` on the chief.

    Example:

    >>> is_chief(make_strategy("default"))
    True
    """
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    if resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief


def build_for_fit(model: keras.Model, dataset: tf.data.Dataset) -> None:
    """Builds a compiled model's loss, metrics and optimizer before `fit`.

    Call it after `model.compile` and before `model.fit`; it saves time:

    - Under a strategy, the first `fit` builds the compiled loss and metrics
      on a symbolic batch that Keras 3.15 makes by averaging the replicas'
      first batches (`strategy.reduce("MEAN")`; integer token ids become
      float64, which the `Transformer` casts back). Built here from a real
      batch, `fit` skips that build. (Keras still averages the first batch
      of every `fit` and `evaluate`, so the replicas' parts must have one
      shape: `make_batches(..., replicas=...)` makes them so.)
    - An optimizer left unbuilt creates its variables while `fit` traces its
      train step, which makes TensorFlow trace the step twice.

    The weights and the optimizer's state are left untouched (its variables
    are created, not updated); the metrics are reset.

    Args:
        model: a compiled model, created inside the strategy's scope.
        dataset: the training dataset of `(inputs, targets)` batches.

    Example:

    >>> import numpy as np
    >>> from keras_transformer.models import Transformer
    >>> ids = np.array([[5, 6, 7, 3]], dtype="int32")
    >>> dataset = tf.data.Dataset.from_tensor_slices(
    ...     ((ids, ids), ids)).batch(1)
    >>> model = Transformer(vocab_size=10, num_layers=1, d_model=8,
    ...                     num_heads=2, d_ff=16)
    >>> model.compile(optimizer="adam",
    ...     loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    >>> build_for_fit(model, dataset)  # then model.fit(dataset, ...)
    >>> model.optimizer.built, int(model.optimizer.iterations)
    (True, 0)
    """
    inputs, targets = next(iter(dataset.take(1)))
    with model.distribute_strategy.scope():
        predictions = model(inputs, training=False)
        model.compute_loss(x=inputs, y=targets, y_pred=predictions, training=False)
        model.compute_metrics(inputs, targets, predictions)
        model.reset_metrics()
        if not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)


def fit_distributed(
    model: keras.Model,
    dataset: tf.data.Dataset,
    loss: keras.losses.Loss,
    optimizer: keras.optimizers.Optimizer,
    steps: int,
    strategy: tf.distribute.Strategy | None = None,
    pad_id: int = 0,
    callbacks: Sequence[keras.callbacks.Callback] = (),
) -> list[float]:
    """Trains `steps` steps with a custom train step under any strategy.

    Each step runs `strategy.run` inside a `tf.function` on a batch of
    `strategy.experimental_distribute_dataset(dataset)`. Every replica sums
    the token losses of its real (non-`pad_id`) target tokens and divides by
    the number of real tokens of the *global* batch (all-reduced over the
    replicas); the optimizer sums the replicas' gradients. A step is
    therefore the same as one step on the whole global batch with the loss
    averaged over its real tokens, whatever the number of replicas or how
    the padding falls between them.

    The loss's own reduction is not used: only its per-token values,
    `loss.call(target_out, logits)` of shape `(batch_size, seq_len)`. Works
    with `MaskedCrossEntropy` and with Keras's built-in losses. The loss
    goes through `optimizer.scale_loss` before the gradients, so a
    `keras.optimizers.LossScaleOptimizer` (for "mixed_float16") works.

    Args:
        model: a model called on `(source_ids, target_in)` returning logits
            `(B, T, V)`, e.g. a `Transformer`, created inside
            `strategy.scope()`. It is built on the first batch if needed.
        dataset: a `tf.data.Dataset` of `((source_ids, target_in),
            target_out)` batched with the global batch size, with at least
            `steps` batches. Under `MultiWorkerMirroredStrategy` every
            worker passes the same dataset; each keeps its share of every
            global batch (set `auto_shard_policy` to `DATA` in the
            dataset's options to avoid TensorFlow's fallback warning).
        loss: a `keras.losses.Loss` whose `call` gives per-token losses.
        optimizer: a Keras optimizer created inside `strategy.scope()`.
        steps: number of training steps.
        strategy: the strategy; defaults to the current one
            (`tf.distribute.get_strategy()`).
        pad_id: target id of padding, left out of the loss.
        callbacks: Keras callbacks, called as `fit` calls them at the
            beginning and end of training and after each step (with the
            step's `loss` in `logs`); one that sets `model.stop_training`
            ends the loop after that step. Every worker calls them, so their
            decisions must agree across workers (count steps, not minutes).
            `Checkpoints(..., write=is_chief(strategy))` saves the training
            state.

    Training continues from the optimizer's step count: a model and
    optimizer restored at step `s` train steps `s + 1` to `steps`, with the
    dataset positioned at that step by the caller.

    Returns:
        The loss of each step run: its mean over the real tokens of the
        global batch, a list of floats, the same on every worker.

    Example:

    >>> import numpy as np
    >>> from keras_transformer.models import Transformer
    >>> source = np.array([[5, 6, 7, 3], [8, 9, 3, 0]], dtype="int32")
    >>> target = np.array([[2, 6, 5, 3], [2, 9, 8, 3]], dtype="int32")
    >>> dataset = tf.data.Dataset.from_tensor_slices(
    ...     ((source, target[:, :-1]), target[:, 1:])).batch(2).repeat()
    >>> model = Transformer(vocab_size=10, num_layers=1, d_model=8,
    ...                     num_heads=2, d_ff=16, dropout=0.0)
    >>> losses = fit_distributed(
    ...     model, dataset,
    ...     loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    ...     optimizer=keras.optimizers.Adam(0.01), steps=2)
    >>> len(losses), all(np.isfinite(losses))
    (2, True)
    """
    check_positive_int("steps", steps)
    strategy = strategy or tf.distribute.get_strategy()
    # The optimizer's variables (its step count from the start) belong to
    # the strategy it was created under.
    if not all(
        strategy.extended.variable_created_in_scope(variable.value)
        for variable in optimizer.variables
    ):
        raise ValueError(
            "The optimizer must be created inside `strategy.scope()`, like "
            "the model. Received an optimizer created under a different "
            "strategy."
        )
    with strategy.scope():
        if not model.built:
            inputs, _ = next(iter(dataset.take(1)))
            model(inputs, training=False)
        if not optimizer.built:
            optimizer.build(model.trainable_variables)

    def replica_step(inputs, target_out):
        context = tf.distribute.get_replica_context()
        real = tf.cast(tf.not_equal(target_out, pad_id), "float32")
        # Real tokens of the global batch: every replica divides by the same.
        num_tokens = context.all_reduce(tf.distribute.ReduceOp.SUM, tf.reduce_sum(real))
        with tf.GradientTape() as tape:
            logits = model(inputs, training=True)
            token_losses = tf.cast(loss.call(target_out, logits), "float32")
            share = tf.reduce_sum(token_losses * real) / tf.maximum(num_tokens, 1.0)
            total = share
            if model.losses:
                total += tf.add_n(model.losses) / context.num_replicas_in_sync
            scaled = optimizer.scale_loss(total)
        variables = model.trainable_variables
        # `apply` sums the gradients over the replicas before the update.
        optimizer.apply(tape.gradient(scaled, variables), variables)
        return share

    @tf.function
    def train_step(iterator):
        inputs, target_out = next(iterator)
        shares = strategy.run(replica_step, args=(inputs, target_out))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, shares, axis=None)

    iterator = iter(strategy.experimental_distribute_dataset(dataset))
    callbacks = keras.callbacks.CallbackList(list(callbacks), model=model)
    model.stop_training = False
    callbacks.on_train_begin()
    losses = []
    for step in range(int(optimizer.iterations.numpy()) + 1, steps + 1):
        losses.append(float(train_step(iterator)))
        callbacks.on_train_batch_end(step - 1, {"loss": losses[-1]})
        if model.stop_training:
            break
    callbacks.on_train_end({"loss": losses[-1]} if losses else {})
    return losses
