"""Train tiny GRPO runs and record, for every micro-batch, TRL's training loss and the inputs it was computed from.

The recorded log-probs are recomputed from the model with a plain forward (logits / temperature, log-softmax), not
through TRL. The test (tests/core/test_trl_loss_matches_core.py) recomputes each loss with core's stated references.

    torchrun --nproc_per_node 2 tests/scripts/trl_loss_vs_core.py MODEL_PATH OUT_DIR
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

from tests.scripts import grpo_family  # noqa: E402

LOSS_TYPES = ("dapo", "grpo", "dr_grpo")
GRAD_ACCUM = 2
UPDATES_PER_ROLLOUT = 2  # steps_per_generation = 2 x gradient_accumulation_steps: the second update is off-policy
STEPS_PER_GENERATION = UPDATES_PER_ROLLOUT * GRAD_ACCUM
EPS_LOW, EPS_HIGH = 0.03, 0.05  # small, so that one update moves some ratios out of the clip range
MAX_COMPLETION_LENGTH = 8
GLOBAL_BATCH = 4  # completions per micro-batch, summed over the processes
EOS_SAMPLING_BIAS = 4.0  # the near-uniform tiny model then stops early sometimes: micro-batches differ in tokens


def completion_logps(model, inputs: dict, temperature: float) -> torch.Tensor:
    """log π(completion token | prefix) from a plain forward of the unwrapped model: (B, C)."""
    completion_ids = inputs["completion_ids"]
    input_ids = torch.cat([inputs["prompt_ids"], completion_ids], dim=1)
    attention_mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    logits = logits[:, -completion_ids.shape[1] - 1 : -1].float() / temperature
    return torch.log_softmax(logits, dim=-1).gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1)


def capturing(trainer_cls, records: list):
    """A subclass whose public ``compute_loss`` records TRL's loss and its inputs for each micro-batch."""

    class Capturing(trainer_cls):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            with torch.no_grad():  # the parameters are those TRL's loss just used: no optimizer step in between
                logp = completion_logps(self.accelerator.unwrap_model(model), inputs, self.args.temperature)
            keys = ("old_per_token_logps", "advantages", "completion_mask", "num_items_in_batch")
            record = {key: inputs[key].detach().cpu() for key in keys}
            record.update(loss=loss.detach().cpu().double(), logp=logp.cpu(), step=self.state.global_step)
            records.append(record)
            return loss

    return Capturing


def run(model_path: str, output_dir: str, loss_type: str) -> dict:
    """Two optimizer steps (one rollout, two updates) of ``loss_type``; returns the records and the logged metrics."""
    from transformers import AutoTokenizer

    import trl_ext

    world = int(os.environ.get("WORLD_SIZE", "1"))
    eos_id = AutoTokenizer.from_pretrained(model_path).eos_token_id
    records: list = []
    args = grpo_family.tiny_args(
        trl_ext.GRPOConfig,
        output_dir,
        per_device_train_batch_size=GLOBAL_BATCH // world,
        gradient_accumulation_steps=GRAD_ACCUM,
        steps_per_generation=STEPS_PER_GENERATION,
        max_completion_length=MAX_COMPLETION_LENGTH,
        loss_type=loss_type,
        epsilon=EPS_LOW,
        epsilon_high=EPS_HIGH,
        beta=0.0,
        learning_rate=5e-3,
        temperature=1.0,
        # Sampling only (TRL scores log-probs without it): varied lengths, so the token normaliser matters.
        generation_kwargs={"sequence_bias": {(eos_id,): EOS_SAMPLING_BIAS}},
    )
    trainer_cls = capturing(trl_ext.GRPOTrainer, records)
    data = grpo_family.scores_dataset(8)
    trainer = trainer_cls(model=model_path, reward_funcs=grpo_family.scripted_reward, args=args, train_dataset=data)
    trainer.train()
    logs = [log for log in trainer.state.log_history if "clip_ratio/region_mean" in log]
    return {"records": records, "logs": logs, "num_processes": trainer.accelerator.num_processes}


def main(model_path: str, out_dir: str) -> None:
    """Each process saves {loss_type: run(...)} to OUT_DIR/rank-<i>.pt."""
    results = {
        loss_type: run(model_path, os.path.join(out_dir, f"run-{loss_type}"), loss_type) for loss_type in LOSS_TYPES
    }
    rank = int(os.environ.get("RANK", "0"))
    torch.save(results, os.path.join(out_dir, f"rank-{rank}.pt"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
