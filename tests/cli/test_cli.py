"""The `trl-ext` CLI: recipes train from a local data file; datasets, rewards and errors resolve as documented."""

import json
import os

import pytest

from tests._launch import ROOT, launch_two_processes
from trl_ext.cli import load_any_dataset, main, resolve_reward
from trl_ext.data.demo import arithmetic_prompts

TINY_RUN = [
    "--max_steps", "2", "--per_device_train_batch_size", "4", "--max_completion_length", "6",
    "--bf16", "False", "--gradient_checkpointing", "False", "--report_to", "none", "--save_strategy", "no",
    "--logging_steps", "1", "--disable_tqdm", "True",
]  # fmt: skip
ON_CPU = ["--use_cpu", "True"]


@pytest.fixture(scope="module")
def prompt_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "arithmetic.jsonl"
    arithmetic_prompts().to_json(str(path))
    return str(path)


@pytest.mark.parametrize("recipe", ["grpo", "dapo", "dr_grpo", "rloo", "magistral", "prorl", "ppo"])
def test_cli_trains_each_rl_recipe_from_a_local_file(recipe, tmp_path, tiny_policy_path, prompt_file):
    output_dir = tmp_path / recipe
    argv = [recipe, "--model_name_or_path", tiny_policy_path, "--dataset_name", prompt_file, "--output_dir",
            str(output_dir), "--num_generations", "4", "--reward_funcs", "math_accuracy", "boxed_format", *TINY_RUN, *ON_CPU]  # fmt: skip
    assert main(argv) == 0
    assert (output_dir / "model.safetensors").exists() and (output_dir / "README.md").exists()
    assert (output_dir / "critic" / "config.json").exists() == (recipe == "ppo")


def test_cli_reads_a_yaml_config(tmp_path, tiny_policy_path, prompt_file):
    config = tmp_path / "dapo.yaml"
    config.write_text(f"model_name_or_path: {tiny_policy_path}\ndataset_name: {prompt_file}\nnum_generations: 4\n"
                      f"epsilon_high: 0.3\noutput_dir: {tmp_path / 'out'}\n")  # fmt: skip
    from trl_ext.cli import train

    trainer = train("dapo", ["--config", str(config), *TINY_RUN, *ON_CPU])
    assert trainer.args.epsilon_high == 0.3 and trainer.args.dynamic_sampling is True


def test_datasets_load_from_files_and_saved_directories(tmp_path, prompt_file):
    assert len(load_any_dataset(prompt_file)) == 25
    arithmetic_prompts().save_to_disk(str(tmp_path / "saved"))
    assert load_any_dataset(str(tmp_path / "saved"))[0]["solution"] == "\\boxed{0}"
    (tmp_path / "data.txt").write_text("x")
    with pytest.raises(ValueError, match="`dataset_name`.*unsupported file type"):
        load_any_dataset(str(tmp_path / "data.txt"))


def test_reward_names_resolve_or_fail_clearly():
    from trl_ext.rewards import math_accuracy

    assert resolve_reward("math_accuracy") is math_accuracy
    assert resolve_reward("json:dumps") is json.dumps
    with pytest.raises(ValueError, match="Unknown reward function 'mathh'"):
        resolve_reward("mathh")


def test_cli_rejects_an_unknown_recipe():
    with pytest.raises(SystemExit):
        main(["dappo"])


# DeepSpeed on CPU: accelerate needs an explicit gloo backend, and use_cpu must stay off.
PLACEMENT = {"ddp": ["--use_cpu", "True"], "zero2": ["--use_cpu", "False", "--ddp_backend", "gloo"]}


@pytest.mark.slow
@pytest.mark.parametrize("backend", sorted(PLACEMENT))
def test_cli_under_accelerate_with_two_processes(backend, tmp_path, tiny_policy_path, prompt_file):
    args = ["--recipe", "dapo", "--model_name_or_path", tiny_policy_path, "--dataset_name", prompt_file,
            "--output_dir", str(tmp_path), "--num_generations", "4", *TINY_RUN, *PLACEMENT[backend]]  # fmt: skip
    port = {"ddp": 29621, "zero2": 29622}[backend]
    launch_two_processes(backend, os.path.join(ROOT, "scripts", "train.py"), args, port)
    assert (tmp_path / "model.safetensors").exists() and "trl_ext" in (tmp_path / "README.md").read_text()


@pytest.fixture(scope="module")
def pair_file(tmp_path_factory):
    from datasets import Dataset

    path = tmp_path_factory.mktemp("pairs") / "pairs.jsonl"
    rows = {"prompt": ["1+1", "2+2"] * 4, "chosen": [" 2", " 4"] * 4, "rejected": [" 3", " 5"] * 4}
    Dataset.from_dict(rows).to_json(str(path))
    return str(path)


@pytest.mark.parametrize(
    ("recipe", "model_fixture"), [("dpo", "tiny_policy_path"), ("reward", "tiny_reward_model_path")]
)
def test_cli_trains_preference_recipes(recipe, model_fixture, request, tmp_path, pair_file):
    model = request.getfixturevalue(model_fixture)
    argv = [recipe, "--model_name_or_path", model, "--dataset_name", pair_file, "--output_dir", str(tmp_path),
            "--max_steps", "2", "--per_device_train_batch_size", "2", "--use_cpu", "True", "--bf16", "False",
            "--report_to", "none", "--save_strategy", "no", "--disable_tqdm", "True"]  # fmt: skip
    assert main(argv) == 0
    assert (tmp_path / "model.safetensors").exists() and "trl_ext" in (tmp_path / "README.md").read_text()
