"""Model sizes: the paper's Table 3 and small ones for CPUs."""

PRESETS = {
    # Vaswani et al. 2017, Table 3, "base": 65M parameters with ~37000 tokens.
    "base": dict(num_layers=6, d_model=512, num_heads=8, d_ff=2048, dropout=0.1),
    # Table 3, "big": 213M parameters; P_drop 0.3 for English-German.
    "big": dict(num_layers=6, d_model=1024, num_heads=16, d_ff=4096, dropout=0.3),
    # Sized for a few CPU cores: Multi30k-scale corpora in about an hour.
    "small": dict(num_layers=3, d_model=256, num_heads=4, d_ff=1024, dropout=0.1),
    # Trains in minutes on two CPU cores: the demo and the notebooks.
    "tiny": dict(num_layers=2, d_model=128, num_heads=4, d_ff=512, dropout=0.1),
}
"""Hyper-parameters by preset name, as keyword arguments of `Transformer`."""
