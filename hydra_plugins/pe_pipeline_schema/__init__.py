"""Registers the pipeline's config schema with Hydra wherever Hydra scans for plugins.

DVC's `dvc exp run -S ...` composes conf/ in its own process (dvc.utils.hydra.compose_and_dump): it puts the
project root on sys.path and calls `hydra.core.plugins.Plugins.instance()`, which imports every module of the
`hydra_plugins` namespace package, this one included. Importing it stores the schema that conf/config.yaml names
(config_schema, pipeline.config.schema.register); each stage that DVC then runs refuses keys it does not declare.
(No hydra_plugins/__init__.py: the namespace is shared with the installed Hydra launchers.)
"""

from pipeline.config.schema import register

register()
