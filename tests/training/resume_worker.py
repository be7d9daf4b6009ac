"""Runs the training job on a recipe in a fresh process; used by the tests.

    python resume_worker.py mirrored RECIPE.yaml
        Splits the CPU into two logical devices and trains the recipe under
        a `MirroredStrategy` over /cpu:0 and /cpu:1.

    python resume_worker.py multi_worker RECIPE.yaml
        One worker of the `TF_CONFIG` cluster.

The recipe's `training.strategy` must name the same strategy. The test
kills this process with SIGKILL while it trains, starts it again, and
compares the final weights with those of an uninterrupted run.
"""

import sys


def main(strategy: str, recipe: str) -> None:
    import tensorflow as tf

    if strategy == "mirrored":
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2
        )
    from keras_transformer.config import load_config
    from keras_transformer.jobs import train

    if strategy == "mirrored":
        # The job mirrors over the machine's devices: here, the two halves.
        train.make_strategy = lambda name: tf.distribute.MirroredStrategy(
            ["/cpu:0", "/cpu:1"]
        )
    config = load_config(recipe)
    assert config.training.strategy == strategy, config.training.strategy
    train.train_from_config(config, verbose=0, evaluate=False)


if __name__ == "__main__":
    main(*sys.argv[1:3])
