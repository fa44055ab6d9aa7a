"""Pick the torch device: `auto` takes cuda, then mps, then cpu."""
from __future__ import annotations

import torch

from pipeline.errors import PipelineError

DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16, "bfloat16": torch.bfloat16}


def resolve_device(name: str = "auto") -> torch.device:
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise PipelineError(f"encoding.device = {name!r} but torch sees no CUDA device (torch {torch.__version__}): "
                            "use encoding.device=auto or cpu.")
    if name == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise PipelineError("encoding.device = 'mps' but MPS is not available here: use encoding.device=auto or cpu.")
    try:
        return torch.device(name)
    except RuntimeError:
        raise PipelineError(f"encoding.device = {name!r} is not a device: use auto, cpu, cuda, cuda:N or mps.") from None


def resolve_dtype(name: str) -> torch.dtype:
    try:
        return DTYPES[name]
    except KeyError:
        raise PipelineError(f"dtype {name!r} is not supported: use one of {sorted(DTYPES)}.") from None


def float64_capable(device: torch.device) -> torch.dtype:
    """float64 where the device has it (MPS does not), else float32."""
    return torch.float32 if device.type == "mps" else torch.float64
