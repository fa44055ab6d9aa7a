"""`python -m benchmarks.gpu`: see benchmarks/gpu/__init__.py."""

from benchmarks.gpu.check import main

if __name__ == "__main__":
    main()
