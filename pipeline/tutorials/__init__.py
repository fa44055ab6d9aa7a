"""Layer 3, the tutorials' side features: TextVectorization, position-embedding modules, masks, their figures."""
