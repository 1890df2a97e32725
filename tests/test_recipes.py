"""Every example recipe YAML parses into its recipe's Config (with TRL's TrlParser, as the CLI does)."""

from pathlib import Path

import pytest
from trl import ModelConfig, TrlParser

from trl_ext.cli import RECIPES, ScriptArguments, recipe_classes

RECIPE_DIR = Path(__file__).resolve().parent.parent / "examples" / "recipes"


def test_every_recipe_has_an_example():
    assert sorted(path.stem for path in RECIPE_DIR.glob("*.yaml")) == sorted(set(RECIPES) - {"grpo"})


@pytest.mark.parametrize("path", sorted(RECIPE_DIR.glob("*.yaml")), ids=lambda p: p.stem)
def test_recipe_yaml_parses_into_its_config(path, monkeypatch):
    monkeypatch.chdir(path.parent)
    config_cls, _ = recipe_classes(path.stem)
    parser = TrlParser((ScriptArguments, config_cls, ModelConfig))
    # use_cpu: the recipes ask for bf16, which TrainingArguments refuses on a machine without a GPU otherwise
    script_args, args, model_args = parser.parse_args_and_config(["--config", str(path), "--use_cpu", "True"])
    assert type(args) is config_cls and model_args.model_name_or_path and script_args.dataset_name
    header = [line for line in path.read_text().splitlines() if line.startswith("#")]
    assert header and any("Scaled" in line for line in header)  # cites the paper values kept and what was scaled


@pytest.mark.parametrize("path", sorted((RECIPE_DIR.parent / "accelerate").glob("*.yaml")), ids=lambda p: p.stem)
def test_accelerate_config_loads(path):
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(path))
    assert config.distributed_type.value in {"MULTI_GPU", "DEEPSPEED", "FSDP"}
