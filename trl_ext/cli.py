"""`trl-ext` console script."""

from __future__ import annotations

import argparse
import os
import sys


def smoke(output_dir: str, steps: int) -> None:
    """Train the tiny offline policy for a few GRPO steps: proves the install works end to end, offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from trl_ext.tiny import save_tiny_models

    paths = save_tiny_models(os.path.join(output_dir, "base"))
    dataset = Dataset.from_dict({"prompt": [f"What is {i} + {i}?" for i in range(8)]})

    def shorter_is_better(completions, **kwargs):
        return [-len(c) / 16 for c in completions]

    args = GRPOConfig(
        output_dir=output_dir,
        max_steps=steps,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=8,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        report_to="none",
        logging_steps=1,
        save_strategy="no",
    )
    trainer = GRPOTrainer(model=str(paths["policy"]), reward_funcs=shorter_is_better, args=args, train_dataset=dataset)
    trainer.train()
    rewards = [log["reward"] for log in trainer.state.log_history if "reward" in log]
    print(f"smoke run OK: {len(rewards)} steps, reward {rewards[0]:.3f} -> {rewards[-1]:.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="trl-ext", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    smoke_parser = sub.add_parser("smoke", help="a few offline GRPO steps on a tiny random model")
    smoke_parser.add_argument("--output_dir", default="trl_ext_smoke")
    smoke_parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args(argv)
    if args.command == "smoke":
        smoke(args.output_dir, args.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
