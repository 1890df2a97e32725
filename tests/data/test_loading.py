"""trl_ext.data.loading: datasets load from files and saved directories, with sliced splits as on the Hub."""

from pathlib import Path

import pytest
import yaml
from trl import ModelConfig, TrlParser

from trl_ext.cli.parser import ScriptArguments
from trl_ext.data.loading import load_any_dataset, split_name
from trl_ext.recipes import recipe_classes

PRORL_YAML = Path(__file__).resolve().parents[2] / "examples" / "recipes" / "prorl.yaml"


@pytest.fixture(scope="module")
def numbered_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "rows.jsonl"
    path.write_text("".join(f'{{"prompt": "p{i}", "solution": "{i}"}}\n' for i in range(20)))
    return str(path)


def test_split_name_strips_the_slice():
    assert split_name("train[512:]") == "train" and split_name("validation") == "validation"
    with pytest.raises(ValueError, match="split name"):
        split_name("[:5]")


def test_a_sliced_split_of_a_local_file_holds_out_the_rows_it_names(numbered_file):
    train, test = (
        load_any_dataset(numbered_file, split="train[5:]"),
        load_any_dataset(numbered_file, split="train[:5]"),
    )
    assert [row["solution"] for row in test] == [str(i) for i in range(5)]
    assert [row["solution"] for row in train] == [str(i) for i in range(5, 20)]
    assert len(load_any_dataset(numbered_file, split="train[:25%]")) == 5


def test_a_saved_directory_is_sliced_too(numbered_file, tmp_path):
    load_any_dataset(numbered_file).save_to_disk(str(tmp_path / "saved"))
    assert len(load_any_dataset(str(tmp_path / "saved"))) == 20
    assert [row["solution"] for row in load_any_dataset(str(tmp_path / "saved"), split="train[18:]")] == ["18", "19"]


def test_the_prorl_recipe_split_flags_work_on_a_local_file(numbered_file, tmp_path, monkeypatch):
    """examples/recipes/prorl.yaml holds out train[:512] for evaluation; with a local file instead of the Hub dataset
    (the YAML's split flags unchanged) both splits load and do not overlap."""
    settings = yaml.safe_load(PRORL_YAML.read_text())
    rows = 600
    Path(numbered_file).write_text("".join(f'{{"prompt": "p{i}", "solution": "{i}"}}\n' for i in range(rows)))
    settings["dataset_name"] = numbered_file
    config = tmp_path / "prorl.yaml"
    config.write_text(yaml.safe_dump(settings))
    monkeypatch.chdir(tmp_path)
    config_cls, _ = recipe_classes("prorl")
    parser = TrlParser((ScriptArguments, config_cls, ModelConfig))
    script_args, _, _ = parser.parse_args_and_config(["--config", str(config), "--use_cpu", "True"])
    assert (script_args.dataset_train_split, script_args.dataset_test_split) == ("train[512:]", "train[:512]")
    train = load_any_dataset(script_args.dataset_name, split=script_args.dataset_train_split)
    test = load_any_dataset(script_args.dataset_name, split=script_args.dataset_test_split)
    assert (len(train), len(test)) == (rows - 512, 512)
    assert not set(train["solution"]) & set(test["solution"])
