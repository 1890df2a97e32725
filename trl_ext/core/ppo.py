"""PPO rollout formulas: per-token rewards, adaptive KL coefficient, value diagnostics.

Tensors are (B, T) over completion tokens with a 0/1 ``mask`` of valid tokens. Functions that feed training
statistics take an optional ``all_reduce_sum`` (sums a tensor across processes) so that the statistics are global
without gathering (B, T) tensors, whose T differs per process.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from trl_ext.core._checks import check_2d, check_same_shape

AllReduceSum = Callable[[torch.Tensor], torch.Tensor]


def _identity(x: torch.Tensor) -> torch.Tensor:
    return x


def last_valid_index(mask: torch.Tensor) -> torch.Tensor:
    """Per row, the index of the last valid token (mask = 1); −1 for a row without valid tokens."""
    check_2d("mask", mask)
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
    return torch.where(mask.bool(), positions, torch.full_like(positions, -1)).max(dim=1).values


def token_rewards(scores: torch.Tensor, kl: torch.Tensor, mask: torch.Tensor, kl_coef: float) -> torch.Tensor:
    """Per-token rewards with the KL penalty in the reward (Ziegler et al. 2019 §2.2; Ouyang et al. 2022 Eq. 2).

    r_t = −β·kl_t on every valid token t, plus the sequence score s on the last valid token:
    r_{i,T_i} = s_i − β·kl_{i,T_i}. ``scores`` is (B,); ``kl`` the per-token KL estimate (k1 in InstructGPT).
    Masked positions get 0; a row without valid tokens gets no score.
    """
    check_2d("kl", kl)
    check_same_shape(kl=kl, mask=mask)
    if scores.dim() != 1 or scores.shape[0] != kl.shape[0]:
        raise ValueError(f"`scores` must have shape ({kl.shape[0]},), got {tuple(scores.shape)}.")
    if kl_coef < 0:
        raise ValueError(f"`kl_coef` must be >= 0, got {kl_coef}.")
    valid = mask.bool()
    rewards = torch.where(valid, -kl_coef * kl, torch.zeros_like(kl))
    last = last_valid_index(mask)
    rows = torch.nonzero(last >= 0).squeeze(1)
    rewards[rows, last[rows]] += scores[rows].to(rewards.dtype)
    return rewards


def adaptive_kl_coef(kl_coef: float, kl: float, target: float, horizon: int, n_steps: int) -> float:
    """Adaptive KL coefficient (Ziegler et al. 2019, arXiv 1909.08593 §2.2, Eq. 2).

    e = clip(KL / KL_target − 1, −0.2, 0.2); β ← β·(1 + K_β·e) with K_β = n_steps / horizon, where KL is the
    batch-mean KL per sequence and n_steps the number of sequences the update covers.
    """
    if target <= 0 or horizon <= 0:
        raise ValueError(f"`target` and `horizon` must be > 0, got {target} and {horizon}.")
    error = min(max(kl / target - 1.0, -0.2), 0.2)
    return kl_coef * (1.0 + error * n_steps / horizon)


def explained_variance(
    values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor, all_reduce_sum: AllReduceSum | None = None
) -> torch.Tensor:
    """Explained variance of the value predictions (as logged by OpenAI baselines ppo2 and Huang et al. 2022).

    1 − Var[R − V] / Var[R] over the valid tokens (population variances, ddof = 0); NaN when Var[R] = 0 or there
    is no valid token. 1 is a perfect critic, 0 no better than a constant, negative worse.
    """
    check_same_shape(values=values, returns=returns, mask=mask)
    reduce = all_reduce_sum or _identity
    m = mask.to(values.dtype)
    residual = returns - values
    sums = reduce(torch.stack([m.sum(), (returns * m).sum(), (residual * m).sum()]))
    count = sums[0]
    if count < 1:
        return torch.tensor(float("nan"), device=values.device)
    mean_returns, mean_residual = sums[1] / count, sums[2] / count
    squares = torch.stack([((returns - mean_returns) ** 2 * m).sum(), ((residual - mean_residual) ** 2 * m).sum()])
    var_returns, var_residual = reduce(squares) / count
    if var_returns == 0:
        return torch.tensor(float("nan"), device=values.device)
    return 1.0 - var_residual / var_returns


def value_clip_fraction(
    values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor, clip_range: float
) -> torch.Tensor:
    """Fraction of valid tokens where the clip of the clipped value loss is active: V lies outside
    [V_old − c, V_old + c] and the clipped term (clip(V, V_old − c, V_old + c) − R)² is the larger one of the max in
    ``trl_ext.core.losses.clipped_value_loss`` (tokens inside the range are never counted, whatever the rounding)."""
    check_same_shape(values=values, old_values=old_values, returns=returns, mask=mask)
    clipped = old_values + torch.clamp(values - old_values, -clip_range, clip_range)
    outside = (values - old_values).abs() > clip_range
    picked = outside & ((clipped - returns) ** 2 > (values - returns) ** 2) & mask.bool()
    return picked.sum().to(values.dtype) / mask.sum().clamp(min=1).to(values.dtype)
