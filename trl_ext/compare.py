"""`trl-ext compare`: train several recipes on the same task and budget, over several seeds, and report.

    trl-ext compare --recipes grpo,dapo,dr_grpo --seeds 3 --steps 150 --output_dir compare

writes ``compare/comparison.md`` (per recipe: final accuracy mean ± std over seeds, generated samples and wall time
to reach an accuracy threshold, completion length, entropy, clip fractions), ``compare/comparison.png`` (training
accuracy against generated samples, one line per recipe with a band over seeds) and ``compare/results.json``.

The default recipes are every RL recipe (PPO's critic starts from the policy on the demo task). By default every run
starts from the offline demo's warm-started tiny policy on its arithmetic task (one warm start
per seed, shared by the recipes); ``--model_name_or_path`` / ``--dataset_name`` run the same comparison on a real
model and a prompt/solution dataset. Every recipe keeps its paper defaults (clipping, estimator, KL, dynamic sampling,
temperature, reward values) and runs ``--updates_per_rollout`` optimizer steps per generation batch, except
Magistral, whose minibatch statistics need one update per batch (it gets the same samples per step).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trl_ext.recipes import RECIPES, recipe_classes

COMPARE_RECIPES = ("grpo", "dapo", "dr_grpo", "rloo", "prorl", "magistral", "ppo")
DEFAULT_RECIPES = COMPARE_RECIPES
POLICY_CRITIC = "policy"  # --value_model_name_or_path policy: the critic starts from the policy's weights
ACCURACY_KEY = "math_accuracy/correct"  # the share of correct samples, whatever values the recipe's reward gives
SUMMARY_KEYS = ("completions/mean_length", "entropy", "clip_ratio/region_mean", "clip_ratio/low_mean",
                "clip_ratio/high_mean")  # fmt: skip
RESULTS_FILE, TABLE_FILE, PLOT_FILE = "results.json", "comparison.md", "comparison.png"


class CompareError(ValueError):
    """Bad `trl-ext compare` input; the message names the flag."""


@dataclass
class CompareSettings:
    """What `trl-ext compare` trains: recipes x seeds runs of `steps` optimizer steps each."""

    recipes: tuple[str, ...] = DEFAULT_RECIPES
    seeds: int = 3
    steps: int = 120
    output_dir: str = "trl_ext_compare"
    model_name_or_path: str | None = None  # None: the demo's warm-started tiny policy
    dataset_name: str | None = None  # None: the demo's arithmetic task
    value_model_name_or_path: str | None = None  # PPO's critic; "policy" starts it from the policy (the demo default)
    warmup_steps: int = 140  # SFT warm-up of the tiny policy (demo task only)
    threshold: float = 0.6  # accuracy whose first crossing is reported in samples and seconds
    updates_per_rollout: int = 2
    prompts_per_update: int = 4
    num_generations: int = 8
    max_completion_length: int = 8
    learning_rate: float = 1e-3
    show_progress: bool = True
    cards_dir: str | None = None  # write seed 0's model card of each recipe into cards_dir/<recipe>/
    extra_config: dict[str, dict[str, Any]] = field(default_factory=dict)  # per-recipe Config overrides


def add_compare_arguments(parser: Any) -> None:
    """The flags of `trl-ext compare` on an argparse (sub)parser."""
    defaults = CompareSettings()
    parser.add_argument(
        "--recipes", default=",".join(DEFAULT_RECIPES), help="comma-separated: " + ",".join(COMPARE_RECIPES)
    )
    parser.add_argument("--seeds", type=int, default=defaults.seeds, help="seeds per recipe (0, 1, ...)")
    parser.add_argument("--steps", type=int, default=defaults.steps, help="optimizer steps per run")
    parser.add_argument("--output_dir", default=defaults.output_dir)
    parser.add_argument("--model_name_or_path", default=None, help="a real policy (with --dataset_name)")
    parser.add_argument("--dataset_name", default=None, help="prompt/solution data (with --model_name_or_path)")
    parser.add_argument("--value_model_name_or_path", default=None,
                        help=f"PPO's critic: a path, or '{POLICY_CRITIC}' to start it from the policy")  # fmt: skip
    parser.add_argument("--threshold", type=float, default=defaults.threshold, help="accuracy to reach")
    parser.add_argument("--updates_per_rollout", type=int, default=defaults.updates_per_rollout)
    parser.add_argument("--learning_rate", type=float, default=defaults.learning_rate)
    parser.add_argument("--max_completion_length", type=int, default=defaults.max_completion_length)
    parser.add_argument("--warmup_steps", type=int, default=defaults.warmup_steps, help="SFT warm-up (demo task)")
    parser.add_argument("--cards_dir", default=None, help="write seed 0's model card of each recipe here")


def compare_from_args(args: Any) -> dict[str, Any]:
    """Run `trl-ext compare` from parsed flags; bad input raises SystemExit naming the flag, before any training."""
    try:
        settings = CompareSettings(
            recipes=parse_recipes(args.recipes), seeds=args.seeds, steps=args.steps, output_dir=args.output_dir,
            model_name_or_path=args.model_name_or_path, dataset_name=args.dataset_name,
            value_model_name_or_path=args.value_model_name_or_path, threshold=args.threshold,
            updates_per_rollout=args.updates_per_rollout, learning_rate=args.learning_rate,
            max_completion_length=args.max_completion_length, warmup_steps=args.warmup_steps,
            cards_dir=args.cards_dir,
        )  # fmt: skip
        validate(settings)
    except CompareError as error:
        raise SystemExit(f"trl-ext compare: {error}") from None
    results = run_compare(settings)
    print(f"[trl-ext compare] {Path(settings.output_dir, TABLE_FILE)} and {Path(settings.output_dir, PLOT_FILE)}")
    return results


def parse_recipes(text: str) -> tuple[str, ...]:
    """`grpo,dapo` -> ("grpo", "dapo"); a CompareError naming --recipes for an unknown or non-RL recipe."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise CompareError("--recipes is empty; give a comma-separated list such as grpo,dapo.")
    for name in names:
        if name not in COMPARE_RECIPES:
            kind = "is not an RL recipe" if name in RECIPES else "is not a recipe"
            raise CompareError(f"--recipes: {name!r} {kind}; choose from {', '.join(COMPARE_RECIPES)}.")
    if len(set(names)) != len(names):
        raise CompareError(f"--recipes names a recipe twice: {text!r}.")
    return names


