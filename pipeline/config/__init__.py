"""Layer 2, configuration: conf/ (Hydra) -> params.yaml -> a validated config for the stages.

The schema (pipeline/config/schema.py) declares every key, type and rule once; `compose` registers it with
Hydra's ConfigStore (schema.register) before composing, and hydra_plugins/ does in DVC's process.
"""

from pipeline.config.params import (
    check_inputs,
    CONFIG_NAME,
    check,
    check_fresh,
    check_runnable,
    compose,
    dump_params,
    load,
    read_params,
    write_params,
)
from pipeline.config.schema import GROUPS, validate

__all__ = [
    "CONFIG_NAME",
    "GROUPS",
    "check",
    "check_fresh",
    "check_runnable",
    "check_inputs",
    "compose",
    "dump_params",
    "load",
    "read_params",
    "validate",
    "write_params",
]
