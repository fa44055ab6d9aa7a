"""Torch devices and dtypes: `auto` takes cuda, then mps, then cpu; which dtype a device can work in."""

from __future__ import annotations

import torch

from pipeline.base.errors import PipelineError

DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16, "bfloat16": torch.bfloat16}


def resolve_device(name: str = "auto", key: str = "encoding.device") -> torch.device:
    """The torch device `name` (auto: cuda, then mps, then cpu) names; `key`: the config key that gave it, named in
    the error when the device is not available here."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise PipelineError(
            f"{key} = {name!r} but torch sees no CUDA device (torch {torch.__version__}): use {key}=auto or cpu."
        )
    if name == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise PipelineError(f"{key} = 'mps' but MPS is not available here: use {key}=auto or cpu.")
    try:
        return torch.device(name)
    except RuntimeError:
        raise PipelineError(f"{key} = {name!r} is not a device: use auto, cpu, cuda, cuda:N or mps.") from None


def resolve_dtype(name: str) -> torch.dtype:
    try:
        return DTYPES[name]
    except KeyError:
        raise PipelineError(f"dtype {name!r} is not supported: use one of {sorted(DTYPES)}.") from None


def has_float64(device: torch.device | str | None) -> bool:
    """Whether the device computes in float64 (MPS does not)."""
    return torch.device(device or "cpu").type != "mps"


def float64_capable(device: torch.device | str | None) -> torch.dtype:
    """float64 where the device has it (MPS does not), else float32: the dtype to accumulate in."""
    return torch.float64 if has_float64(device) else torch.float32


def synchronize(device: torch.device | str | None) -> None:
    """Wait for the device's queued kernels (for timing): a no-op on the CPU."""
    device = torch.device(device or "cpu")
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()
