"""The `keras-transformer` command's entry point: its environment first.

TensorFlow reads `TF_CPP_MIN_LOG_LEVEL` when it is imported and
`TF_CPU_ALLOCATOR_USE_BFC` when it creates its first CPU tensor, and writes
its C++ start-up lines to stderr whatever the level. Importing any module of
`keras_transformer` imports Keras, and with it TensorFlow (the command's
backend), so the command's entry point is this separate package: `run`
parses the arguments (`keras_transformer_cli.parser`, argparse alone), sets
the environment, then imports `keras_transformer.cli` and runs the job
there. `python -m keras_transformer_cli` runs it too.
"""

import contextlib
import gc
import os
import sys

from keras_transformer_cli.parser import build_parser


def run() -> None:
    """The `keras-transformer` executable.

    Parses the arguments first (`build_parser`, argparse alone):
    `--help`, `--version` and usage errors answer without importing
    TensorFlow. Unless `-v` is given, TensorFlow's logs are then silenced
    (its log level and, while TensorFlow is imported, the process's stderr)
    before `keras_transformer.cli` is imported to run the job. The process
    exits with the job's status, its objects frozen out of the interpreter's
    last garbage collections: over TensorFlow's objects they took about a
    second at exit, a sixth of a one-line `translate` (docs/benchmarks_archive.md).
    """
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:])
    if args.command is None:
        parser.print_help()
        sys.exit(2)
    use_memory_pool()
    try:
        if args.verbose:
            from keras_transformer import cli
        else:
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
            with _stderr_to_devnull():
                from keras_transformer import cli
    except KeyboardInterrupt:  # Ctrl-C while TensorFlow starts: one line too
        print(f"{parser.prog} {args.command}: interrupted", file=sys.stderr)
        sys.exit(130)
    code = cli.run_job(args)
    gc.freeze()
    sys.exit(code)


def use_memory_pool() -> None:
    """Sets `TF_CPU_ALLOCATOR_USE_BFC=true` unless the environment sets it.

    TensorFlow then keeps the memory of freed tensors in a pool for the next
    ones instead of returning it to the system. A training step allocates
    the same large tensors every time (the logits alone are tokens x
    vocabulary floats), and without the pool each costs a page fault per
    4 KiB page: an addition over 2048 x 8000 floats took 29 ms without it
    and 6 ms with it (docs/benchmarks_archive.md). The library itself sets nothing:
    a program that imports it sets the variable itself if it wants the pool.
    """
    os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")


@contextlib.contextmanager
def _stderr_to_devnull():
    """Points the process's stderr (file descriptor 2) at /dev/null.

    TensorFlow's C++ start-up lines ignore `TF_CPP_MIN_LOG_LEVEL`. An
    exception raised inside is reported after stderr is restored.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(devnull)
        os.close(saved)
