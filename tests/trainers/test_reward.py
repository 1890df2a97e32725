"""trl_ext.RewardTrainer: listwise data, weighted pairs, and a saved RM that serves as a GRPO reward function."""

from __future__ import annotations

import importlib
import random

import pytest
import torch
from datasets import Dataset
from transformers import AutoModelForSequenceClassification, AutoTokenizer
from trl import RewardTrainer as TRLRewardTrainer

from tests import reference_preference as ref
from trl_ext import RewardConfig, RewardTrainer
from trl_ext.trainers._trl_hooks import check_trl_hooks
from trl_ext.trainers.reward import REWARD_HOOKS

FILLER = ["the", "quick", "brown", "dog", "lazy", "over", "jumps", "answer"]
MARKER = "fox"  # the learnable signal: the more markers, the better the completion


def marked_completion(rng: random.Random, num_markers: int, length: int = 6) -> str:
    words = [rng.choice(FILLER) for _ in range(length - num_markers)] + [MARKER] * num_markers
    rng.shuffle(words)
    return " " + " ".join(words)


def listwise_data(num_prompts: int, seed: int, k: int = 4) -> Dataset:
    """Same-length completions scored by their marker count, K distinct counts per prompt, shuffled."""
    rng = random.Random(seed)
    rows = []
    for _ in range(num_prompts):
        counts = rng.sample(range(k), k)
        rows.append(
            {
                "prompt": "Say something:",
                "completions": [marked_completion(rng, c) for c in counts],
                "scores": [float(c) for c in counts],
            }
        )
    return Dataset.from_list(rows)


def reward_config(output_dir, **overrides) -> RewardConfig:
    settings = dict(
        output_dir=str(output_dir),
        per_device_train_batch_size=16,
        learning_rate=1e-3,
        num_train_epochs=1,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        report_to=[],
        save_strategy="no",
        seed=0,
    )
    settings.update(overrides)
    return RewardConfig(**settings)


def pairwise_accuracy(model, tokenizer, data: Dataset) -> float:
    correct = total = 0
    with torch.no_grad():
        for row in data:
            texts = [row["prompt"] + c + tokenizer.eos_token for c in row["completions"]]
            encoded = tokenizer(texts, return_tensors="pt", padding=True, padding_side="right")
            scores = model(**encoded).logits.squeeze(-1).tolist()
            for i, j, _ in ref.listwise_pairs(row["scores"]):
                total += 1
                correct += scores[i] > scores[j]
    return correct / total


@pytest.fixture(scope="module")
def trained_rm(tiny_reward_model_path, tmp_path_factory):
    """A tiny RM trained for one epoch on listwise data, saved with its tokenizer."""
    output_dir = tmp_path_factory.mktemp("listwise-rm")
    trainer = RewardTrainer(
        model=tiny_reward_model_path,
        args=reward_config(output_dir),
        train_dataset=listwise_data(48, seed=0),
        processing_class=AutoTokenizer.from_pretrained(tiny_reward_model_path),
    )
    assert len(trainer.train_dataset) == 48 * 6
    trainer.train()
    trainer.save_model(str(output_dir / "final"))
    return str(output_dir / "final")


def test_listwise_rm_ranks_held_out_items_better_than_chance(trained_rm, tiny_reward_model_path):
    tokenizer = AutoTokenizer.from_pretrained(trained_rm)
    held_out = listwise_data(30, seed=123)
    untrained = AutoModelForSequenceClassification.from_pretrained(tiny_reward_model_path).eval()
    trained = AutoModelForSequenceClassification.from_pretrained(trained_rm).eval()
    assert trained.config.num_labels == 1
    before, after = pairwise_accuracy(untrained, tokenizer, held_out), pairwise_accuracy(trained, tokenizer, held_out)
    assert after >= 0.8 and after > before + 0.2, (before, after)


