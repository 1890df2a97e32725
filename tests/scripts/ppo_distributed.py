"""Two-process PPO (launched by tests/trainers/test_ppo_distributed.py with accelerate on CPU over gloo: DDP or DeepSpeed ZeRO-2).

Trains 3 steps with a checkpoint at step 2, records each rank's whitening sums of every rollout, resumes a second run
from the checkpoint, and writes a JSON report per rank: the sums, fingerprints of the policy and critic parameters of
both runs, and whether the critic moved.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from tests._launch import write_report_and_exit  # noqa: E402
from tests.scripts.ppo_common import even_token_reward, prompts, tiny_ppo_config  # noqa: E402
from trl_ext.trainers.ppo import PPOTrainer  # noqa: E402


class RecordingPPOTrainer(PPOTrainer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.whitening_sums = []

    def generate_and_score(self, inputs):
        output = super().generate_and_score(inputs)
        advantages, mask = output["advantages"], output["value_mask"]
        sums = [mask.sum(), (advantages * mask).sum(), (advantages**2 * mask).sum()]
        self.whitening_sums.append([float(x) for x in sums])
        return output


def fingerprint(model):
    return [float(p.detach().double().sum()) for p in model.parameters()]


def train(policy_path, output_dir, placement, resume=None):
    args = tiny_ppo_config(
        output_dir, per_device_train_batch_size=2, max_steps=3, save_strategy="steps", save_steps=2, **placement
    )
    trainer = RecordingPPOTrainer(
        model=policy_path, reward_funcs=even_token_reward, args=args, train_dataset=prompts()
    )
    critic_before = fingerprint(trainer.value_model)
    trainer.train(resume_from_checkpoint=resume)
    trainer.critic_moved = fingerprint(trainer.value_model) != critic_before
    return trainer


def main(policy_path, output_dir, backend):
    # On CPU, DDP runs with use_cpu=True; DeepSpeed needs use_cpu=False plus an explicit gloo backend.
    placement = {"use_cpu": True} if backend == "ddp" else {"use_cpu": False, "ddp_backend": "gloo"}
    trainer = train(policy_path, output_dir, placement)
    trainer.save_model()
    resumed = train(
        policy_path, os.path.join(output_dir, "resumed"), placement, os.path.join(output_dir, "checkpoint-2")
    )
    report = {
        "num_processes": trainer.accelerator.num_processes,
        "deepspeed": trainer.is_deepspeed_enabled,
        "critic_is_ddp": isinstance(trainer.critic, torch.nn.parallel.DistributedDataParallel),
        "whitening_sums": trainer.whitening_sums,
        "policy": fingerprint(trainer.model),
        "critic": fingerprint(trainer.value_model),
        "critic_moved": trainer.critic_moved,
        "value_loss": [log["ppo/value_loss"] for log in trainer.state.log_history if "ppo/value_loss" in log],
        "resumed_policy": fingerprint(resumed.model),
        "resumed_critic": fingerprint(resumed.value_model),
        "resumed_steps": [log["step"] for log in resumed.state.log_history if "loss" in log],
    }
    write_report_and_exit(trainer, output_dir, report)


if __name__ == "__main__":
    main(*sys.argv[1:4])
