"""The comparison figure and table: each recipe against GRPO, and which final differences separate."""

from __future__ import annotations

import matplotlib.image

from trl_ext.compare import CompareSettings, run_compare
from trl_ext.compare.figure import plot_small_multiples, run_points
from trl_ext.compare.separation import versus
from trl_ext.compare.tasks import TaskSpec


def _run(recipe, seed, final, heldout=True):
    log = [{"step": s, "samples": 32 * s, "seconds": s, "math_accuracy/correct": 0.3 + 0.01 * s} for s in range(1, 6)]
    points = [{"step": s, "samples": 32 * s, "heldout_accuracy": final * s / 4} for s in range(0, 5)]
    return {"recipe": recipe, "seed": seed, "final_accuracy": final, "log": log, "heldout": points if heldout else []}


def test_versus_pairs_seeds_and_applies_the_rule():
    runs = [_run("grpo", s, 0.2 + 0.01 * s) for s in range(5)] + [_run("dapo", s, 0.6 - 0.01 * s) for s in range(5)]
    result = versus(runs, "dapo", "grpo")
    assert (result.wins, result.verdict) == (5, "separates")
    assert versus(runs[:5] + [_run("dapo", 0, 0.5)], "dapo", "grpo") is None  # one common seed: not measurable


def test_run_points_prefer_heldout_records_then_training_accuracy():
    name, points = run_points(_run("grpo", 0, 0.4))
    assert name == "held-out accuracy" and points[0] == (0, 0, 0.0) and points[-1] == (4, 128, 0.4)
    name, points = run_points(_run("grpo", 0, 0.4, heldout=False))
    assert name.startswith("training accuracy") and [p[0] for p in points] == [1, 2, 3, 4, 5]


def test_small_multiples_draw_one_row_per_recipe_against_grpo(tmp_path):
    runs = [_run(recipe, s, 0.3 + 0.1 * i) for i, recipe in enumerate(("grpo", "dapo", "rloo")) for s in range(3)]
    plot_small_multiples(runs, ("grpo", "dapo", "rloo"), tmp_path / "two.png")
    plot_small_multiples(runs[:6], ("grpo", "dapo"), tmp_path / "one.png")
    two, one = matplotlib.image.imread(tmp_path / "two.png"), matplotlib.image.imread(tmp_path / "one.png")
    assert two.shape[0] > one.shape[0] + 100 and two.shape[1] == one.shape[1] and two.std() > 0


def test_mixed_task_compare_records_heldout_accuracy_and_states_separation(tmp_path, monkeypatch):
    import trl_ext.demo

    output, warm_starts, warm_start = tmp_path / "M", [], trl_ext.demo.warm_start
    monkeypatch.setattr(trl_ext.demo, "warm_start", lambda *args: warm_starts.append(args) or warm_start(*args))
    task = TaskSpec(name="mixed", repeats=1, eval_samples=2)
    settings = CompareSettings(recipes=("grpo", "rloo"), seeds=2, steps=2, warmup_steps=10, task=task, eval_every=1,
                               shared_warm_start=True, output_dir=str(output), show_progress=False)  # fmt: skip
    results = run_compare(settings)
    for run in results["runs"]:
        assert [r["step"] for r in run["heldout"]] == [0, 1, 2]
        assert run["heldout"][-1]["heldout_accuracy"] == run["final_accuracy"]  # same fixed evaluation seed
        assert run["heldout"][0]["samples"] == 0 and run["heldout"][-1]["samples"] == run["samples"]
    starts = {run["heldout"][0]["heldout_accuracy"] for run in results["runs"]}
    assert len(starts) == 1  # one shared warm start, measured at one evaluation seed
    assert not (output / "seed-1").exists() and len(warm_starts) == 1  # trained once, reused by seed 1
    table = (output / "comparison.md").read_text()
    assert "final vs grpo" in table and "better in" in table.split("| rloo |")[1]
