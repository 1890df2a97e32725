"""DAPO (Yu et al. 2025, arXiv 2503.14476) as a GRPOConfig with the paper's defaults.

```python
from trl_ext import DAPOConfig, DAPOTrainer

args = DAPOConfig(output_dir="qwen-dapo", max_completion_length=4096, num_generations=16)
trainer = DAPOTrainer(model="Qwen/Qwen2.5-0.5B", reward_funcs=accuracy, args=args, train_dataset=dataset)
trainer.train()  # logs dynamic_sampling/rounds, dynamic_sampling/informative_fraction, ...
```
"""

from __future__ import annotations

from dataclasses import dataclass

from trl_ext.rewards.math import MathAccuracy
from trl_ext.trainers.grpo import GRPOTrainer, PaperGRPOConfig
from trl_ext.trainers.papers import RecipeCard, paper, paper_default

#: DAPO's rule-based reward (§2.4, Eq. 6): +1 for a correct answer, −1 otherwise.
dapo_math_accuracy = MathAccuracy(correct_value=1.0, wrong_value=-1.0)


@dataclass
class DAPOConfig(PaperGRPOConfig):
    r"""Configuration for :class:`DAPOTrainer`: ``trl_ext.GRPOConfig`` with the DAPO paper's defaults.

    Sets: clip-higher (``epsilon=0.2``, ``epsilon_high=0.28``, §3.1), dynamic sampling with refill (§3.2, at most
    ``dynamic_sampling_max_rounds=10`` rounds), token-level loss (``loss_type="dapo"``, §3.3), overlong filtering
    (``mask_truncated_completions=True``, §3.4) and soft overlong punishment (Eq. 13, L_cache =
    ``overlong_cache_length``, by default max_completion_length // 5 as the paper's 4096 / 20480), no KL (``beta=0``).

    The paper's reward is ±1 (§2.4): pass ``reward_funcs=dapo_math_accuracy`` (this module; ``math_accuracy`` scores
    1 / 0, which doubles the weight of the −1 overlong penalty relative to correctness). Paper schedule: a constant
    learning rate (``lr_scheduler_type="constant"``; add the paper's 20 warm-up steps with
    ``"constant_with_warmup"``), 16 policy updates per rollout (``steps_per_generation`` = 16 ×
    ``gradient_accumulation_steps``, see ``examples/recipes/dapo.yaml``), no importance-sampling correction of vLLM
    samples (``vllm_importance_sampling_correction=False``). ``docs/paper_audit.md`` compares every term with the
    paper.

    Nearest TRL option: ``trl.GRPOConfig(loss_type="dapo", epsilon_high=0.28, mask_truncated_completions=True)``
    with ``trl.rewards.get_soft_overlong_punishment``; TRL has no dynamic sampling (it only reports
    ``frac_reward_zero_std``), so uninformative groups stay in its batch. Paper settings worth copying at scale:
    num_generations=16, learning_rate=1e-6, L_max 20480 with L_cache 4096.
    """

    epsilon_high: float | None = paper_default(
        0.28, "Upper clipping bound ε_high (clip-higher, DAPO §3.1). DAPO: 0.28."
    )
    loss_type: str = paper_default(
        "dapo", "Loss aggregation; 'dapo' is DAPO's token-level mean over the global batch (§3.3)."
    )
    mask_truncated_completions: bool = paper_default(
        True, "Overlong filtering (DAPO §3.4): truncated completions are masked out of the loss."
    )
    beta: float = paper_default(0.0, "KL coefficient; DAPO removes the KL term (§2.3): 0.")
    dynamic_sampling: bool = paper_default(
        True, "Dynamic sampling with refill (DAPO §3.2, Eq. 11): on. See GRPOConfig.dynamic_sampling."
    )
    soft_overlong_punishment: bool = paper_default(
        True, "Soft overlong punishment (DAPO §3.4, Eq. 13) added as a shaping reward: on."
    )


class DAPOTrainer(GRPOTrainer):
    """DAPO: Decoupled Clip and Dynamic sAmpling Policy Optimization (arXiv 2503.14476); see :class:`DAPOConfig`."""

    config_class = DAPOConfig
    recipe_card = RecipeCard(
        name="DAPO",
        tags=("trl", "trl-ext", "dapo"),
        paper=paper(
            "DAPO: An Open-Source LLM Reinforcement Learning System at Scale", "2503.14476", "yu2025dapo",
            "Qiying Yu and Zheng Zhang and Ruofei Zhu and Yufeng Yuan and Xiaochen Zuo and Yu Yue and others", 2025,
        ),
    )  # fmt: skip
