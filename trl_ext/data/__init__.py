"""Preference data: pairs mined from verifiable rewards, listwise rankings expanded into weighted pairs."""

from __future__ import annotations

from typing import Any

__all__ = ["PairMiningStats", "build_preference_pairs", "expand_listwise", "is_listwise", "select_pairs"]


def __getattr__(name: str) -> Any:
    """The preference-data names, imported on first use: they pull in torch and transformers, which the light
    users of this package (dataset loading for `trl-ext`, hence `trl-ext sandbox-serve`'s start) never need."""
    if name in ("expand_listwise", "is_listwise"):
        from trl_ext.data import listwise

        return getattr(listwise, name)
    if name in ("PairMiningStats", "build_preference_pairs", "select_pairs"):
        from trl_ext.data import pairs

        return getattr(pairs, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
