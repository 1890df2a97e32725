"""Moved to :mod:`trl_ext.resets`; this old import path keeps working."""

from trl_ext.resets.arguments import ReferenceResetArguments
from trl_ext.resets.mixin import ReferenceResetMixin

__all__ = ["ReferenceResetArguments", "ReferenceResetMixin"]
