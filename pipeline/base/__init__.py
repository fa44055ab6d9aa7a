"""Layer 0, used by every other layer: user errors, atomic files, paths and the output layout, nested-dict helpers."""
