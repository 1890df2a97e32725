"""Per-token KL estimators (Schulman 2020, "Approximating KL Divergence", http://joschu.net/blog/kl-approx.html)."""

from __future__ import annotations

import torch

from trl_ext.core._checks import check_choice, check_same_shape

KL_KINDS = ("k1", "k2", "k3")


def kl_estimate(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str = "k3") -> torch.Tensor:
    """Estimate KL(π_θ ‖ π_ref) per token from samples of π_θ, with d = logπ_θ − logπ_ref.

    k1 = d (unbiased, high variance; the InstructGPT KL-in-reward form);
    k2 = ½·d² (biased, low variance);
    k3 = exp(−d) + d − 1 (unbiased, non-negative; the GRPO/ProRL KL-in-loss form, DeepSeekMath Eq. 4).
    """
    check_choice("kind", kind, KL_KINDS)
    check_same_shape(logp=logp, ref_logp=ref_logp)
    d = logp - ref_logp
    if kind == "k1":
        return d
    if kind == "k2":
        return 0.5 * d * d
    return torch.exp(-d) + d - 1.0
