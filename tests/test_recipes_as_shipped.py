"""Every shipped recipe (examples/recipes/*.yaml) starts as shipped: `trl-ext <recipe> --config <yaml>` trains one
step on the tiny model with only the model, the data (a local file), the output directory, the step count, the batch,
accumulation and generation sizes, the completion lengths, `use_vllm`, the precision/device flags, checkpointing
and the evaluation sizes overridden. Everything else (trackers in `report_to`, splits, schedules, losses, rewards)
comes from the YAML. The install is the README's `.[test]`, which includes the `recipes` extra (the trackers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trl_ext.cli import main

RECIPE_DIR = Path(__file__).resolve().parent.parent / "examples" / "recipes"
# The flags a user running a shipped recipe on other hardware, data and budget legitimately changes.
ALLOWED = {
    "--model_name_or_path", "--dataset_name", "--dataset_config", "--output_dir", "--max_steps",
    "--per_device_train_batch_size", "--gradient_accumulation_steps", "--steps_per_generation", "--num_generations",
    "--max_completion_length", "--overlong_cache_length", "--use_vllm", "--bf16", "--use_cpu", "--save_strategy",
    "--per_device_eval_batch_size", "--num_generations_eval", "--reward_funcs", "--value_model_name_or_path",
}  # fmt: skip
# reward_funcs / value_model_name_or_path: only where the recipe names a placeholder model path (ppo.yaml)
SMALL_RL = ["--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "1", "--steps_per_generation", "1",
            "--num_generations", "4", "--max_completion_length", "8"]  # fmt: skip


def _math_rows(count: int) -> list[dict]:
    return [{"prompt": f"What is {i} + {i}? Answer in \\boxed{{}}.", "solution": str(2 * i)} for i in range(count)]


def _pair_rows(count: int) -> list[dict]:
    return [
        {"prompt": f"What is {i} + 1?", "chosen": f"\\boxed{{{i + 1}}}", "rejected": f"\\boxed{{{i}}}", "margin": 1.0}
        for i in range(count)
    ]


def _overrides(recipe: str, models: dict, use_vllm: bool = False) -> tuple[list[str], list[dict]]:
    """(flags, dataset rows) of each recipe; ``use_vllm``: keep the recipe's own vLLM setting."""
    no_vllm = [] if use_vllm else ["--use_vllm", "False"]
    if recipe == "dapo":
        return [*SMALL_RL, "--overlong_cache_length", "2", *no_vllm], _math_rows(8)
    if recipe == "dr_grpo":
        return [*SMALL_RL, *no_vllm], _math_rows(8)
    if recipe in ("rloo", "magistral"):
        return SMALL_RL, _math_rows(8)
    if recipe == "prorl":  # 520 rows: the recipe holds out the first 512 (train[:512]) and trains on the rest
        evaluation = ["--per_device_eval_batch_size", "64", "--num_generations_eval", "4"]
        return [*SMALL_RL, *no_vllm, *evaluation], _math_rows(520)
    if recipe == "ppo":
        reward_model = str(models["reward_model"])
        flags = [*SMALL_RL[:6], "--max_completion_length", "8", "--reward_funcs", reward_model]
        return [*flags, "--value_model_name_or_path", reward_model], _math_rows(8)
    if recipe == "dpo":
        return ["--per_device_train_batch_size", "2", "--gradient_accumulation_steps", "1"], _pair_rows(8)
    if recipe == "reward":
        return ["--per_device_train_batch_size", "2"], _pair_rows(8)
    raise AssertionError(f"no overrides for the new recipe {recipe}: add them here")


def run_as_shipped(recipe: str, models: dict, tmp_path: Path, steps: int = 1, use_vllm: bool = False) -> Path:
    """`trl-ext <recipe> --config examples/recipes/<recipe>.yaml` with the allowed overrides; the output dir."""
    flags, rows = _overrides(recipe, models, use_vllm)
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    output = tmp_path / "out"
    common = ["--model_name_or_path", str(models["policy"]), "--dataset_name", str(data),
              "--output_dir", str(output), "--max_steps", str(steps), "--bf16", "False", "--use_cpu", "True",
              "--save_strategy", "no"]  # fmt: skip
    argv = [recipe, "--config", str(RECIPE_DIR / f"{recipe}.yaml"), *common, *flags]
    assert {flag for flag in argv if flag.startswith("--")} - {"--config"} <= ALLOWED
    assert main(argv) == 0
    return output


@pytest.mark.parametrize("recipe", sorted(path.stem for path in RECIPE_DIR.glob("*.yaml")))
def test_recipe_trains_a_step_as_shipped(recipe, tiny_model_paths, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    output = run_as_shipped(recipe, tiny_model_paths, tmp_path)
    assert (output / "model.safetensors").exists()
    if "tensorboard" in (RECIPE_DIR / f"{recipe}.yaml").read_text():  # the tracker the recipe names wrote its log
        assert list(output.rglob("events.out.tfevents.*")), "no TensorBoard event file"
