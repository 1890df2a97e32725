"""Moved to :mod:`trl_ext.resets.triggers`; this old import path keeps working."""

from trl_ext.resets.triggers import RESET_STATE_FILE, ReferenceResetCallback, ResetBookkeeping

__all__ = ["RESET_STATE_FILE", "ReferenceResetCallback", "ResetBookkeeping"]
