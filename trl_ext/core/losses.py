"""Policy and value losses."""

from __future__ import annotations

import torch

from trl_ext.core._checks import check_2d, check_choice, check_same_shape

AGGREGATION_MODES = ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm")


def clipped_surrogate(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float | None = None,
    dual_clip: float | None = None,
) -> torch.Tensor:
    """Per-token PPO clipped surrogate loss to minimise (Schulman et al. 2017 Eq. 7; DAPO arXiv 2503.14476 Eq. 10).

    ρ = exp(logp − old_logp); ℓ = max(−A·ρ, −A·clip(ρ, 1 − ε_low, 1 + ε_high)), with ε_high = ε_low when None
    (DAPO's clip-higher sets ε_high > ε_low). Dual clip (Ye et al. 2020, arXiv 1912.09729 Eq. 5) with c > 1:
    where A < 0, ℓ = min(ℓ, −A·c). ``advantages`` is (B,) (one per sequence) or the shape of ``logp``.

    Stated reference: in training TRL computes this loss (GRPOTrainer._compute_loss, with ``epsilon``,
    ``epsilon_high`` and ``delta``); trainers never call this function. It states the formula TRL's loss is held to
    (tests/core/test_trl_loss_matches_core.py: TRL's GRPO training loss equals it with ``aggregate``).
    """
    check_same_shape(logp=logp, old_logp=old_logp)
    if advantages.dim() == 1 and logp.dim() == 2:
        if advantages.shape[0] != logp.shape[0]:
            raise ValueError(
                f"`advantages` has {advantages.shape[0]} rows but `logp` has {logp.shape[0]}; they must match."
            )
        advantages = advantages.unsqueeze(1)
    else:
        check_same_shape(logp=logp, advantages=advantages)
    eps_high = eps_low if eps_high is None else eps_high
    if eps_low < 0 or eps_high < 0:
        raise ValueError(f"`eps_low` and `eps_high` must be >= 0, got {eps_low} and {eps_high}.")
    if dual_clip is not None and dual_clip <= 1.0:
        raise ValueError(f"`dual_clip` must be > 1 (it bounds −A·ρ for A < 0), got {dual_clip}.")
    ratio = torch.exp(logp - old_logp)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high)
    loss = torch.maximum(unclipped, clipped)
    if dual_clip is not None:
        loss = torch.where(advantages < 0, torch.minimum(loss, -advantages * dual_clip), loss)
    return loss


def aggregate(
    per_token_loss: torch.Tensor,
    mask: torch.Tensor,
    mode: str,
    max_tokens: int | None = None,
    num_tokens: float | torch.Tensor | None = None,
) -> torch.Tensor:
    """Reduce a (B, T) per-token loss to a scalar over valid tokens (m = mask).

    token_mean (DAPO arXiv 2503.14476 Eq. 12):          Σ_{i,t} m·ℓ / Σ_{i,t} m, or Σ_{i,t} m·ℓ / num_tokens
    seq_mean_token_mean (GRPO, DeepSeekMath Eq. 3):     mean_i(Σ_t m·ℓ / Σ_t m)  (an empty row counts as 0)
    seq_mean_token_sum_norm (Dr GRPO arXiv 2503.20783 §3.1): mean_i(Σ_t m·ℓ) / max_tokens
    ``num_tokens`` (token_mean only) is the token count of the batch the mean is over when ``per_token_loss`` is
    one micro-batch of it: DAPO averages over all tokens of the optimizer step, so each micro-batch divides by
    the step's count, not its own. TRL's "dapo" uses num_items_in_batch / processes · grad_accum / steps_per_gen.
    In training these are TRL's loss_type "dapo", "grpo" and "dr_grpo": trainers reuse TRL's, not this.

    Stated reference: trainers never call this function; it states the normalisers TRL's loss is held to
    (tests/core/test_trl_loss_matches_core.py, every loss_type, one and two processes).
    """
    check_choice("mode", mode, AGGREGATION_MODES)
    check_2d("per_token_loss", per_token_loss)
    check_same_shape(per_token_loss=per_token_loss, mask=mask)
    m = mask.to(per_token_loss.dtype)
    masked = torch.where(mask.bool(), per_token_loss, torch.zeros_like(per_token_loss))
    if num_tokens is not None and mode != "token_mean":
        raise ValueError(f"`num_tokens` applies to mode='token_mean' only, got mode={mode!r}.")
    if mode == "token_mean":
        if num_tokens is None:
            return masked.sum() / m.sum().clamp(min=1.0)
        if float(num_tokens) <= 0:
            raise ValueError(f"`num_tokens` must be > 0 (a token count), got {float(num_tokens)}.")
        return masked.sum() / num_tokens
    if mode == "seq_mean_token_mean":
        return (masked.sum(dim=1) / m.sum(dim=1).clamp(min=1.0)).mean()
    if max_tokens is None or max_tokens <= 0:
        raise ValueError(
            "`max_tokens` must be a positive int for mode='seq_mean_token_sum_norm' (Dr GRPO divides by the "
            f"maximum completion length, a constant), got {max_tokens!r}."
        )
    return masked.sum(dim=1).mean() / max_tokens


def clipped_value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    clip_range: float,
) -> torch.Tensor:
    """PPO clipped value loss (Schulman et al. 2017 baselines ppo2; Huang et al. 2022 "37 details" #9).

    ½·max((V − R)², (clip(V, V_old − c, V_old + c) − R)²), token mean over valid tokens.
    """
    check_2d("values", values)
    check_same_shape(values=values, old_values=old_values, returns=returns, mask=mask)
    if clip_range <= 0:
        raise ValueError(f"`clip_range` must be > 0, got {clip_range}.")
    clipped = old_values + torch.clamp(values - old_values, -clip_range, clip_range)
    loss = 0.5 * torch.maximum((values - returns) ** 2, (clipped - returns) ** 2)
    return aggregate(loss, mask, "token_mean")
