"""`trl-ext demo`: an offline end-to-end run that shows a recipe raising a verifiable reward in a few minutes on CPU.

1. build the tiny tokenizer and policy (trl_ext.tiny) and warm them up with a short SFT on single-digit addition
   (the random policy knows no format; the warm-up stops while accuracy is still low);
2. measure the policy: sampled accuracy on all problems (math_accuracy, 8 samples each);
3. train it with the recipe (default DAPO) on the recipe's math reward (DAPO's is ±1, the others' 1 / 0);
4. measure the accuracy again, and write model, tokenizer, model card, training-curve plot and eval results.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from trl_ext.recipes import DEMO_RECIPES, recipe_classes
from trl_ext.recipes import task_reward as _registry_task_reward

CPU_SETTINGS = dict(use_cpu=True, bf16=False, gradient_checkpointing=False, report_to="none", disable_tqdm=True)


def warm_start(output_dir: Path, steps: int, seed: int) -> Path:
    """A tiny policy after a short SFT on correct answers (format learnt, accuracy still low); saved to disk."""
    from trl import SFTConfig, SFTTrainer

    from trl_ext.data.demo import arithmetic_sft_pairs
    from trl_ext.tiny import build_tiny_causal_lm, build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer()
    args = SFTConfig(
        output_dir=str(output_dir / "warm-start"), max_steps=steps, per_device_train_batch_size=16,
        learning_rate=3e-3, lr_scheduler_type="constant", save_strategy="no", logging_steps=steps, seed=seed,
        **CPU_SETTINGS,
    )  # fmt: skip
    trainer = SFTTrainer(
        model=build_tiny_causal_lm(tokenizer, seed=seed), args=args, processing_class=tokenizer,
        train_dataset=arithmetic_sft_pairs(repeats=64),
    )  # fmt: skip
    trainer.train()
    path = output_dir / "warm-start"
    trainer.save_model(str(path))
    tokenizer.save_pretrained(path)
    return path


def task_reward(recipe: str) -> Any:
    """The math reward a recipe's paper uses on the demo task: ±1 for DAPO, 1 / 0 for the others."""
    return _registry_task_reward(recipe)


def measure(model: Any, tokenizer: Any, seed: int) -> float:
    """Sampled accuracy over every problem (8 samples each, temperature 1): the share of correct answers, whatever
    reward values the recipe trains with."""
    import torch

    from trl_ext.data.demo import arithmetic_prompts
    from trl_ext.evaluation import evaluate_policy
    from trl_ext.rewards import math_accuracy

    torch.manual_seed(seed)
    report = evaluate_policy(model, tokenizer, arithmetic_prompts(), [math_accuracy], num_samples=8,
                             max_new_tokens=8, batch_size=100)  # fmt: skip
    return report.mean_reward


def run_demo(
    recipe: str = "dapo", output_dir: str = "trl_ext_demo", warmup_steps: int = 140, steps: int = 300, seed: int = 0
) -> dict[str, float]:
    """Run the demo; returns the sampled accuracy before and after training ({"start_reward", "end_reward"}, the mean
    of the 1 / 0 accuracy reward) and prints them."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from trl_ext.data.demo import arithmetic_prompts
    from trl_ext.hub import write_model_card

    if recipe not in DEMO_RECIPES:
        raise ValueError(f"Unknown demo `recipe`={recipe!r}; choose one of {', '.join(DEMO_RECIPES)}.")
    config_cls, trainer_cls = recipe_classes(recipe)
    output = Path(output_dir)
    policy_path = warm_start(output, warmup_steps, seed)
    args = config_cls(
        output_dir=str(output), max_steps=steps, per_device_train_batch_size=64, num_generations=8,
        max_completion_length=8, learning_rate=1e-3, temperature=1.0, logging_steps=10, save_strategy="no",
        seed=seed, **CPU_SETTINGS,
    )  # fmt: skip
    trainer = trainer_cls(model=str(policy_path), reward_funcs=[task_reward(recipe)], args=args,
                          train_dataset=arithmetic_prompts(repeats=64))  # fmt: skip
    start = measure(trainer.model, trainer.processing_class, seed)
    print(f"[trl-ext demo] {trainer.recipe_card.name}: sampled accuracy before training {start:.3f}", flush=True)
    trainer.train()
    end = measure(trainer.model, trainer.processing_class, seed)
    trainer.save_model(str(output))
    trainer.processing_class.save_pretrained(output)
    write_model_card(trainer, dataset_name="trl_ext/arithmetic (built in)")
    print(f"[trl-ext demo] {trainer.recipe_card.name}: sampled accuracy {start:.3f} -> {end:.3f} (+{end - start:.3f}); "
          f"model, tokenizer, card and plot in {output.resolve()}", flush=True)  # fmt: skip
    return {"start_reward": start, "end_reward": end}
