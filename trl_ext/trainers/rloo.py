"""RLOO (Ahmadian et al. 2024, arXiv 2402.14740) inside the GRPO family: a GRPOConfig with a leave-one-out baseline."""

from __future__ import annotations

from dataclasses import dataclass

from trl_ext.trainers.grpo import GRPOTrainer, PaperGRPOConfig
from trl_ext.trainers.papers import RecipeCard, paper, paper_default


@dataclass
class RLOOConfig(PaperGRPOConfig):
    r"""Configuration for :class:`RLOOTrainer`: ``trl_ext.GRPOConfig`` with the RLOO baseline.

    Sets: A_i = r_i − mean_{j≠i} r_j (``advantage_estimator="rloo"``, ``trl_ext.core.leave_one_out``; §3 of the
    paper, Kool et al. 2019), token-level PPO-clip loss with ε = 0.2 (``loss_type="dapo"``), no KL (``beta=0``).

    The paper's reward carries a β·KL penalty (r − β·log π/π_ref per sequence); this config has no such option (see
    ``docs/paper_audit.md``): for that objective use ``trl.RLOOTrainer`` with ``beta > 0``.

    How it differs from ``trl.RLOOTrainer``: TRL's RLOO uses a sequence-level importance ratio and puts the KL
    penalty into the reward; this one keeps GRPO's per-token clipped surrogate and only swaps the baseline, so it
    composes with every trl_ext extension (dynamic sampling, overlong punishment, the Magistral-style filters).
    """

    advantage_estimator: str = paper_default(
        "rloo", "Leave-one-out baseline r_i − mean_{j≠i} r_j (arXiv 2402.14740 §3)."
    )
    loss_type: str = paper_default("dapo", "Token-level mean of the clipped surrogate over the global batch.")
    beta: float = paper_default(0.0, "KL coefficient: 0 (no KL term, no reference model).")


class RLOOTrainer(GRPOTrainer):
    """REINFORCE Leave-One-Out on the GRPO stack (arXiv 2402.14740); see :class:`RLOOConfig`."""

    config_class = RLOOConfig
    recipe_card = RecipeCard(
        name="RLOO",
        tags=("trl", "trl-ext", "rloo"),
        paper=paper(
            "Back to Basics: Revisiting REINFORCE-Style Optimization for Learning from Human Feedback in LLMs",
            "2402.14740", "ahmadian2024back",
            "Arash Ahmadian and Chris Cremer and Matthias Gall{\\'{e}} and Marzieh Fadaee and Julia Kreutzer and Olivier "
            'Pietquin and Ahmet {\\"{U}}st{\\"{u}}n and Sara Hooker', 2024, entry="inproceedings",
            booktitle="Proceedings of the 62nd Annual Meeting of the Association for Computational Linguistics (Volume 1: "
            "Long Papers), {ACL} 2024",
            pages="12248--12267",
        ),
    )  # fmt: skip
