"""Two-process reference reset (launched by tests/resets/test_distributed.py with accelerate; DDP or DeepSpeed).

Trains a tiny GRPO run with ``ref_reset_steps=2`` and, right after the reset, checks on every rank that the
reference equals the policy and that every optimizer state tensor is zero. Writes a JSON report per rank.
"""

import os
import sys

import torch
from transformers import TrainerCallback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from tests._launch import write_report_and_exit  # noqa: E402
from tests._reset_trainers import ResetGRPOTrainer, length_reward, prompts, tiny_config  # noqa: E402
from trl_ext.resets import gathered_parameters, optimizer_chain  # noqa: E402


class CheckAfterReset(TrainerCallback):
    def __init__(self, trainer):
        self.trainer, self.report = trainer, {}

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step != 2:
            return
        policy, reference = self.trainer._reference_models()
        inner = optimizer_chain(self.trainer.optimizer)[-1]
        state_tensors = [t for s in inner.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
        params = list(policy.parameters()) + list(reference.parameters())
        with gathered_parameters(params, modifier_rank=None):  # ZeRO-3 partitions parameters
            pairs = zip(policy.parameters(), reference.parameters(), strict=True)
            max_ref_diff = max((a - b).abs().max().item() for a, b in pairs)
        self.report = {
            "resets": self.trainer.reset_bookkeeping.resets,
            "max_ref_diff": max_ref_diff,
            "state_tensors": len(state_tensors),
            "state_nonzero": sum(int(torch.count_nonzero(t)) for t in state_tensors),
            "lr": self.trainer.optimizer.param_groups[0]["lr"],
        }


def main(policy_path, output_dir, backend):
    # On CPU, DDP runs with use_cpu=True; DeepSpeed needs use_cpu=False plus an explicit gloo backend, without
    # which accelerate sees no distributed backend and runs each process as if alone.
    placement = {"use_cpu": True} if backend == "ddp" else {"use_cpu": False, "ddp_backend": "gloo"}
    args = tiny_config(output_dir, ref_reset_steps=2, max_steps=3, per_device_train_batch_size=4, **placement)
    trainer = ResetGRPOTrainer(model=policy_path, reward_funcs=length_reward, args=args, train_dataset=prompts())
    check = CheckAfterReset(trainer)
    trainer.add_callback(check)
    trainer.train()
    check.report["kl"] = [log["kl"] for log in trainer.state.log_history if "kl" in log]
    write_report_and_exit(trainer, output_dir, check.report)


if __name__ == "__main__":
    main(*sys.argv[1:4])
