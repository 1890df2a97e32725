"""Pure tensor math for trl_ext: each formula once (stated in its docstring, audited in docs/paper_audit.md), as a small function that imports torch only."""

from trl_ext.core.advantages import gae, group_normalized, leave_one_out, minibatch_normalized, whiten
from trl_ext.core.filtering import informative_groups
from trl_ext.core.kl import kl_estimate
from trl_ext.core.losses import aggregate, clipped_surrogate, clipped_value_loss
from trl_ext.core.preference import (
    bradley_terry_loss,
    combine_rewards,
    dpo_margin_loss,
    listwise_pair_weight,
    margin_as_logratio_offset,
)
from trl_ext.core.shaping import overlong_penalty

__all__ = [
    "aggregate",
    "bradley_terry_loss",
    "clipped_surrogate",
    "clipped_value_loss",
    "combine_rewards",
    "dpo_margin_loss",
    "gae",
    "group_normalized",
    "informative_groups",
    "kl_estimate",
    "leave_one_out",
    "listwise_pair_weight",
    "margin_as_logratio_offset",
    "minibatch_normalized",
    "overlong_penalty",
    "whiten",
]
