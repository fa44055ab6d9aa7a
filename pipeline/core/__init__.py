"""Layer 1, the numerical core (torch/numpy, no files, no config): positional encodings and their diagnostics,
learned (random) position tables, weight pairs, batched PCA projections, the sweep metrics, devices."""
