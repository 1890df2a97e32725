"""Train every recipe x seed of a comparison on one task and budget, and write its results."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from trl_ext.compare.cards import write_example_card
from trl_ext.compare.plot import plot_comparison
from trl_ext.compare.settings import (
    ACCURACY_KEY,
    PLOT_FILE,
    POLICY_CRITIC,
    RESULTS_FILE,
    SUMMARY_KEYS,
    TABLE_FILE,
    CompareSettings,
    validate,
)
from trl_ext.compare.summary import summarise, write_table
from trl_ext.recipes import get_recipe, recipe_classes


def recipe_args(recipe: str, settings: CompareSettings, seed: int, output_dir: str) -> Any:
    """The recipe's Config with its paper defaults, on the comparison's shared budget and update structure (the
    recipe's own part of it comes from its registry entry)."""
    import torch

    entry = get_recipe(recipe)
    config_cls, _ = entry.classes()
    samples_per_update = settings.prompts_per_update * settings.num_generations
    overrides = entry.compare_fields(settings.steps)
    if entry.trains_critic:
        critic = settings.value_model_name_or_path or POLICY_CRITIC  # validated: only the demo task has no critic
        overrides["value_model_name_or_path"] = None if critic == POLICY_CRITIC else critic
    overrides.update(settings.extra_config.get(recipe, {}))
    common = dict(
        output_dir=output_dir, max_steps=settings.steps,
        **entry.update_structure(samples_per_update, settings.updates_per_rollout),
        num_generations=settings.num_generations, max_completion_length=settings.max_completion_length,
        learning_rate=settings.learning_rate, logging_steps=1, save_strategy="no", seed=seed, report_to="none",
        disable_tqdm=True, use_cpu=not torch.cuda.is_available(), bf16=False, gradient_checkpointing=False,
    )  # fmt: skip
    return config_cls(**{**common, **overrides})


class _CountingReward:
    """The task reward, counting every completion it scores: each generated completion is scored once, refill rounds
    of dynamic sampling included (they are scored before the kept batch is assembled)."""

    def __init__(self, reward: Any, counter: list[int], num_processes: int):
        self.reward, self.counter, self.num_processes = reward, counter, num_processes
        self.__name__ = getattr(reward, "__name__", type(reward).__name__)

    def __call__(self, *args: Any, completions: list, **kwargs: Any) -> list:
        self.counter[0] += len(completions) * self.num_processes  # every process scores its own share
        return self.reward(*args, completions=completions, **kwargs)


def _recorder(counter: list[int], progress: Any, records: list[dict], extra_keys: tuple[str, ...] = ()):
    from transformers import TrainerCallback

    class Recorder(TrainerCallback):
        start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            if progress is not None:
                progress.update(1)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:  # training-step logs only
                keys = (ACCURACY_KEY, "reward", *SUMMARY_KEYS, *extra_keys)
                record = {key: logs[key] for key in keys if isinstance(logs.get(key), int | float)}
                records.append({"step": state.global_step, "samples": counter[0],
                                "seconds": time.perf_counter() - self.start, **record})  # fmt: skip

    return Recorder()


def task_of_seed(settings: CompareSettings, seed: int, root: Path) -> tuple[str, Any]:
    """(policy path, train dataset) of one seed."""
    if settings.dataset_name is not None:
        from trl_ext.data.loading import load_any_dataset

        return settings.model_name_or_path, load_any_dataset(settings.dataset_name)
    from trl_ext.compare.tasks import task_dataset
    from trl_ext.demo import warm_start

    start = 0 if settings.shared_warm_start else seed
    path = root / f"seed-{start}" / "warm-start"
    if not (settings.shared_warm_start and seed > 0 and (path / "config.json").exists()):  # seed 0's is reused
        path = warm_start(root / f"seed-{start}", settings.warmup_steps, start)
    return str(path), task_dataset(settings.task)


def train_one(
    recipe: str,
    seed: int,
    policy: str,
    dataset: Any,
    settings: CompareSettings,
    progress: Any = None,
    extra_rewards: tuple[Any, ...] = (),
    extra_log_keys: tuple[str, ...] = (),
):
    """Train one recipe with one seed; returns (its record, the trainer). ``extra_rewards`` come after the task
    reward (give them weights with ``extra_config``); ``extra_log_keys`` are recorded next to the standard ones."""
    from transformers import PrinterCallback

    from trl_ext.compare.tasks import heldout_accuracy, heldout_recorder, task_reward_for
    from trl_ext.demo import task_reward

    _, trainer_cls = recipe_classes(recipe)
    output_dir = str(Path(settings.output_dir) / recipe / f"seed-{seed}")
    args = recipe_args(recipe, settings, seed, output_dir)
    counter, records = [0], []
    counting = _CountingReward(task_reward_for(settings.task, task_reward(recipe)), counter, args.world_size)
    trainer = trainer_cls(model=policy, reward_funcs=[counting, *extra_rewards], args=args, train_dataset=dataset)
    trainer.remove_callback(PrinterCallback)  # the table and the progress bar report; no per-step log lines
    trainer.add_callback(_recorder(counter, progress, records, extra_log_keys))
    heldout: list[dict] = []
    if settings.eval_every and settings.dataset_name is None:
        trainer.add_callback(heldout_recorder(settings.task, settings.eval_every, counter, heldout))
    started = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - started
    final = None
    if settings.dataset_name is None:  # the built-in task: held-out accuracy at the fixed evaluation seed
        final = heldout_accuracy(trainer.model, trainer.processing_class, settings.task)
    return {"recipe": recipe, "seed": seed, "wall_seconds": wall, "samples": counter[0], "final_accuracy": final,
            "log": records, "heldout": heldout}, trainer  # fmt: skip


def run_compare(settings: CompareSettings, keep_trainers: bool = False) -> dict[str, Any]:
    """Validate, train every recipe x seed, write results.json, comparison.md and comparison.png."""
    validate(settings)
    if settings.dataset_name is None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from tqdm.auto import tqdm

    root = Path(settings.output_dir)
    root.mkdir(parents=True, exist_ok=True)
    total = len(settings.recipes) * settings.seeds * settings.steps
    progress = tqdm(total=total, desc="trl-ext compare", unit="step", disable=not settings.show_progress)
    runs, trainers = [], {}
    for seed in range(settings.seeds):
        policy, dataset = task_of_seed(settings, seed, root)
        for recipe in settings.recipes:
            progress.set_postfix_str(f"{recipe} seed {seed}")
            run, trainer = train_one(recipe, seed, policy, dataset, settings, progress)
            runs.append(run)
            if seed == 0 and settings.cards_dir:
                write_example_card(trainer, recipe, Path(settings.cards_dir) / recipe, settings)
            if keep_trainers and seed == 0:
                trainers[recipe] = trainer
    progress.close()
    results = {"settings": asdict(settings), "runs": runs, "summary": summarise(runs, settings)}
    (root / RESULTS_FILE).write_text(json.dumps(results, indent=1))
    write_table(results, root / TABLE_FILE)
    plot_comparison(runs, settings.recipes, root / PLOT_FILE)
    if keep_trainers:
        results["trainers"] = trainers
    return results