def validate(settings: CompareSettings) -> None:
    """Every check that can fail before anything trains, each naming its flag."""
    for name in settings.recipes:
        parse_recipes(name)
    for flag in ("seeds", "steps", "updates_per_rollout", "prompts_per_update"):
        if getattr(settings, flag) < 1:
            raise CompareError(f"--{flag} must be >= 1, got {getattr(settings, flag)}.")
    if settings.num_generations < 2:
        raise CompareError(f"--num_generations must be >= 2 (group baselines), got {settings.num_generations}.")
    if not 0.0 < settings.threshold <= 1.0:
        raise CompareError(f"--threshold is an accuracy in (0, 1], got {settings.threshold}.")
    if (settings.model_name_or_path is None) != (settings.dataset_name is None):
        raise CompareError(
            "--model_name_or_path and --dataset_name go together (a real run); give both, or neither for the "
            "offline demo task."
        )
    if "ppo" in settings.recipes and settings.model_name_or_path and not settings.value_model_name_or_path:
        raise CompareError(
            "--recipes includes ppo, which trains a critic: pass --value_model_name_or_path (a reward-model or "
            f"causal-LM path, or '{POLICY_CRITIC}' to start the critic from the policy's weights). On the offline "
            "demo task the critic starts from the tiny policy."
        )


