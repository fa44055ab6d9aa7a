"""What ran the check: the device (name, memory, CUDA properties), the CPU, and the versions of Python, torch,
CUDA, numpy and scipy."""

from __future__ import annotations

import os
import platform

import numpy as np
import scipy
import torch


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe(device: torch.device) -> dict:
    info = {
        "type": device.type,
        "name": cpu_name(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(
            name=props.name,
            total_memory=props.total_memory,
            capability=f"{props.major}.{props.minor}",
            multiprocessors=props.multi_processor_count,
            memory_clock_khz=getattr(props, "memory_clock_rate", None),
            memory_bus_width_bits=getattr(props, "memory_bus_width", None),
            cudnn=torch.backends.cudnn.version(),
            tf32_matmul=torch.backends.cuda.matmul.allow_tf32,
        )
    return info
