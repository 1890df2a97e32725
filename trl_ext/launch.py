"""Moved to :mod:`trl_ext.cli.launch`; this old import path keeps working."""

from trl_ext.cli.launch import (
    ACCELERATE_CONFIGS,
    FLAG,
    accelerate_config_path,
    accelerate_launch_args,
    launch,
)

__all__ = ["ACCELERATE_CONFIGS", "FLAG", "accelerate_config_path", "accelerate_launch_args", "launch"]
