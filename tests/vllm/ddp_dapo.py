"""DAPO with dynamic sampling in two processes, each with its colocated vLLM engine; run by test_ddp.py:

    torchrun --nproc_per_node 2 tests/vllm/ddp_dapo.py MODEL_PATH OUTPUT_DIR

Each rank writes report-<rank>.json: what its engine spy saw and the result of each check.
"""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _check(report: dict, name: str, check) -> None:
    try:
        check()
        report["checks"][name] = "ok"
    except AssertionError as error:
        report["checks"][name] = str(error)[:2000]


def main(model_path: str, output_dir: str) -> None:
    sys.path.insert(0, ROOT)
    import torch

    torch.set_num_threads(1)
    import trl_ext
    from tests._launch import write_report_and_exit
    from tests.scripts.grpo_family import scores_dataset, scripted_reward, tiny_args
    from tests.vllm._engine import EngineWatch, shared_engines

    steps = 3
    with shared_engines():
        args = tiny_args(
            trl_ext.DAPOConfig, output_dir, per_device_train_batch_size=4, max_steps=steps, learning_rate=1e-2,
            use_vllm=True, vllm_mode="colocate", soft_overlong_punishment=False, mask_truncated_completions=False,
        )  # fmt: skip
        trainer = trl_ext.DAPOTrainer(
            model=model_path, reward_funcs=scripted_reward, args=args, train_dataset=scores_dataset(16, 2)
        )
        watch = EngineWatch(trainer)
        trainer.train()
    report = {"summary": watch.summary(), "checks": {}, "num_processes": trainer.accelerator.num_processes}
    report["rounds"] = [
        log["dynamic_sampling/rounds"] for log in trainer.state.log_history if "dynamic_sampling/rounds" in log
    ]
    _check(report, "trained_on_engine_completions", watch.assert_trained_on_engine_completions)
    _check(report, "weights_equal", lambda: watch.assert_weights_equal_at_every_generation(steps))
    _check(report, "one_push_per_step", lambda: watch.assert_one_push_per_step(steps))
    write_report_and_exit(trainer, output_dir, report)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
