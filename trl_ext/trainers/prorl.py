"""ProRL (Liu et al. 2025, arXiv 2505.24864): GRPO with a KL penalty and hard reference-policy resets."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from trl_ext.trainers.grpo import GRPOTrainer, PaperGRPOConfig
from trl_ext.trainers.papers import RecipeCard, paper, paper_default

logger = logging.getLogger(__name__)


@dataclass
class ProRLConfig(PaperGRPOConfig):
    r"""Configuration for :class:`ProRLTrainer`: ``trl_ext.GRPOConfig`` with the ProRL paper's defaults.

    Sets (ProRL §2.3, §3.3): a k3 KL penalty in the loss with ``beta=1e-4`` (TRL's GRPO KL term), clip-higher
    ``epsilon_high=0.4``, DAPO dynamic sampling with refill, ``temperature=1.2``, token-level loss. Reference
    resets (§2.3.1, "hard-reset the reference policy to a more recent snapshot of the online policy, and
    reinitialize the optimizer states") fire on ``ref_reset_steps``, on a plateau of ``ref_reset_metric`` (the
    paper resets "when validation performance stagnates or degrades") or on ``ref_reset_kl_threshold``; the
    optimizer state is re-initialised in place while the LR schedule continues (``reset_optimizer``).

    Nearest TRL option: ``sync_ref_model=True`` with ``ref_model_mixup_alpha=1.0`` copies the policy on a fixed
    interval only, never touches the optimizer, is refused with PEFT and is undone by a resume (TRL rebuilds the
    reference from the base weights); trl_ext's resets are checkpointed. Paper settings worth copying at scale:
    num_generations=16, batch 256 prompts with mini-batch 64, learning_rate=2e-6.
    The KL term is k3 = exp(ref − logp) − (ref − logp) − 1 without TRL's importance-ratio factor
    (``use_bias_correction_kl=False``), as in ProRL's verl setup; verl also clamps k3 to [−10, 10], which TRL's loss
    does not (a k3 above 10 means the policy is far from the reference; ``docs/paper_audit.md``).
    Resets apply to the reference log-probs of generation batches made after the reset: with
    steps_per_generation > 1 the batches already generated keep the old reference.
    """

    beta: float = paper_default(1e-4, "KL coefficient of the k3 penalty in the loss (ProRL: 1e-4).")
    epsilon_high: float | None = paper_default(0.4, "Clip-higher upper bound ε_high (ProRL: 0.4).")
    loss_type: str = paper_default("dapo", "Token-level loss aggregation (as DAPO).")
    dynamic_sampling: bool = paper_default(True, "Dynamic sampling with refill (ProRL §2.3, following DAPO): on.")
    temperature: float = paper_default(1.2, "Sampling temperature (ProRL §3.1: 1.2).")
    use_bias_correction_kl: bool = paper_default(
        False,
        "TRL multiplies the KL term by the importance ratio when True (its default). ProRL's KL (verl's low_var_kl k3 "
        "in the loss) has no such factor: False.",
    )


class ProRLTrainer(GRPOTrainer):
    """Prolonged RL with reference resets (arXiv 2505.24864); see :class:`ProRLConfig` and ``reset_reference()``."""

    config_class = ProRLConfig
    recipe_card = RecipeCard(
        name="ProRL",
        tags=("trl", "trl-ext", "prorl"),
        paper=paper(
            "ProRL: Prolonged Reinforcement Learning Expands Reasoning Boundaries in Large Language Models", "2505.24864",
            "liu2025prorl",
            "Mingjie Liu and Shizhe Diao and Ximing Lu and Jian Hu and Xin Dong and Yejin Choi and Jan Kautz and Yi Dong",
            2025,
        ),
    )  # fmt: skip

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not self.args.reference_resets_enabled:
            logger.warning(
                "ProRLTrainer without a reset trigger is GRPO with a KL penalty: set ref_reset_steps, "
                "ref_reset_metric or ref_reset_kl_threshold, or call trainer.reset_reference() yourself."
            )
