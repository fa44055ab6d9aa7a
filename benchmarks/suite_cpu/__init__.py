"""Where the test suite's CPU goes: `python -m benchmarks.suite_cpu` (__main__.py), whose processes log their CPU
through sitecustomize.py in this folder."""