def recipe_args(recipe: str, settings: CompareSettings, seed: int, output_dir: str) -> Any:
    """The recipe's Config with its paper defaults, on the comparison's shared budget and update structure."""
    import torch

    config_cls, _ = recipe_classes(recipe)
    samples_per_update = settings.prompts_per_update * settings.num_generations
    per_device, accumulation, steps_per_generation = samples_per_update, 1, settings.updates_per_rollout
    if recipe == "magistral":  # minibatch statistics: one update per rollout, the same samples per step
        per_device = samples_per_update // settings.updates_per_rollout
        accumulation = steps_per_generation = settings.updates_per_rollout
    overrides: dict[str, Any] = {}
    if recipe == "prorl":
        overrides["ref_reset_steps"] = max(settings.steps // 2, 1)
    if recipe == "ppo":
        overrides["num_generations"] = 1
        critic = settings.value_model_name_or_path or POLICY_CRITIC  # validated: only the demo task has no critic
        overrides["value_model_name_or_path"] = None if critic == POLICY_CRITIC else critic
    overrides.update(settings.extra_config.get(recipe, {}))
    common = dict(
        output_dir=output_dir, max_steps=settings.steps, per_device_train_batch_size=per_device,
        gradient_accumulation_steps=accumulation, steps_per_generation=steps_per_generation,
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


def _task(settings: CompareSettings, seed: int, root: Path) -> tuple[str, Any]:
    """(policy path, train dataset) of one seed."""
    if settings.dataset_name is not None:
        from trl_ext.cli import load_any_dataset

        return settings.model_name_or_path, load_any_dataset(settings.dataset_name)
    from trl_ext.data.demo import arithmetic_prompts
    from trl_ext.demo import warm_start

    return str(warm_start(root / f"seed-{seed}", settings.warmup_steps, seed)), arithmetic_prompts(repeats=64)


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

    from trl_ext.demo import measure, task_reward

    _, trainer_cls = recipe_classes(recipe)
    output_dir = str(Path(settings.output_dir) / recipe / f"seed-{seed}")
    args = recipe_args(recipe, settings, seed, output_dir)
    counter, records = [0], []
    counting = _CountingReward(task_reward(recipe), counter, args.world_size)
    trainer = trainer_cls(model=policy, reward_funcs=[counting, *extra_rewards], args=args, train_dataset=dataset)
    trainer.remove_callback(PrinterCallback)  # the table and the progress bar report; no per-step log lines
    trainer.add_callback(_recorder(counter, progress, records, extra_log_keys))
    started = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - started
    final = measure(trainer.model, trainer.processing_class, seed) if settings.dataset_name is None else None
    return {"recipe": recipe, "seed": seed, "wall_seconds": wall, "samples": counter[0], "final_accuracy": final,
            "log": records}, trainer  # fmt: skip


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
        policy, dataset = _task(settings, seed, root)
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


def write_example_card(trainer: Any, recipe: str, folder: Path, settings: CompareSettings) -> Path:
    """Seed 0's model, then its card in ``folder``: card_context.json (what was rendered), README.md, the plot."""
    from trl_ext.hub import PLOT_FILE as CARD_PLOT
    from trl_ext.hub import card_context, plot_training_curves, render_model_card

    trainer.save_model(trainer.args.output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    dataset = settings.dataset_name or "trl_ext/arithmetic (built in)"
    context = card_context(trainer, model_name=f"{Path(settings.output_dir).name}-{recipe}", dataset_name=dataset)
    context["plot_file"] = CARD_PLOT if plot_training_curves(trainer.state.log_history, folder / CARD_PLOT) else None
    context = json.loads(json.dumps(context, default=_plain))  # what the JSON file holds is what is rendered
    (folder / "card_context.json").write_text(json.dumps(context, indent=1) + "\n")
    (folder / "README.md").write_text(render_model_card(context).content)
    return folder / "README.md"


def _plain(value: Any) -> Any:
    """JSON form of a config value: an enum's value (SchedulerType.CONSTANT -> "constant"), else its text."""
    return (
        getattr(value, "value", None) if isinstance(getattr(value, "value", None), str | int | float) else str(value)
    )


def _smoothed(values: list[float], window: int = 5) -> list[float]:
    return [statistics.fmean(values[max(0, i - window + 1) : i + 1]) for i in range(len(values))]


def _curve(run: dict) -> tuple[list[float], list[float], list[float]]:
    """(samples, accuracy, seconds) of the logged steps that generated (steps reusing a rollout log no reward)."""
    key = ACCURACY_KEY if any(ACCURACY_KEY in r for r in run["log"]) else "reward"
    points = [(r["samples"], r[key], r["seconds"]) for r in run["log"] if key in r]
    return tuple(map(list, zip(*points, strict=True))) if points else ([], [], [])


def _first_crossing(run: dict, threshold: float) -> tuple[float, float] | None:
    samples, accuracy, seconds = _curve(run)
    for n, value, t in zip(samples, _smoothed(accuracy), seconds, strict=True):
        if value >= threshold:
            return n, t
    return None


def _tail_mean(run: dict, key: str) -> float:
    """Mean over the last quarter of the logged steps."""
    values = [r[key] for r in run["log"] if key in r]
    return statistics.fmean(values[-max(len(values) // 4, 1) :]) if values else math.nan


def _mean_std(values: list[float]) -> tuple[float, float]:
    values = [v for v in values if v is not None and not math.isnan(v)]
    if not values:
        return math.nan, math.nan
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def summarise(runs: list[dict], settings: CompareSettings) -> dict[str, dict[str, Any]]:
    """Per recipe, over seeds: final accuracy, threshold crossing, tail means of length, entropy and clip fractions."""
    summary = {}
    for recipe in settings.recipes:
        mine = [run for run in runs if run["recipe"] == recipe]
        crossings = [c for c in (_first_crossing(run, settings.threshold) for run in mine) if c is not None]
        row = {
            "final_accuracy": _mean_std([run["final_accuracy"] for run in mine]),
            "train_accuracy_end": _mean_std([_tail_mean(run, ACCURACY_KEY) for run in mine]),
            "reached": f"{len(crossings)}/{len(mine)}",
            "samples_to_threshold": _mean_std([c[0] for c in crossings]),
            "seconds_to_threshold": _mean_std([c[1] for c in crossings]),
            "samples": _mean_std([run["samples"] for run in mine]),
            "wall_seconds": _mean_std([run["wall_seconds"] for run in mine]),
        }
        for key in SUMMARY_KEYS:
            row[key] = _mean_std([_tail_mean(run, key) for run in mine])
        summary[recipe] = row
    return summary


def _cell(pair: tuple[float, float], digits: int = 3) -> str:
    mean, std = pair
    return "–" if math.isnan(mean) else f"{mean:.{digits}f} ± {std:.{digits}f}"


def write_table(results: dict[str, Any], path: Path) -> None:
    settings, summary = results["settings"], results["summary"]
    task = settings["dataset_name"] or "the offline demo task (single-digit addition, tiny warm-started policy)"
    lines = [
        "# trl-ext compare",
        "",
        f"{len(settings['recipes'])} recipes x {settings['seeds']} seeds x {settings['steps']} optimizer steps on "
        f"{task}; {settings['prompts_per_update']} prompts x {settings['num_generations']} completions per update, "
        f"{settings['updates_per_rollout']} updates per rollout (Magistral: 1), learning rate "
        f"{settings['learning_rate']}. Values are mean ± std over seeds; accuracy is the share of correct answers "
        "(DAPO trains on ±1, the others on 1 / 0). Length, entropy and clip fractions are means over the last "
        "quarter of training.",
        "",
        f"| recipe | final accuracy | training accuracy (end) | reached {settings['threshold']} | samples to "
        "reach | seconds to reach | samples generated | completion length | entropy | clip fraction (low / high) "
        "| wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for recipe, row in summary.items():
        clip = f"{_cell(row['clip_ratio/region_mean'], 4)} ({row['clip_ratio/low_mean'][0]:.4f} / "
        clip += f"{row['clip_ratio/high_mean'][0]:.4f})"
        lines.append(
            f"| {recipe} | {_cell(row['final_accuracy'])} | {_cell(row['train_accuracy_end'])} | {row['reached']} "
            f"| {_cell(row['samples_to_threshold'], 0)} | {_cell(row['seconds_to_threshold'], 1)} "
            f"| {_cell(row['samples'], 0)} | {_cell(row['completions/mean_length'], 2)} "
            f"| {_cell(row['entropy'])} | {clip} | {_cell(row['wall_seconds'], 1)} |"
        )
    lines += ["", f"![Training accuracy against generated samples]({PLOT_FILE})", ""]
    path.write_text("\n".join(lines))


def plot_comparison(runs: list[dict], recipes: tuple[str, ...], path: Path) -> None:
    """Smoothed training accuracy against generated samples: the mean over seeds, with a min-max band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    figure, axis = plt.subplots(figsize=(7, 4.2))
    for recipe in recipes:
        curves = [_curve(run)[:2] for run in runs if run["recipe"] == recipe]
        curves = [(np.array(x), np.array(_smoothed(y))) for x, y in curves if len(x) > 1]
        if not curves:
            continue
        grid = np.linspace(max(c[0][0] for c in curves), min(c[0][-1] for c in curves), 100)
        stacked = np.stack([np.interp(grid, x, y) for x, y in curves])
        (line,) = axis.plot(grid, stacked.mean(axis=0), label=recipe)
        axis.fill_between(grid, stacked.min(axis=0), stacked.max(axis=0), color=line.get_color(), alpha=0.2)
    axis.set_xlabel("generated samples")
    axis.set_ylabel("training accuracy (share correct, smoothed)")
    axis.grid(alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
