"""Registers the pipeline's config schema with Hydra wherever Hydra scans for plugins.

DVC's `dvc exp run -S ...` composes conf/ in its own process (dvc.utils.hydra.compose_and_dump): it puts the
project root on sys.path and calls `hydra.core.plugins.Plugins.instance()`, which imports every module of the
`hydra_plugins` namespace package, this one included. Importing it stores the schema that conf/config.yaml names
(config_schema, pipeline.config.schema.register); each stage that DVC then runs refuses keys it does not declare.
(No hydra_plugins/__init__.py: the namespace is shared with the installed Hydra launchers.)

DVC composes the files of conf/ as they are: a list there too long to compose in reasonable time stops DVC's process
here, before it composes, with one message and exit 2 (pipeline.config.limits.check_conf_lists).
"""

import sys

from pipeline.base.errors import PipelineError
from pipeline.base.paths import Layout, checkout_root
from pipeline.config.limits import check_conf_lists
from pipeline.config.schema import register

register()
try:
    _conf = Layout(checkout_root()).conf_dir
except FileNotFoundError:  # Hydra scanning its plugins outside the project
    _conf = None
if _conf is not None:
    try:
        check_conf_lists(_conf)
    except PipelineError as exc:  # SystemExit: Hydra's scan of plugins catches only ImportError
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
