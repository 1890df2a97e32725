"""`trl-ext compare`: a tiny offline run writes the table and a real PNG; bad input fails before any training."""

from __future__ import annotations

import json

import pytest

import trl_ext.compare as compare
import trl_ext.compare.run as compare_run
from trl_ext.cli import main


def test_tiny_compare_writes_table_plot_and_results(tmp_path):
    output = tmp_path / "D"
    main(["compare", "--recipes", "grpo,dapo", "--seeds", "2", "--steps", "4", "--warmup_steps", "40",
          "--output_dir", str(output), "--cards_dir", str(output / "cards")])  # fmt: skip
    results = json.loads((output / "results.json").read_text())
    assert [(run["recipe"], run["seed"]) for run in results["runs"]] == [
        ("grpo", 0), ("dapo", 0), ("grpo", 1), ("dapo", 1)
    ]  # fmt: skip
    for run in results["runs"]:
        assert [record["step"] for record in run["log"]] == [1, 2, 3, 4]
        # 2 updates per rollout of 4 prompts x 8 completions: 2 rollouts of 64; DAPO's refill rounds count too
        assert run["samples"] == 128 if run["recipe"] == "grpo" else run["samples"] >= 128 and run["samples"] % 8 == 0
        assert 0.0 <= run["final_accuracy"] <= 1.0
    table = (output / "comparison.md").read_text()
    assert "| grpo |" in table and "| dapo |" in table and "comparison.png" in table
    card = (output / "cards" / "dapo" / "README.md").read_text()
    assert "arxiv.org/abs/2503.14476" in card and (output / "cards" / "dapo" / "training_curves.png").is_file()
    import matplotlib.image

    image = matplotlib.image.imread(output / "comparison.png")
    assert image.shape[0] > 200 and image.shape[1] > 300 and image.std() > 0  # a drawn figure, not a blank file


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--recipes", "grpo,daop"], "--recipes"),
        (["--recipes", "grpo,dpo"], "--recipes"),
        (["--seeds", "0"], "--seeds"),
        (["--steps", "0"], "--steps"),
        (
            ["--recipes", "dapo,ppo", "--model_name_or_path", "m", "--dataset_name", "d.jsonl"],
            "--value_model_name_or_path",
        ),
        (["--model_name_or_path", "some/model"], "--dataset_name"),
    ],
)
def test_bad_input_names_the_flag_before_training(argv, flag, tmp_path, monkeypatch):
    def must_not_run(*args, **kwargs):
        raise AssertionError("training started")

    monkeypatch.setattr(compare_run, "task_of_seed", must_not_run)
    monkeypatch.setattr(compare_run, "train_one", must_not_run)
    with pytest.raises(SystemExit, match=flag):
        main(["compare", "--output_dir", str(tmp_path), *argv])
    assert not (tmp_path / "results.json").exists()


def test_threshold_crossing_uses_the_smoothed_accuracy_and_counts_samples():
    log = [{"step": i + 1, "samples": 64 * (i + 1), "seconds": float(i), compare.ACCURACY_KEY: value}
           for i, value in enumerate([0.2, 1.0, 0.4, 0.6, 0.8, 0.8, 0.8])]  # fmt: skip
    run = {"recipe": "grpo", "seed": 0, "wall_seconds": 7.0, "samples": 448, "final_accuracy": 0.5, "log": log}
    # moving average over 5 logs: 0.2, 0.6, 0.533, 0.55, 0.6 -> first >= 0.6 at the 2nd log (64 x 2 samples)
    assert compare.first_crossing(run, 0.6) == (128, 1.0)
    assert compare.first_crossing(run, 0.7) == (384, 5.0)  # (1+0.4+0.6+0.8+0.8)/5 = 0.72 at the 6th log
    settings = compare.CompareSettings(recipes=("grpo",), threshold=0.9)
    assert compare.summarise([run], settings)["grpo"]["reached"] == "0/1"


@pytest.mark.parametrize("recipe", compare.COMPARE_RECIPES)
def test_every_recipe_gets_the_shared_budget_in_its_own_update_structure(recipe, tmp_path):
    """The same samples per optimizer step for every recipe; updates per rollout as asked, except for a recipe whose
    statistics span one step (Magistral: one update in micro-batches). The recipe's own fields come from its
    registry entry: ProRL resets its reference halfway, PPO samples one completion per prompt for its critic."""
    settings = compare.CompareSettings(steps=10, prompts_per_update=4, num_generations=8, updates_per_rollout=2)
    args = compare.recipe_args(recipe, settings, seed=3, output_dir=str(tmp_path))
    assert args.per_device_train_batch_size * args.gradient_accumulation_steps == 4 * 8
    updates = args.steps_per_generation // args.gradient_accumulation_steps
    assert updates == (1 if recipe == "magistral" else 2) and args.seed == 3 and args.max_steps == 10
    assert args.num_generations == (1 if recipe == "ppo" else 8)
    assert getattr(args, "ref_reset_steps", None) == (5 if recipe == "prorl" else None)
    if recipe == "ppo":
        assert args.value_model_name_or_path is None  # the demo task: the critic starts from the policy
    extra = compare.CompareSettings(extra_config={recipe: {"learning_rate": 0.5}})
    assert compare.recipe_args(recipe, extra, seed=0, output_dir=str(tmp_path)).learning_rate == 0.5
