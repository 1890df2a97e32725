"""Preference data: pairs mined from verifiable rewards, listwise rankings expanded into weighted pairs."""

from trl_ext.data.listwise import expand_listwise, is_listwise
from trl_ext.data.pairs import PairMiningStats, build_preference_pairs, select_pairs

__all__ = ["PairMiningStats", "build_preference_pairs", "expand_listwise", "is_listwise", "select_pairs"]
