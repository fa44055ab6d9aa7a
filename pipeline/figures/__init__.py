"""Layer 3, figures: every figure of the pipeline, one module per kind named by what it draws (see folders.py for
which figures each stage draws), on the primitives of drawing.py and labels.py."""
