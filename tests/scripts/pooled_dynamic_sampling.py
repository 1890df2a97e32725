"""DAPO's dynamic sampling in N processes, recording what each rank generated and what it trained on.

    torchrun --nproc_per_node N tests/scripts/pooled_dynamic_sampling.py MODEL_PATH OUT_JSON

Per step and rank: the gathered informative mask of every round, the groups this rank generated (prompt id and
completion token ids), the groups it trained on (the same, plus their final advantages and scripted scores) and the
rows it passed through generation. Rank 1's prompts are all uninformative (its copy of the data scores every member
alike), so every group it trains on must come from another rank. Rank 0 writes every rank's records to OUT_JSON.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tests.scripts.grpo_family import G, scores_dataset, scripted_reward, tiny_args  # noqa: E402

NEEDED = 2  # groups per rank and step
STEPS = 4


def main(model_path: str, out_path: str) -> None:
    from accelerate.utils import gather_object

    import trl_ext

    steps = []

    class Recording(trl_ext.DAPOTrainer):
        def generate_and_score(self, inputs):
            steps.append({"masks": [], "generated": [], "trained": [], "generated_rows": 0})
            output = super().generate_and_score(inputs)
            step = steps[-1]
            advantages = output["advantages"].view(-1, G).tolist()
            for group, group_advantages in zip(step["trained"], advantages, strict=True):
                group["advantages"] = group_advantages
            step["output_completion_ids"] = output["completion_ids"].tolist()  # right-padded
            return output

        def generate_rollouts(self, inputs):
            rollout = super().generate_rollouts(inputs)
            steps[-1]["generated_rows"] += len(inputs)
            for g in range(0, len(inputs), G):
                steps[-1]["generated"].append(
                    {"pid": inputs[g]["pid"], "completion_ids": rollout.completion_ids[g : g + G]}
                )
            return rollout

        def score_rollouts(self, inputs, rollout):
            rewards_per_func = super().score_rollouts(inputs, rollout)
            steps[-1]["masks"].append(self._informative(rewards_per_func).tolist())
            return rewards_per_func

        def trl_step_on(self, inputs, rollout, gathered_rewards):
            for g in range(0, len(inputs), G):
                steps[-1]["trained"].append({
                    "pid": inputs[g]["pid"],
                    "scores": inputs[g]["scores"],
                    "completion_ids": [list(ids) for ids in rollout.completion_ids[g : g + G]],
                })  # fmt: skip
            return super().trl_step_on(inputs, rollout, gathered_rewards)

    args = tiny_args(
        trl_ext.DAPOConfig,
        os.path.join(os.path.dirname(out_path), "run-pooled"),
        per_device_train_batch_size=NEEDED * G,
        max_steps=STEPS,
        soft_overlong_punishment=False,
    )
    data = scores_dataset(32, informative_every=2)
    if int(os.environ.get("RANK", "0")) == 1:  # skewed: every group rank 1 generates is uninformative
        data = data.map(lambda row: {"scores": [1.0] * G})
    trainer = Recording(model=model_path, reward_funcs=scripted_reward, args=args, train_dataset=data)
    trainer.train()
    logs = [log for log in trainer.state.log_history if "dynamic_sampling/rounds" in log]
    per_rank = gather_object([steps])
    if trainer.accelerator.is_main_process:
        record = {"num_processes": trainer.accelerator.num_processes, "needed": NEEDED, "ranks": per_rank}
        record["logs"] = logs
        with open(out_path, "w") as f:
            json.dump(record, f)
    trainer.accelerator.wait_for_everyone()
    trainer.accelerator.end_training()  # Trainer.end() (transformers >= 5.2x) does this; older ones lack it


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
