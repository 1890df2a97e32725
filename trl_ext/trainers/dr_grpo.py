"""Dr. GRPO (Liu et al. 2025, arXiv 2503.20783) as a GRPOConfig with the paper's defaults."""

from __future__ import annotations

from dataclasses import dataclass

from trl_ext.trainers.grpo import GRPOTrainer, PaperGRPOConfig
from trl_ext.trainers.papers import RecipeCard, paper, paper_default


@dataclass
class DrGRPOConfig(PaperGRPOConfig):
    r"""Configuration for :class:`DrGRPOTrainer`: ``trl_ext.GRPOConfig`` with the Dr. GRPO paper's defaults (§3.1).

    Sets: advantages r − mean_group without division by the group std (``advantage_estimator="dr_grpo"``,
    computed with ``trl_ext.core.group_normalized(scale="none")``), the loss summed over tokens and divided by the
    constant max_completion_length (``loss_type="dr_grpo"``), symmetric clipping 0.2, no KL (``beta=0``).

    Paper schedule: constant learning rate 1e-6, about 8 policy updates per rollout (Oat: 1024 samples per rollout,
    128 per update; set ``steps_per_generation`` = 8 × ``gradient_accumulation_steps``), no vLLM importance-sampling
    correction. The paper's prompt template and MATH level 3-5 data are data choices this config cannot make;
    ``docs/paper_audit.md`` compares every term with the paper.

    Nearest TRL option: ``trl.GRPOConfig(loss_type="dr_grpo", scale_rewards="none")`` gives the same advantages;
    this config also sets ``scale_rewards="none"`` so TRL's logged ``frac_reward_zero_std`` matches, and composes
    with trl_ext's dynamic sampling.
    """

    advantage_estimator: str = paper_default(
        "dr_grpo", "Dr. GRPO advantage r − mean_group, no std normalisation (arXiv 2503.20783 §3.1)."
    )
    scale_rewards: str = paper_default(
        "none", "Dr. GRPO removes the std scaling: 'none' (kept consistent for logging)."
    )
    loss_type: str = paper_default(
        "dr_grpo", "Σ_t loss / max_completion_length per sequence, a constant normaliser (Dr. GRPO §3.1)."
    )
    beta: float = paper_default(0.0, "KL coefficient; Dr. GRPO uses none: 0.")


class DrGRPOTrainer(GRPOTrainer):
    """Dr. GRPO: GRPO Done Right (arXiv 2503.20783); see :class:`DrGRPOConfig`."""

    config_class = DrGRPOConfig
    recipe_card = RecipeCard(
        name="Dr. GRPO",
        tags=("trl", "trl-ext", "dr-grpo"),
        paper=paper(
            "Understanding R1-Zero-Like Training: A Critical Perspective", "2503.20783", "liu2025understanding",
            "Zichen Liu and Changyu Chen and Wenjun Li and Penghui Qi and Tianyu Pang and Chao Du and Wee Sun Lee and "
            "Min Lin", 2025,
        ),
    )  # fmt: skip
