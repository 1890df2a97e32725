"""ProRL reference resets in DPO: the reset reference survives a checkpoint, PEFT resets the "ref" adapter."""

from __future__ import annotations

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

from trl_ext import DPOConfig, DPOTrainer

PAIRS = {
    "prompt": ["What is 12 + 30?", "Compute 7 * 8.", "Solve for x: 2x + 3 = 11.", "The quick brown fox"],
    "chosen": [" \\boxed{42}", " 56", " So x = \\boxed{4}.", " jumps over the lazy dog."],
    "rejected": [" \\boxed{41}", " 54 or so", " x = 5", " sleeps."],
}


class ReferenceAtStart(TrainerCallback):
    """Snapshots the reference when training starts, i.e. after a checkpoint was loaded."""

    def __init__(self):
        self.trainer, self.params = None, None

    def on_train_begin(self, args, state, control, **kwargs):
        self.params = [p.detach().clone() for p in self.trainer._reference_models()[1].parameters()]


def train(output_dir, policy_path, max_steps, resume=None, **config):
    args = DPOConfig(
        output_dir=str(output_dir),
        per_device_train_batch_size=1,
        max_steps=max_steps,
        learning_rate=1e-2,
        save_steps=1,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        report_to=[],
        seed=3,
        **config,
    )
    snapshot = ReferenceAtStart()
    trainer = DPOTrainer(
        model=policy_path,
        args=args,
        train_dataset=Dataset.from_dict(PAIRS),
        processing_class=AutoTokenizer.from_pretrained(policy_path),
        callbacks=[snapshot],
    )
    snapshot.trainer = trainer
    trainer.reference_at_start = snapshot
    trainer.train(resume_from_checkpoint=resume)
    return trainer


def test_reset_reference_survives_a_checkpoint(tmp_path, tiny_policy_path):
    full = train(tmp_path / "full", tiny_policy_path, max_steps=3, ref_reset_steps=2)
    assert full.reset_bookkeeping.reset_steps == [2]
    resumed = train(
        tmp_path / "resumed", tiny_policy_path, 3, str(tmp_path / "full" / "checkpoint-3"), ref_reset_steps=2
    )
    base = AutoModelForCausalLM.from_pretrained(tiny_policy_path)
    ref_full, ref_resumed = list(full._reference_models()[1].parameters()), resumed.reference_at_start.params
    assert all(torch.equal(a, b) for a, b in zip(ref_full, ref_resumed, strict=True))  # the step-2 reset, restored
    assert not all(torch.equal(a, b) for a, b in zip(ref_full, base.parameters(), strict=True))
    assert resumed.reset_bookkeeping.reset_steps[0] == 2


def test_peft_reset_copies_the_policy_adapter_into_the_ref_adapter(tmp_path, tiny_policy_path):
    from peft import LoraConfig

    args = DPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=2,
        max_steps=2,
        learning_rate=1e-2,
        ref_reset_steps=1,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        report_to=[],
        save_strategy="no",
    )
    trainer = DPOTrainer(
        model=tiny_policy_path,
        args=args,
        train_dataset=Dataset.from_dict(PAIRS),
        processing_class=AutoTokenizer.from_pretrained(tiny_policy_path),
        peft_config=LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False),
    )
    assert trainer.ref_model is None
    trainer.train()
    params = dict(trainer.model.named_parameters())
    pairs = [(p, params[name.replace(".default.", ".ref.")]) for name, p in params.items() if ".default." in name]
    assert pairs and all(torch.equal(policy, ref) for policy, ref in pairs)
    assert not any(ref.requires_grad for _, ref in pairs)
    assert trainer.reset_bookkeeping.resets == 2
