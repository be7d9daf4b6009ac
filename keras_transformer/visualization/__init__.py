"""Figures: attention heads, positional encoding, learning-rate schedules, and
diagrams of the architecture (Figures 1 and 2 of the paper, layers, masks).

Every function returns a `matplotlib.figure.Figure` built with matplotlib's
object API, so no window opens and pyplot's global state is untouched; show
one in a notebook by leaving it as the cell's value, or write it with
`save_figure`.
"""

from keras_transformer.visualization.attention import plot_attention_heads
from keras_transformer.visualization.diagrams import (
    plot_attention_masks,
    plot_multi_head_diagram,
    plot_sublayer_diagram,
    plot_transformer_diagram,
)
from keras_transformer.visualization.positional_encoding import (
    plot_positional_encoding,
)
from keras_transformer.visualization.saving import save_figure
from keras_transformer.visualization.schedule import plot_learning_rate

__all__ = [
    "plot_attention_heads",
    "plot_attention_masks",
    "plot_learning_rate",
    "plot_multi_head_diagram",
    "plot_positional_encoding",
    "plot_sublayer_diagram",
    "plot_transformer_diagram",
    "save_figure",
]
