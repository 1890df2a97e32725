"""Magistral (Mistral-AI 2025, arXiv 2506.10910) as a GRPOConfig with the paper's defaults."""

from __future__ import annotations

from dataclasses import dataclass

from trl_ext.trainers.grpo import GRPOTrainer, PaperGRPOConfig
from trl_ext.trainers.papers import RecipeCard, paper, paper_default


@dataclass
class MagistralConfig(PaperGRPOConfig):
    r"""Configuration for :class:`MagistralTrainer`: ``trl_ext.GRPOConfig`` with Magistral's GRPO changes (§2.1).

    Sets: group centring then minibatch standardisation over all sequences of one optimizer step, across processes
    (``advantage_estimator="magistral"``, ``trl_ext.core.minibatch_normalized``; needs steps_per_generation ==
    gradient_accumulation_steps), dropping zero-advantage groups (dynamic sampling on the task reward, with
    refill), clip-higher ε_high = 0.28 (the paper uses 0.26–0.28; 0.3 for the small model), token-level loss
    normalised by the total length of the batch (``loss_type="dapo"``), no KL (``beta=0``), and the length penalty
    of §2.2 (soft overlong punishment scaled by ``overlong_penalty_factor=0.1``). The gated format reward (0 if the
    format fails, else 0.1 + 0.9·correct) is a reward function to pass in, not a config knob.

    Nearest TRL option: ``scale_rewards="batch"`` is NOT Magistral: TRL divides by the std of the raw rewards of the
    generation batch, Magistral standardises the group-centred advantages (e.g. G=4, r=[1,1,1,0|0,0,0,1]: TRL gives
    −1.403 where Magistral gives −1.620), and TRL keeps zero-advantage groups.
    """

    advantage_estimator: str = paper_default(
        "magistral", "Group centring, then standardisation over the optimizer step (arXiv 2506.10910 §2.1)."
    )
    epsilon_high: float | None = paper_default(
        0.28, "Upper clipping bound ε_high; Magistral: 0.26–0.28 (0.3 for the small model)."
    )
    loss_type: str = paper_default("dapo", "Token-level loss normalised by the total length of the batch (§2.1).")
    beta: float = paper_default(0.0, "KL coefficient; Magistral removes the KL term: 0.")
    dynamic_sampling: bool = paper_default(
        True, "Drop zero-advantage groups ('eliminating non-diverse groups', §2.1) and refill: on."
    )
    soft_overlong_punishment: bool = paper_default(
        True, "Length penalty of Magistral §2.2 (DAPO Eq. 13 scaled by 0.1): on."
    )
    overlong_penalty_factor: float = paper_default(0.1, "Largest length penalty; Magistral §2.2: 0.1.")


class MagistralTrainer(GRPOTrainer):
    """Magistral's GRPO variant (arXiv 2506.10910); see :class:`MagistralConfig`."""

    config_class = MagistralConfig
    recipe_card = RecipeCard(
        name="Magistral",
        tags=("trl", "trl-ext", "magistral"),
        paper=paper("Magistral", "2506.10910", "mistral2025magistral",
                       "{Mistral-AI} and Abhinav Rastogi and Albert Q. Jiang and others", 2025),
    )  # fmt: skip
