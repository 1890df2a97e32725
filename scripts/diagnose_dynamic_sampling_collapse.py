"""Trace DAPO with dynamic sampling and several updates per rollout on the mixed task (see docs/claims.md).

    HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 python scripts/diagnose_dynamic_sampling_collapse.py --seed 0 \
        [--updates_per_rollout 4] [--learning_rate 1e-3] [--steps 120] [--warm_start PATH]

Prints held-out accuracy every 10 optimizer steps and, per rollout, the refill rounds, the filled (uninformative,
advantage-0) groups, the informative fraction of the generated groups, and the kept batch's accuracy, no-answer share
and truncated share: whether a fall of held-out accuracy starts with filled groups (the refill path) or with the
policy losing its format within one rollout's updates (the step size).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

from trl_ext.compare import CompareSettings, task_of_seed, train_one  # noqa: E402
from trl_ext.compare.tasks import TaskSpec, task_dataset  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--updates_per_rollout", type=int, default=4)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--warm_start", default=None, help="a warm-started policy (default: seed 0's, trained here)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        settings = CompareSettings(
            steps=args.steps, updates_per_rollout=args.updates_per_rollout, learning_rate=args.learning_rate,
            task=TaskSpec(name="mixed"), output_dir=root, show_progress=False, shared_warm_start=True, eval_every=10,
        )  # fmt: skip
        policy = args.warm_start or task_of_seed(settings, 0, Path(root))[0]
        run, trainer = train_one("dapo", args.seed, policy, task_dataset(settings.task), settings)
    print("held-out accuracy every 10 steps:", " ".join(f"{r['heldout_accuracy']:.2f}" for r in run["heldout"]))
    print("step rounds filled informative accuracy no_answer truncated")
    for log in trainer.state.log_history:
        if "dynamic_sampling/rounds" in log:
            print(f"{log['step']:4d} {log['dynamic_sampling/rounds']:6.0f} {log['dynamic_sampling/filled_uninformative']:6.0f}"
                  f" {log['dynamic_sampling/informative_fraction']:11.2f} {log.get('math_accuracy/correct', 0):8.2f}"
                  f" {log.get('math_accuracy/no_answer', 0):9.2f} {log['completions/clipped_ratio']:9.2f}")  # fmt: skip
    print(f"{run['samples']} samples generated, {run['wall_seconds']:.0f} s")


if __name__ == "__main__":
    main()
