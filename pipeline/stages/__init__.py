"""DVC stage entry points, one module per stage: `python -m pipeline.stages.<name>` runs `run(params, layout, root)`.

Which stages exist, in which order, and what each reads and writes is declared once, in
`pipeline.stages.registry` (kept out of this package so that editing it re-runs no stage).
"""
