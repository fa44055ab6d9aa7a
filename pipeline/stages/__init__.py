"""DVC stage entry points: `python -m pipeline.stages.<name>`. Each reads params.yaml, checked against conf/."""
