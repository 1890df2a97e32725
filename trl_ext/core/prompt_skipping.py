"""GRESO pre-rollout prompt skipping (Zheng et al. 2025, "Act Only When It Pays", arXiv 2506.02177 §4, Algorithm 1).

A prompt whose last z rollouts were all zero-variance (every completion of its group got the same reward) is
skipped before generation with probability 1 − p_e^z, where p_e is an exploration probability adapted during
training so that the zero-variance rate of the prompts actually rolled out stays near a target.

Paper defaults (its released training scripts): p_e starts at 0.5, moves by Δp = 0.01 per step inside
[0.05, 0.95], the target zero-variance rate is α = 0.25 (a target informative rate of 0.75), and every prompt keeps
at least a 1% chance of being rolled out (the skip probability is capped at 0.99). The paper keeps two
probabilities, for all-correct ("easy", target α/3) and all-wrong ("hard", target 2α/3) prompts; trl_ext keeps
one p_e for every zero-variance prompt, because a general reward function does not say which side is "correct".
"""

from __future__ import annotations

import torch

EXPLORATION_STEP = 0.01  # Δp, per adjustment
EXPLORATION_BOUNDS = (0.05, 0.95)  # p_e stays inside
MIN_ROLLOUT_PROBABILITY = 0.01  # no prompt is skipped with probability above 0.99


def greso_skip_probability(
    zero_variance_streak: torch.Tensor, exploration: float, min_rollout: float = MIN_ROLLOUT_PROBABILITY
) -> torch.Tensor:
    """P(skip) = 1 − max(p_e^z, min_rollout) per prompt (GRESO, arXiv 2506.02177 Algorithm 1).

    ``zero_variance_streak`` holds z, the number of most recent consecutive rollouts of each prompt that were all
    zero-variance (0 for a prompt never seen or informative last time: never skipped); ``exploration`` is p_e.
    """
    if not 0.0 < exploration <= 1.0:
        raise ValueError(f"exploration probability must lie in (0, 1], got {exploration}.")
    streak = zero_variance_streak.to(torch.float64)
    if (streak < 0).any():
        raise ValueError("zero_variance_streak must be >= 0.")
    return 1.0 - torch.clamp(torch.as_tensor(exploration, dtype=torch.float64) ** streak, min=min_rollout)


def greso_adjust_exploration(
    exploration: float,
    zero_variance_rate: float,
    target_zero_variance_rate: float,
    step: float = EXPLORATION_STEP,
    bounds: tuple[float, float] = EXPLORATION_BOUNDS,
) -> float:
    """One adjustment of p_e (GRESO, arXiv 2506.02177 §4): skip more when too many rolled-out prompts were
    zero-variance, less otherwise.

    p_e ← max(p_e − Δp, low) if rate ≥ target, else min(p_e + Δp, high); ``rate`` is the zero-variance fraction of
    the prompts rolled out since the last adjustment.
    """
    low, high = bounds
    if zero_variance_rate >= target_zero_variance_rate:
        return max(exploration - step, low)
    return min(exploration + step, high)
