"""Advantage estimators, one function each.

Rewards are flat (N,) tensors whose groups of ``group_size`` completions of the same prompt are contiguous.
A NaN reward (every reward function returned None) is left out of every statistic and gets advantage 0.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from trl_ext.core._checks import as_groups, check_2d, check_choice, check_same_shape

EPS = 1e-4


def _nanstd(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Bessel-corrected std ignoring NaN (as TRL's ``nanstd``); NaN where fewer than two values are valid."""
    valid = ~torch.isnan(x)
    count = valid.sum(dim=dim, keepdim=True)
    mean = torch.nanmean(x, dim=dim, keepdim=True)
    squared = torch.where(valid, (x - mean) ** 2, torch.zeros_like(x)).sum(dim=dim, keepdim=True)
    return torch.sqrt(squared / (count - 1)).squeeze(dim)


def _zero_nan(x: torch.Tensor) -> torch.Tensor:
    return torch.nan_to_num(x, nan=0.0)


def group_centered(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """Ã_i = r_i − mean_g, the mean over the valid (non-NaN) members of i's group; NaN members stay NaN."""
    grouped = as_groups(rewards, group_size)
    return (grouped - torch.nanmean(grouped, dim=1, keepdim=True)).view(-1)


def group_normalized(rewards: torch.Tensor, group_size: int, scale: str = "group", eps: float = EPS) -> torch.Tensor:
    """GRPO group-relative advantage (Shao et al. 2024, DeepSeekMath §4.1.2; Dr GRPO, arXiv 2503.20783 §3.1).

    scale="group": A_i = (r_i − mean_g) / (std_g + eps), std Bessel-corrected (GRPO).
    scale="none":  A_i = r_i − mean_g (Dr GRPO removes the std normalisation).
    A group whose std is undefined (one valid member) gets A = 0 for that member.
    """
    check_choice("scale", scale, ("group", "none"))
    centred = group_centered(rewards, group_size)
    if scale == "group":
        std = _nanstd(as_groups(rewards, group_size), dim=1).repeat_interleave(group_size)
        centred = centred / (std + eps)
    return _zero_nan(centred)


def leave_one_out(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """RLOO advantage (Ahmadian et al. 2024, arXiv 2402.14740 §3; Kool et al. 2019).

    A_i = r_i − mean_{j≠i} r_j = G/(G−1)·(r_i − mean_g). NaN members are left out of the baseline and get
    A = 0; a member with no other valid member in its group has no baseline and gets A = 0.
    """
    if not isinstance(group_size, int) or group_size < 2:
        raise ValueError(f"`group_size` must be >= 2 for a leave-one-out baseline, got {group_size!r}.")
    grouped = as_groups(rewards, group_size)
    valid = ~torch.isnan(grouped)
    values = torch.where(valid, grouped, torch.zeros_like(grouped))
    others_sum = values.sum(dim=1, keepdim=True) - values
    others_count = valid.sum(dim=1, keepdim=True) - valid.to(torch.long)
    baseline = others_sum / others_count.clamp(min=1)
    advantages = torch.where(valid & (others_count > 0), grouped - baseline, torch.zeros_like(grouped))
    return advantages.view(-1)


def minibatch_normalized(
    rewards: torch.Tensor, group_size: int, minibatch_size: int, eps: float = EPS
) -> torch.Tensor:
    """Magistral advantage (Mistral-AI 2025, arXiv 2506.10910 §2.1; Andrychowicz et al. 2020).

    Ã_i = r_i − mean_g; then within each consecutive block B of ``minibatch_size`` sequences (the last block
    may be shorter): A_i = (Ã_i − mean_B Ã) / (std_B Ã + eps), one value per sequence. NaN members are left
    out of both statistics and get A = 0.
    """
    if not isinstance(minibatch_size, int) or minibatch_size < 1:
        raise ValueError(f"`minibatch_size` must be a positive int, got {minibatch_size!r}.")
    centred = group_centered(rewards, group_size)
    out = torch.empty_like(centred)
    for start in range(0, centred.numel(), minibatch_size):
        block = centred[start : start + minibatch_size].unsqueeze(0)
        mean = torch.nanmean(block, dim=1, keepdim=True)
        std = _nanstd(block, dim=1).unsqueeze(1)
        out[start : start + minibatch_size] = _zero_nan((block - mean) / (std + eps)).squeeze(0)
    return out


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    gamma: float = 1.0,
    lam: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation (Schulman et al. 2016, arXiv 1506.02438 Eq. 16) on (B, T) tokens.

    δ_t = r_t + γ·V_{t+1} − V_t and A_t = δ_t + γλ·A_{t+1}, where t+1 is the next VALID token of the row
    (masked positions are skipped) and V after the last valid token is 0. Returns (A, A + V), both 0 on masked
    positions.
    """
    for name, tensor in (("rewards", rewards), ("values", values), ("mask", mask)):
        check_2d(name, tensor)
    check_same_shape(rewards=rewards, values=values, mask=mask)
    for name, value in (("gamma", gamma), ("lam", lam)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"`{name}` must lie in [0, 1], got {value}.")
    valid = mask.bool()
    advantages = torch.zeros_like(values)
    next_value = torch.zeros_like(values[:, 0])
    next_advantage = torch.zeros_like(values[:, 0])
    for t in reversed(range(values.shape[1])):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        advantage_t = delta + gamma * lam * next_advantage
        m = valid[:, t]
        advantages[:, t] = torch.where(m, advantage_t, torch.zeros_like(advantage_t))
        next_value = torch.where(m, values[:, t], next_value)
        next_advantage = torch.where(m, advantage_t, next_advantage)
    returns = torch.where(valid, advantages + values, torch.zeros_like(values))
    return advantages, returns


def whiten(
    values: torch.Tensor,
    mask: torch.Tensor,
    shift_mean: bool = True,
    all_reduce_sum: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """Whitening over valid tokens (as in InstructGPT-style PPO, Ouyang et al. 2022; Huang et al. 2022).

    (x − mean) / sqrt(var + 1e-8), mean and Bessel-corrected var over the valid tokens of the whole batch;
    masked positions are 0. With ``shift_mean=False`` the mean is added back. In training, pass
    ``all_reduce_sum`` (sums a tensor across processes) so the statistics are global: only sums (count, Σx, then
    Σ(x − mean)²) cross processes, never the (B, T) tensor, whose T differs per process.
    """
    check_same_shape(values=values, mask=mask)
    m = mask.to(values.dtype)
    values = torch.where(mask.bool(), values, torch.zeros_like(values))
    reduce = all_reduce_sum if all_reduce_sum is not None else (lambda x: x)
    count_and_sum = reduce(torch.stack([m.sum(), (values * m).sum()]))
    count = count_and_sum[0]
    if count < 2:
        raise ValueError(f"`mask` must select at least two valid tokens to whiten, got {int(count)}.")
    mean = count_and_sum[1] / count
    # Two passes (mean, then squared deviations): stable where E[x²] − E[x]² would cancel.
    var = reduce((((values - mean) ** 2) * m).sum()) / (count - 1)
    whitened = (values - mean) * torch.rsqrt(var + 1e-8)
    if not shift_mean:
        whitened = whitened + mean
    return whitened * m
