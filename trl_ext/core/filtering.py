"""Group filtering for dynamic sampling."""

from __future__ import annotations

import torch

from trl_ext.core._checks import as_groups


def informative_groups(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """Which groups carry a learning signal (DAPO, arXiv 2503.14476 §3.2 Eq. 11: 0 < |{correct}| < G).

    A group is informative iff the std of its valid (non-NaN) filter metric is > 0, i.e. at least two valid
    members differ. The filter metric must be the raw task reward, never the shaped sum (NeMo-RL issue 2431 is that bug).
    Returns a bool tensor with one entry per group.
    """
    grouped = as_groups(rewards, group_size)
    valid = ~torch.isnan(grouped)
    high = torch.where(valid, grouped, torch.full_like(grouped, -torch.inf)).amax(dim=1)
    low = torch.where(valid, grouped, torch.full_like(grouped, torch.inf)).amin(dim=1)
    return (valid.sum(dim=1) >= 2) & (high > low)
