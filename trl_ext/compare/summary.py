"""Per-recipe summaries over seeds: accuracy, threshold crossing, tail means; and the Markdown table."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from trl_ext.compare.separation import RULE, versus
from trl_ext.compare.settings import ACCURACY_KEY, PLOT_FILE, SUMMARY_KEYS, CompareSettings


def smoothed(values: list[float], window: int = 5) -> list[float]:
    return [statistics.fmean(values[max(0, i - window + 1) : i + 1]) for i in range(len(values))]


def curve(run: dict) -> tuple[list[float], list[float], list[float]]:
    """(samples, accuracy, seconds) of the logged steps that generated (steps reusing a rollout log no reward)."""
    key = ACCURACY_KEY if any(ACCURACY_KEY in r for r in run["log"]) else "reward"
    points = [(r["samples"], r[key], r["seconds"]) for r in run["log"] if key in r]
    return tuple(map(list, zip(*points, strict=True))) if points else ([], [], [])


def first_crossing(run: dict, threshold: float) -> tuple[float, float] | None:
    samples, accuracy, seconds = curve(run)
    for n, value, t in zip(samples, smoothed(accuracy), seconds, strict=True):
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
        crossings = [c for c in (first_crossing(run, settings.threshold) for run in mine) if c is not None]
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
        row["versus"] = versus_text(runs, recipe)
        summary[recipe] = row
    return summary


def versus_text(runs: list[dict], recipe: str, baseline: str = "grpo") -> str:
    """The separation rule on final accuracy against the baseline, as a table cell ("–" when not measurable)."""
    result = None if recipe == baseline else versus(runs, recipe, baseline)
    if result is None:
        return "–"
    return f"{result.difference:+.3f}, better in {result.wins}/{result.seeds}: {result.verdict}"


def _cell(pair: tuple[float, float], digits: int = 3) -> str:
    mean, std = pair
    return "–" if math.isnan(mean) else f"{mean:.{digits}f} ± {std:.{digits}f}"


def _task_text(task: dict[str, Any]) -> str:
    if task.get("name") != "mixed":
        return "the offline demo task (single-digit addition, tiny warm-started policy; accuracy on all 25 sums)"
    return (f"the mixed task ({task['easy_share']:.0%} always-rewarded and {task['hard_share']:.0%} never-rewarded "
            "prompts besides learnable single-digit sums, tiny warm-started policy; final accuracy on the held-out "
            "sums at a fixed evaluation seed)")  # fmt: skip


def write_table(results: dict[str, Any], path: Path) -> None:
    settings, summary = results["settings"], results["summary"]
    task = settings["dataset_name"] or _task_text(settings.get("task") or {})
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
        "| wall s | final vs grpo |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for recipe, row in summary.items():
        clip = f"{_cell(row['clip_ratio/region_mean'], 4)} ({row['clip_ratio/low_mean'][0]:.4f} / "
        clip += f"{row['clip_ratio/high_mean'][0]:.4f})"
        lines.append(
            f"| {recipe} | {_cell(row['final_accuracy'])} | {_cell(row['train_accuracy_end'])} | {row['reached']} "
            f"| {_cell(row['samples_to_threshold'], 0)} | {_cell(row['seconds_to_threshold'], 1)} "
            f"| {_cell(row['samples'], 0)} | {_cell(row['completions/mean_length'], 2)} "
            f"| {_cell(row['entropy'])} | {clip} | {_cell(row['wall_seconds'], 1)} | {row.get('versus', '–')} |"
        )
    lines += ["", f"Final vs grpo: {RULE}.", "", f"![Each recipe against GRPO]({PLOT_FILE})", ""]
    path.write_text("\n".join(lines))
