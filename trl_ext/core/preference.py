"""Preference formulas: DPO with a per-pair margin, Bradley–Terry reward-model loss, listwise pair weights.

Notation: Δ = (logπ_θ(y_w) − logπ_ref(y_w)) − (logπ_θ(y_l) − logπ_ref(y_l)) is the DPO log-ratio difference of a
pair, β the DPO temperature, m the pair's margin, r_w / r_l the reward-model scores of the chosen / rejected item.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from trl_ext.core._checks import check_choice, check_same_shape

# DPO loss types for which a margin is defined: each is a function of βΔ alone, so the margin enters as βΔ − m.
MARGIN_LOSS_TYPES = ("sigmoid", "hinge", "robust")


def dpo_margin_loss(
    delta: torch.Tensor,
    margin: torch.Tensor,
    beta: float,
    loss_type: str = "sigmoid",
    label_smoothing: float = 0.0,
) -> torch.Tensor:
    """Per-pair DPO loss with a margin: the logit z = β·Δ − m replaces β·Δ.

    - ``sigmoid``: −log σ(z). DPO with an offset (ODPO, Amini et al. 2024, arXiv 2402.10571, Eq. 5).
    - ``hinge``: max(0, 1 − z). The SLiC hinge (Zhao et al. 2023, arXiv 2305.10425) with the same offset.
    - ``robust``: (−(1−ε)·log σ(z) + ε·log σ(−z)) / (1 − 2ε), ε = ``label_smoothing``
      (robust DPO, Chowdhury et al. 2024, arXiv 2403.00409, Eq. 8) with the same offset.

    With m = 0 each is TRL 1.16's DPOTrainer loss of the same name. Returns a tensor of the shape of ``delta``.

    Stated reference: in training TRL's DPOTrainer computes this loss (the margin reaches it through the reference
    log-probs, ``margin_as_logratio_offset``); trainers never call this function.
    """
    check_choice("loss_type", loss_type, MARGIN_LOSS_TYPES)
    check_same_shape(delta=delta, margin=margin)
    z = beta * delta - margin
    if loss_type == "sigmoid":
        return -F.logsigmoid(z)
    if loss_type == "hinge":
        return torch.relu(1 - z)
    if not 0.0 <= label_smoothing < 0.5:
        raise ValueError(f"`label_smoothing` must lie in [0, 0.5) for the robust loss, got {label_smoothing}.")
    return (-(1 - label_smoothing) * F.logsigmoid(z) + label_smoothing * F.logsigmoid(-z)) / (1 - 2 * label_smoothing)


def margin_as_logratio_offset(margin: torch.Tensor, beta: float) -> torch.Tensor:
    """The offset m/β that, subtracted from Δ, turns β·Δ into β·Δ − m: β·(Δ − m/β) = β·Δ − m.

    Adding it to the chosen completion's reference log-prob lowers its log-ratio, hence Δ, by exactly m/β; this is
    how a margin reaches any loss that depends on β·Δ only (``MARGIN_LOSS_TYPES``).
    """
    if beta <= 0:
        raise ValueError(f"A DPO margin needs `beta` > 0, got {beta}.")
    return margin / beta


def bradley_terry_loss(
    chosen: torch.Tensor,
    rejected: torch.Tensor,
    margin: torch.Tensor | None = None,
    weight: torch.Tensor | None = None,
    center_coefficient: float | None = None,
) -> torch.Tensor:
    """Weighted pairwise reward-model loss: (1/B)·Σ_i w_i·[−log σ(r_w,i − r_l,i − m_i) + c·(r_w,i + r_l,i)²].

    Bradley–Terry as in InstructGPT (Ouyang et al. 2022, arXiv 2203.02155, Eq. 1), the margin m as in Llama 2
    (Touvron et al. 2023, arXiv 2307.09288, Eq. 2), the centring term c as TRL's ``center_rewards_coefficient``
    (Eisenstein et al. 2023, arXiv 2312.09244). m = 0, w = 1 and c = None when omitted; then this is TRL's loss.
    """
    check_same_shape(chosen=chosen, rejected=rejected)
    margin = torch.zeros_like(chosen) if margin is None else margin
    weight = torch.ones_like(chosen) if weight is None else weight
    check_same_shape(chosen=chosen, margin=margin, weight=weight)
    per_pair = -F.logsigmoid(chosen - rejected - margin)
    if center_coefficient is not None:
        per_pair = per_pair + center_coefficient * (chosen + rejected) ** 2
    return (weight * per_pair).mean()


def listwise_pair_weight(num_pairs: int) -> float:
    """1/P for each of the P pairs of one prompt, so the prompt counts once however many pairs it yields.

    InstructGPT (arXiv 2203.02155, Eq. 1) divides the loss of a K-ranking by C(K, 2): P = C(K, 2) without ties.
    """
    if num_pairs < 1:
        raise ValueError(f"`num_pairs` must be >= 1, got {num_pairs}.")
    return 1.0 / num_pairs


def combine_rewards(rewards_per_func: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """r_i = Σ_f w_f·r_{i,f} over the functions that scored completion i; NaN where none did (as TRL's GRPO).

    ``rewards_per_func`` is (N, F) with NaN for a function that returned None; ``weights`` is (F,).
    """
    if rewards_per_func.dim() != 2 or weights.shape != rewards_per_func.shape[1:]:
        raise ValueError(
            f"`rewards_per_func` must be (N, F) and `weights` (F,), got {tuple(rewards_per_func.shape)} and "
            f"{tuple(weights.shape)}."
        )
    total = torch.nansum(rewards_per_func * weights, dim=1)
    return total.masked_fill(torch.isnan(rewards_per_func).all(dim=1), float("nan"))
