"""The choice lists of the encoding core, declared once: plain tuples, no imports, so that the config schema reads
them at compose time without importing torch (pipeline.core.encoding and rope use them)."""

from __future__ import annotations

LAYOUTS = ("interleaved", "concatenated")  # the sinusoid's sin/cos layout (pipeline.core.encoding)
ROPE_LAYOUTS = ("interleaved", "half_split")  # how RoPE pairs coordinates (pipeline.core.rope)
# the dtypes a run may ask for (pipeline.core.device maps them and more): fp16 / bf16 angles are badly wrong
DTYPES = ("float32", "float64")
# The length-generalisation experiment (pipeline/length/): the position families its model compares and the
# synthetic tasks it trains on
LENGTH_FAMILIES = ("sinusoidal", "learned", "rope", "alibi", "nope", "randomized")
LENGTH_TASKS = ("copy", "reverse")
