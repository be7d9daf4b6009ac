"""Writing figures to files."""

import os
from pathlib import Path

from matplotlib.figure import Figure


def save_figure(fig: Figure, path: str | os.PathLike, dpi: int = 150) -> Path:
    """Saves a figure, creating missing parent directories.

    The format follows the file extension (`.png`, `.svg`, `.pdf`, ...).
    Works with figures built by the object API (`Figure()`), which never
    open a window.

    Args:
        fig: the figure, e.g. from `plot_attention_heads`.
        path: file to write.
        dpi: resolution of raster formats.

    Returns:
        The path written, as a `pathlib.Path`.

    Example:

    >>> import tempfile
    >>> from keras_transformer.visualization import plot_positional_encoding
    >>> fig = plot_positional_encoding(20, 8, dimensions=(0,))
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = save_figure(fig, Path(tmp) / "plots" / "pe.png", dpi=50)
    ...     path.name, path.stat().st_size > 0
    ('pe.png', True)
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    return path
