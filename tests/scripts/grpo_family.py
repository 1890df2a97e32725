"""Shared helpers for the GRPO-family tests, and a script run under torchrun by the 1-vs-2-process test.

Rewards are scripted per (prompt, member of the group) through a ``scores`` column, so two runs that see the same
prompts get the same rewards whatever the random tiny model generates.

    torchrun --nproc_per_node N tests/scripts/grpo_family.py MODEL_PATH OUT_JSON
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402

G = 4  # num_generations in every test


def scores_dataset(num_prompts: int = 16, informative_every: int = 1, seed: int = 0) -> Dataset:
    """Prompts with a `scores` column: G scripted rewards per prompt; only every `informative_every`-th prompt has
    scores that differ within its group (the others are all 1.0: an uninformative group)."""
    generator = torch.Generator().manual_seed(seed)
    rows = {"prompt": [], "scores": [], "pid": []}
    for i in range(num_prompts):
        if i % informative_every == 0:
            scores = torch.randint(0, 4, (G,), generator=generator).float()
            scores[0] = 5.0  # at least two distinct values
        else:
            scores = torch.ones(G)
        rows["prompt"].append(f"Question {i}: what is {i} + {i}?")
        rows["scores"].append(scores.tolist())
        rows["pid"].append(i)
    return Dataset.from_dict(rows)


def scripted_reward(completions, scores, **kwargs) -> list[float]:
    """The member index is the row's position in its group: local batches hold whole, contiguous groups."""
    return [row_scores[i % G] for i, row_scores in enumerate(scores)]


def length_shaping(completion_ids, **kwargs) -> list[float]:
    return [0.01 * len(ids) for ids in completion_ids]


length_shaping.trl_ext_shaping = True


def tiny_args(config_cls, output_dir: str, **overrides):
    settings = dict(
        output_dir=output_dir,
        max_steps=2,
        per_device_train_batch_size=8,
        num_generations=G,
        max_completion_length=8,
        use_cpu=os.environ.get("TRL_EXT_TEST_DEVICE", "cpu") == "cpu",  # "cuda": the same tests on a GPU
        bf16=False,
        gradient_checkpointing=False,
        report_to="none",
        logging_steps=1,
        save_strategy="no",
        seed=0,
        disable_tqdm=True,
    )
    settings.update(overrides)
    return config_cls(**settings)


def recording(trainer_cls, seen: list):
    """A subclass of ``trainer_cls`` that appends, for each generation batch, the gathered final advantages, the
    prompt ids of the step's own batch, the gathered (P·B, F) rewards of every generation round and the output to
    ``seen``."""
    from accelerate.utils import gather_object

    class Recording(trainer_cls):
        def score_rollouts(self, inputs, rollout):  # a dynamic-sampling round
            rewards_per_func = super().score_rollouts(inputs, rollout)
            self._rounds.append(rewards_per_func.cpu())
            return rewards_per_func

        def trl_generate_round(self, inputs):
            replayed = self.hook_state.replaying  # dynamic sampling's single TRL step on the kept rows
            output, rewards_per_func = super().trl_generate_round(inputs)
            if not replayed:
                self._rounds.append(rewards_per_func.cpu())
            return output, rewards_per_func

        def generate_and_score(self, inputs):
            self._rounds = []
            output = super().generate_and_score(inputs)
            record = {"advantages": self.accelerator.gather(output["advantages"]).cpu()}
            record["pids"] = gather_object([row["pid"] for row in inputs])
            record["rounds"], record["output"] = self._rounds, output
            seen.append(record)
            return output

    return Recording


