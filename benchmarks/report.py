"""What every benchmark prints first (the machine) and does last (record the load, write the results JSON)."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any


def machine_line(torch: Any) -> str:
    """torch version, threads, CPUs, processor and the current load average, on one line."""
    return (
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs "
        f"({platform.processor() or platform.machine()}), load average {os.getloadavg()[0]:.2f}"
    )


def goal(value: float, target: float, unit: str = "x", at_most: bool = False) -> str:
    """A measured ratio against its goal (issue 42), e.g. 'goal >= 10x: met'."""
    met = value <= target if at_most else value >= target
    return f"goal {'<=' if at_most else '>='} {target:g}{unit}: {'met' if met else 'NOT met'}"


def finish(results: dict, out: str | Path) -> dict:
    """Add the load average at the end (a loaded machine makes every time longer), write `out`, say where."""
    from pipeline.base.files import write_json

    results["load_average_end"] = os.getloadavg()[0]
    write_json(Path(out), results)
    print(f"\nresults: {out}")
    return results
