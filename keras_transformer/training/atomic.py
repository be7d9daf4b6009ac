"""Files written atomically: readers see the old file or the whole new one.

A run killed while writing (`kill -9`, a full disk) leaves a temporary file
beside the target (`NAME.tmp-PID`), which nothing reads and a resumed run
removes (`jobs.run_dir.remove_temporaries`), never half a file.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import keras


def write_atomically(path: str | os.PathLike, write: Callable) -> None:
    """Calls `write(file)` on a temporary file, then renames it to `path`.

    Readers see either the old file or the whole new one. The temporary
    file sits beside `path` (so the rename does not cross file systems) and
    is removed if `write` fails.
    """
    path = os.fspath(path)
    temporary = f"{path}.tmp-{os.getpid()}"
    try:
        with open(temporary, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def save_model_atomically(model: keras.Model, path: str | os.PathLike) -> None:
    """`model.save(path)` (a `.keras` file), atomically."""
    _save_through_temporary(model.save, path, ".keras")


def save_weights_atomically(model: keras.Model, path: str | os.PathLike) -> None:
    """`model.save_weights(path)` (a `.weights.h5` file), atomically."""
    _save_through_temporary(model.save_weights, path, ".weights.h5")


def _save_through_temporary(save, path: str | os.PathLike, suffix: str) -> None:
    """`save` to a temporary name with Keras's `suffix`, then rename to `path`."""
    path = os.fspath(path)
    temporary = f"{path.removesuffix(suffix)}.tmp-{os.getpid()}{suffix}"
    try:
        save(temporary)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