def main(model_path: str, out_path: str) -> None:
    """Train each estimator for 2 steps and record the gathered advantages and rewards of every generation batch."""
    import trl_ext

    records = {}
    cases = {
        "grpo": (trl_ext.GRPOTrainer, trl_ext.GRPOConfig, {}),
        "dr_grpo": (trl_ext.DrGRPOTrainer, trl_ext.DrGRPOConfig, {}),
        "rloo": (trl_ext.RLOOTrainer, trl_ext.RLOOConfig, {}),
        "magistral": (trl_ext.MagistralTrainer, trl_ext.MagistralConfig, {"dynamic_sampling": False}),
        # Without the length shaping, a non-zero advantage in a group means the group is informative.
        "dapo": (trl_ext.DAPOTrainer, trl_ext.DAPOConfig, {"soft_overlong_punishment": False}),
        "magistral_ds": (trl_ext.MagistralTrainer, trl_ext.MagistralConfig, {"soft_overlong_punishment": False}),
    }
    world = int(os.environ.get("WORLD_SIZE", "1"))
    for name, (trainer_cls, config_cls, extra) in cases.items():
        seen = []
        Recording = recording(trainer_cls, seen)

        args = tiny_args(
            config_cls,
            os.path.join(os.path.dirname(out_path), f"run-{name}"),
            per_device_train_batch_size=8 // world,
            **extra,
        )
        data = scores_dataset(16, informative_every=1 if name in ("grpo", "dr_grpo", "rloo", "magistral") else 2)
        trainer = Recording(model=model_path, reward_funcs=scripted_reward, args=args, train_dataset=data)
        trainer.train()
        logs = [log for log in trainer.state.log_history if "dynamic_sampling/rounds" in log]
        batches = [{"advantages": b["advantages"].tolist(), "pids": b["pids"]} for b in seen]
        records[name] = {"batches": batches, "ds_logs": logs}
        trainer.accelerator.wait_for_everyone()
    records["num_processes"] = trainer.accelerator.num_processes
    if trainer.accelerator.is_main_process:
        with open(out_path, "w") as f:
            json.dump(records, f)
    trainer.accelerator.end_training()  # Trainer.end() (transformers >= 5.2x) does this; older ones lack it


RESUME_KEYS = ("generated_groups", "used_groups", "skipped_prompts", "rounds", "informative_rate_estimate")


def resume_main(model_path: str, out_path: str) -> None:
    """DAPO with refills and GRESO prompt skipping: 6 steps with a checkpoint at 3, then a run resumed from it.
    Records both runs' dynamic-sampling logs, the largest weight difference and every rank's prompt history."""
    from accelerate.utils import gather_object

    import trl_ext

    world = int(os.environ.get("WORLD_SIZE", "1"))
    root = os.path.dirname(out_path)
    trainers = []
    for name in ("full", "resumed"):
        saving = dict(save_strategy="steps", save_steps=3) if name == "full" else {}
        args = tiny_args(
            trl_ext.DAPOConfig, os.path.join(root, f"resume-{name}"), per_device_train_batch_size=8 // world,
            max_steps=6, soft_overlong_punishment=False, prompt_skipping="greso", **saving,
        )  # fmt: skip
        trainer = trl_ext.DAPOTrainer(
            model=model_path, reward_funcs=scripted_reward, args=args, train_dataset=scores_dataset(16, 4)
        )
        checkpoint = os.path.join(root, "resume-full", "checkpoint-3") if name == "resumed" else None
        trainer.train(resume_from_checkpoint=checkpoint)
        trainer.accelerator.wait_for_everyone()
        trainers.append(trainer)
    full, resumed = trainers
    diff = max(float((a - b).abs().max()) for a, b in zip(full.model.parameters(), resumed.model.parameters()))
    report = {"num_processes": full.accelerator.num_processes, "max_weight_diff": diff}
    for name, trainer in zip(("full", "resumed"), trainers):
        logs = {key: [log[f"dynamic_sampling/{key}"] for log in trainer.state.log_history
                      if f"dynamic_sampling/{key}" in log] for key in RESUME_KEYS}  # fmt: skip
        report[name] = {"logs": logs, "skipper_per_rank": gather_object([trainer._skipper.state_dict()])}
    if full.accelerator.is_main_process:
        with open(out_path, "w") as f:
            json.dump(report, f)
    full.accelerator.wait_for_everyone()
    resumed.accelerator.end_training()


if __name__ == "__main__":
    (resume_main if sys.argv[3:] == ["resume"] else main)(sys.argv[1], sys.argv[2])
