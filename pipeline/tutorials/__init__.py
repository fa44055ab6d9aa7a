"""Layer 2, the tutorials' side features: TextVectorization, position-embedding modules, masks (their figures:
pipeline.figures.tutorials)."""