def test_weighted_listwise_loss_matches_the_reference(tiny_reward_model_path, tmp_path):
    rows = [listwise_data(1, seed=s, k=k)[0] for s, k in [(1, 2), (2, 3), (3, 4)]]  # 1 + 3 + 6 pairs
    trainer = RewardTrainer(
        model=tiny_reward_model_path,
        args=reward_config(tmp_path, per_device_train_batch_size=10, listwise_margin_scale=0.5),
        train_dataset=Dataset.from_list(rows),
        processing_class=AutoTokenizer.from_pretrained(tiny_reward_model_path),
    )
    weights = sorted(set(round(w, 6) for w in trainer.train_dataset["weight"]))
    assert weights == pytest.approx([w / 0.3 for w in (1 / 6, 1 / 3, 1.0)])  # 1/C(K,2) over the mean weight 0.3
    batch = next(iter(trainer.get_train_dataloader()))
    assert batch["weight"].shape == (10,) and batch["margin"].shape == (10,)
    model = trainer.model.eval()
    with torch.no_grad():
        loss = trainer.compute_loss(model, dict(batch))
        scores = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.squeeze(-1)
    chosen, rejected = scores.chunk(2)
    want = ref.bradley_terry_loss(
        chosen.tolist(), rejected.tolist(), batch["margin"].tolist(), batch["weight"].tolist()
    )
    assert loss.item() == pytest.approx(want, abs=1e-6)


def test_conversational_listwise_data_trains(tiny_reward_model_path, tmp_path):
    turn = lambda text: [{"role": "assistant", "content": text}]  # noqa: E731
    row = {
        "prompt": [{"role": "user", "content": "Say something:"}],
        "completions": [turn(" fox fox"), turn(" fox the"), turn(" the dog")],
        "ranking": [0, 1, 2],
    }
    trainer = RewardTrainer(
        model=tiny_reward_model_path,
        args=reward_config(tmp_path, per_device_train_batch_size=3, max_steps=1),
        train_dataset=Dataset.from_list([row, row]),
        processing_class=AutoTokenizer.from_pretrained(tiny_reward_model_path),
    )
    assert len(trainer.train_dataset) == 6 and trainer.train().training_loss > 0


def test_unweighted_listwise_and_margin_needs_scores(tiny_reward_model_path, tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_reward_model_path)
    data = listwise_data(2, seed=5, k=3)
    args = reward_config(tmp_path, listwise_pair_weighting=False)
    trainer = RewardTrainer(model=tiny_reward_model_path, args=args, train_dataset=data, processing_class=tokenizer)
    assert len(trainer.train_dataset) == 6 and "weight" not in trainer.train_dataset.column_names
    ranked = data.map(lambda row: {"ranking": sorted(range(3), key=lambda i: -row["scores"][i])}).remove_columns(
        "scores"
    )
    args = reward_config(tmp_path, listwise_margin_scale=1.0)
    with pytest.raises(ValueError, match="needs a `scores` column"):
        RewardTrainer(model=tiny_reward_model_path, args=args, train_dataset=ranked, processing_class=tokenizer)


def test_pairwise_data_goes_through_trl_unchanged(tiny_reward_model_path, tmp_path):
    data = Dataset.from_dict({"prompt": ["q", "r"], "chosen": [" fox fox", " fox"], "rejected": [" dog", " the"]})
    trainer = RewardTrainer(
        model=tiny_reward_model_path,
        args=reward_config(tmp_path, per_device_train_batch_size=2, max_steps=2),
        train_dataset=data,
        processing_class=AutoTokenizer.from_pretrained(tiny_reward_model_path),
    )
    assert "weight" not in trainer.train_dataset.column_names
    assert "weight" not in next(iter(trainer.get_train_dataloader()))
    assert trainer.train().training_loss > 0


@pytest.mark.parametrize("library,recipe", [("trl", "GRPO"), ("trl_ext", "GRPO"), ("trl_ext", "DAPO")])
def test_saved_rm_is_a_grpo_family_reward_function(trained_rm, tiny_policy_path, tmp_path, library, recipe):
    module = importlib.import_module(library)
    args = getattr(module, f"{recipe}Config")(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=6,
        max_steps=2,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
    )
    trainer = getattr(module, f"{recipe}Trainer")(
        model=tiny_policy_path,
        reward_funcs=trained_rm,
        args=args,
        train_dataset=Dataset.from_dict({"prompt": [f"Say something {i}:" for i in range(8)]}),
    )
    trainer.train()
    logged = [log for log in trainer.state.log_history if "reward" in log]
    assert len(logged) == 2 and all(log["reward"] == log["reward"] for log in logged)  # finite, not NaN
    assert "rewards/final/mean" in logged[0] and logged[0]["reward_std"] > 0  # the RM (saved as .../final) scored


def test_reward_trl_hooks_still_exist():
    assert check_trl_hooks(TRLRewardTrainer, REWARD_HOOKS) == []
    assert RewardTrainer.recipe_card.paper["id"] == "2203.02155" and "trl-ext" in RewardTrainer.recipe_card.tags
    for name in ("listwise_pair_weighting", "listwise_margin_scale"):
        assert RewardConfig.__dataclass_fields__[name].metadata["help"]
