"""trl_ext.DPOTrainer: a `margin` column changes TRL's real DPO loss exactly as the core formula says."""

from __future__ import annotations

import pytest
import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import DPOTrainer as TRLDPOTrainer

from tests import reference_preference as ref
from trl_ext import DPOConfig, DPOTrainer
from trl_ext.core.preference import dpo_margin_loss
from trl_ext.trainers._trl_hooks import check_trl_hooks
from trl_ext.trainers.dpo import DPO_HOOKS

PAIRS = {
    "prompt": ["What is 12 + 30?", "Compute 7 * 8.", "Solve for x: 2x + 3 = 11.", "The quick brown fox"],
    "chosen": [" \\boxed{42}", " 56", " So x = \\boxed{4}.", " jumps over the lazy dog."],
    "rejected": [" \\boxed{41}", " 54 or so", " x = 5", " sleeps."],
    "margin": [0.0, 0.5, -0.3, 2.0],
}


def make_trainer(policy_path, tmp_path, loss_type="sigmoid", with_margin=True, **config):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(policy_path)
    with torch.no_grad():  # move the policy off the reference (rebuilt from the path) so that Δ != 0
        for param in model.parameters():
            param.add_(0.05 * torch.randn_like(param))
    data = dict(PAIRS) if with_margin else {k: v for k, v in PAIRS.items() if k != "margin"}
    args = DPOConfig(
        output_dir=str(tmp_path),
        loss_type=[loss_type],
        beta=0.5,
        per_device_train_batch_size=4,
        max_steps=1,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        report_to=[],
        **config,
    )
    return DPOTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_dict(data),
        processing_class=AutoTokenizer.from_pretrained(policy_path),
    )


def first_batch(trainer):
    return next(iter(trainer.get_train_dataloader()))


@pytest.mark.parametrize(
    "loss_type,smoothing,precompute",
    [("sigmoid", 0.0, False), ("hinge", 0.0, False), ("robust", 0.1, False), ("sigmoid", 0.0, True)],
)
def test_margin_changes_the_trainer_loss_exactly_as_the_formula(
    tiny_policy_path, tmp_path, loss_type, smoothing, precompute
):
    trainer = make_trainer(
        tiny_policy_path, tmp_path, loss_type, label_smoothing=smoothing, precompute_ref_log_probs=precompute
    )
    batch = first_batch(trainer)
    assert ("ref_chosen_logps" in batch) == precompute
    margin = batch["margin"].clone()
    assert sorted(margin.tolist()) == pytest.approx(sorted(PAIRS["margin"]))
    with torch.no_grad():
        policy_chosen, policy_rejected = trainer.compute_ref_log_probs(trainer.model, batch)
        if precompute:  # TRL precomputed them with the policy itself (Δ = 0): move them as training would
            batch["ref_chosen_logps"] = batch["ref_chosen_logps"] - 0.3
            batch["ref_rejected_logps"] = batch["ref_rejected_logps"] + 0.2
            ref_chosen, ref_rejected = batch["ref_chosen_logps"], batch["ref_rejected_logps"]
        else:
            ref_chosen, ref_rejected = trainer.compute_ref_log_probs(trainer.ref_model, batch)
        delta = (policy_chosen - ref_chosen) - (policy_rejected - ref_rejected)
        assert delta.abs().min() > 1e-3
        with_margin = trainer.compute_loss(trainer.model, dict(batch))
        without = trainer.compute_loss(trainer.model, {k: v for k, v in batch.items() if k != "margin"})
    expected = dpo_margin_loss(delta, margin, trainer.beta, loss_type, smoothing).mean()
    expected_plain = [
        ref.dpo_margin_loss(d, m, 0.5, loss_type, smoothing) for d, m in zip(delta.tolist(), margin.tolist())
    ]
    assert with_margin.item() == pytest.approx(expected.item(), abs=1e-5)
    assert with_margin.item() == pytest.approx(sum(expected_plain) / len(expected_plain), abs=1e-5)
    assert without.item() == pytest.approx(
        dpo_margin_loss(delta, torch.zeros_like(delta), 0.5, loss_type, smoothing).mean().item(), abs=1e-5
    )
    assert with_margin.item() != pytest.approx(without.item(), abs=1e-4)


def test_margin_metrics_are_margin_free(tiny_policy_path, tmp_path):
    trainer = make_trainer(tiny_policy_path, tmp_path)
    batch = first_batch(trainer)
    trainer.model.train()
    with torch.no_grad():
        trainer.compute_loss(trainer.model, {k: v for k, v in batch.items() if k != "margin"})
        trainer.compute_loss(trainer.model, dict(batch))
    metrics = trainer._metrics["train"]
    assert metrics["rewards/margins"][1] == pytest.approx(metrics["rewards/margins"][0], abs=1e-5)
    assert metrics["rewards/chosen"][1] == pytest.approx(metrics["rewards/chosen"][0], abs=1e-5)
    assert metrics["margin"] == [pytest.approx(sum(PAIRS["margin"]) / 4)]


@pytest.mark.parametrize("loss_type", ["ipo", "bco_pair", "apo_zero"])
def test_margin_is_refused_where_undefined(tiny_policy_path, tmp_path, loss_type):
    with pytest.raises(ValueError, match=f"undefined for loss_type \\['{loss_type}'\\]"):
        make_trainer(tiny_policy_path, tmp_path, loss_type)


def test_training_with_a_margin_column_runs_and_keeps_pairwise_data_working(tiny_policy_path, tmp_path):
    for with_margin in (True, False):
        trainer = make_trainer(tiny_policy_path, tmp_path / str(with_margin), with_margin=with_margin)
        assert trainer.train().training_loss > 0


def test_dpo_trl_hooks_still_exist():
    assert check_trl_hooks(TRLDPOTrainer, DPO_HOOKS) == []
    card = DPOTrainer.recipe_card
    assert card.name == "DPO" and card.paper["id"] == "2305.18290" and "trl-ext" in card.tags


def test_plain_trl_config_works_with_resets_off(tiny_policy_path, tmp_path):
    from trl import DPOConfig as TRLDPOConfig

    args = TRLDPOConfig(
        output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4, use_cpu=True, report_to=[]
    )
    trainer = DPOTrainer(
        model=tiny_policy_path,
        args=args,
        train_dataset=Dataset.from_dict(PAIRS),
        processing_class=AutoTokenizer.from_pretrained(tiny_policy_path),
    )
    assert isinstance(trainer.args, DPOConfig) and not trainer.args.reference_resets_enabled
    assert trainer.args.beta == args.beta and trainer.args.output_dir == args.output_dir


def test_resets_refuse_precomputed_reference_logps(tmp_path):
    with pytest.raises(ValueError, match="precompute_ref_log_probs=False"):
        DPOConfig(output_dir=str(tmp_path), use_cpu=True, ref_reset_steps=2, precompute_ref_log_probs=True)
    with pytest.raises(ValueError, match="ref_reset_steps"):
        DPOConfig(output_dir=str(tmp_path), use_cpu=True, ref_reset_steps=0)
