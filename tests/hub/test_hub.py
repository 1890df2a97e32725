"""Model cards render offline with plot, metadata, recipe, hyper-parameters and metrics; failed pushes keep files."""

import hashlib
from pathlib import Path

import pytest
import trl
from huggingface_hub import EvalResult, ModelCard

from tests._reset_trainers import length_reward, prompts
from trl_ext.hub import (
    HubPushError,
    ModelCardMixin,
    changed_hyperparameters,
    plot_training_curves,
    push_folder,
    write_model_card,
)
from trl_ext.trainers.papers import RecipeCard


class CardedGRPOTrainer(ModelCardMixin, trl.GRPOTrainer):
    recipe_card = RecipeCard(
        name="DAPO",
        tags=("trl", "dapo"),
        paper={"title": "DAPO", "id": "2503.14476", "citation": "@article{yu2025dapo, title={DAPO}}"},
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_policy_path):
    output_dir = tmp_path_factory.mktemp("card-run")
    args = trl.GRPOConfig(
        output_dir=str(output_dir), per_device_train_batch_size=4, num_generations=4, max_completion_length=6,
        max_steps=3, logging_steps=1, save_strategy="no", report_to="none", use_cpu=True, bf16=False,
        gradient_checkpointing=False, epsilon_high=0.28, learning_rate=3e-4, disable_tqdm=True,
    )  # fmt: skip
    trainer = CardedGRPOTrainer(model=tiny_policy_path, reward_funcs=length_reward, args=args, train_dataset=prompts())
    trainer.train()
    trainer.save_model()
    return trainer


def test_card_renders_offline_with_recipe_hyperparameters_metrics_and_plot(trained):
    path = write_model_card(trained, dataset_name="local/arithmetic")
    text = path.read_text()
    assert "**DAPO**" in text and "arXiv 2503.14476" in text and "@article{yu2025dapo" in text
    assert "| `epsilon_high` | `0.28` |" in text and "| `learning_rate` | `0.0003` |" in text
    assert "| reward |" in text and "| kl |" not in text  # beta = 0: TRL logs no KL
    assert "`length_reward`" in text
    assert "a local model at `" in text and "None" not in text.split("## Training procedure")[0]
    plot = Path(trained.args.output_dir) / "training_curves.png"
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "![Training curves](training_curves.png)" in text


def test_card_metadata_round_trips_and_carries_eval_results(trained, tmp_path):
    (Path(trained.args.output_dir) / "eval_results.json").write_text(
        '[{"task_type": "text-generation", "dataset_type": "local/arithmetic", "dataset_name": "arithmetic", '
        '"metric_type": "pass@1", "metric_value": 0.25}]'
    )
    try:
        card = ModelCard.load(write_model_card(trained))
    finally:
        (Path(trained.args.output_dir) / "eval_results.json").unlink()
    data = card.data
    assert data.library_name == "transformers" and data.base_model is None  # a local path is no Hub id
    assert {"trl", "trl_ext", "dapo"} <= set(data.tags)
    assert data.eval_results == [
        EvalResult(task_type="text-generation", dataset_type="local/arithmetic", dataset_name="arithmetic",
                   metric_type="pass@1", metric_value=0.25)
    ]  # fmt: skip
    assert "model-index" in card.content and "| arithmetic | pass@1 | 0.25 |" in card.content


def test_trainer_writes_the_trl_ext_card_at_checkpoints(tmp_path, tiny_policy_path):
    args = trl.GRPOConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4, max_completion_length=4,
        max_steps=1, save_strategy="steps", save_steps=1, report_to="none", use_cpu=True, bf16=False,
        gradient_checkpointing=False, disable_tqdm=True,
    )  # fmt: skip
    CardedGRPOTrainer(model=tiny_policy_path, reward_funcs=length_reward, args=args, train_dataset=prompts()).train()
    card = (tmp_path / "README.md").read_text()
    assert "trl_ext" in card and "fine-tuned version of None" not in card


def test_changed_hyperparameters_lists_only_differences_from_trl_defaults(tmp_path):
    args = trl.GRPOConfig(output_dir=str(tmp_path), beta=0.04, use_cpu=True, bf16=False, report_to="none")
    rows = dict(changed_hyperparameters(args))
    assert rows["beta"] == 0.04 and "output_dir" not in rows and "epsilon" not in rows


def test_plot_needs_logged_metrics(tmp_path):
    assert not plot_training_curves([{"loss": 1.0, "step": 1}], tmp_path / "x.png")
    assert plot_training_curves([{"reward": 0.1, "step": 1}, {"reward": 0.3, "step": 2}], tmp_path / "y.png")


def digest(directory):
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(Path(directory).rglob("*")) if p.is_file()
    }


def test_push_without_network_fails_cleanly_and_keeps_local_files(trained, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    before = digest(trained.args.output_dir)
    with pytest.raises(HubPushError, match="local output is intact"):
        push_folder(trained.args.output_dir, "someone/tiny-dapo", token="hf_fake")
    assert digest(trained.args.output_dir) == before


def test_push_of_a_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(HubPushError, match="not a directory"):
        push_folder(tmp_path / "nope", "someone/x")
