"""The papers' directional claims, measured at toy scale with `trl-ext compare`'s machinery (several seeds).

    HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 python scripts/bench_paper_claims.py [--seeds 3] [--steps 80]

Every run starts from the offline demo's warm-started tiny policy (one warm start per seed, shared by all runs of
that seed) and trains on its arithmetic task; each claim compares two variants that differ in one setting only:

1. clip-higher (DAPO §3.1): ε_high 0.28 keeps the policy entropy higher than symmetric clipping ε_high 0.2
   (DAPO recipe, several updates per rollout so that the clip acts); measured: mean entropy over the second half.
2. dynamic sampling (DAPO §3.2): reaches the same accuracy in fewer optimizer steps (DAPO recipe with and without
   dynamic sampling); measured: optimizer steps until the smoothed training accuracy first reaches --threshold.
3. Dr GRPO's constant normaliser (Dr GRPO §3.1): per-sequence normalisation (GRPO's loss_type="grpo") lets wrong
   answers grow longer; the constant normaliser (Dr GRPO) does not; measured: mean length of wrong completions over
   the second half, and its change from the first logged steps.

It prints one line per claim: the two variants' mean ± std over seeds, their ratio, and whether the direction the
paper claims was observed in the mean and in every seed. A claim not reproduced at this scale is a valid result.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

from trl_ext.compare import CompareSettings, curve, smoothed, task_of_seed, train_one  # noqa: E402

WRONG_LENGTH_KEY = "wrong_length_probe/wrong_length"


class WrongLengthProbe:
    """A weight-0 reward that logs the mean token length of the wrong completions of each round (never a signal)."""

    __name__ = "wrong_length_probe"
    trl_ext_shaping = True  # not a task reward: never a dynamic-sampling filter

    def __call__(self, completions, completion_ids, solution, log_metric=None, **kwargs):
        from trl_ext.rewards import math_accuracy

        correct = math_accuracy(completions, solution=solution)
        wrong = [len(ids) for ids, score in zip(completion_ids, correct, strict=True) if score != 1.0]
        if log_metric is not None and wrong:
            log_metric("wrong_length_probe/wrong_length", statistics.fmean(wrong))
        return [0.0] * len(completions)


# claim -> (recipe, {variant: Config overrides}, the variant the paper favours, what is measured)
CLAIMS = {
    "clip_higher_entropy": ("dapo", {"eps_high_0.28": {}, "symmetric_0.2": {"epsilon_high": 0.2}}, "eps_high_0.28"),
    "dynamic_sampling_steps": ("dapo", {"dynamic_sampling": {}, "no_filter": {"dynamic_sampling": False}},
                               "dynamic_sampling"),
    "dr_grpo_wrong_length": ("dr_grpo", {"constant_normaliser": {"reward_weights": [1.0, 0.0]},
                                         "per_sequence": {"reward_weights": [1.0, 0.0], "loss_type": "grpo"}},
                             "constant_normaliser"),
}  # fmt: skip


def second_half_mean(run: dict, key: str) -> float:
    values = [record[key] for record in run["log"] if key in record]
    return statistics.fmean(values[len(values) // 2 :]) if values else float("nan")


def steps_to_threshold(run: dict, threshold: float) -> float:
    samples, accuracy, _ = curve(run)
    steps = [record["step"] for record in run["log"] if "math_accuracy/correct" in record]
    for step, value in zip(steps, smoothed(accuracy), strict=True):
        if value >= threshold:
            return float(step)
    return float("inf")  # not reached within the budget


def measure(claim: str, run: dict, threshold: float) -> float:
    if claim == "clip_higher_entropy":
        return second_half_mean(run, "entropy")
    if claim == "dynamic_sampling_steps":
        return steps_to_threshold(run, threshold)
    return second_half_mean(run, WRONG_LENGTH_KEY)


def summary_line(claim: str, values: dict[str, list[float]], favoured: str) -> str:
    (name_a, a), (name_b, b) = values.items()
    other = name_b if favoured == name_a else name_a
    lower_is_better = claim != "clip_higher_entropy"  # entropy: higher; steps and wrong length: lower

    def better(x: float, y: float) -> bool:
        return x < y if lower_is_better else x > y

    def fmt(xs):
        finite = [x for x in xs if x != float("inf")]
        if not finite:
            return "not reached"
        text = f"{statistics.fmean(finite):.3f} ± {statistics.stdev(finite) if len(finite) > 1 else 0.0:.3f}"
        return text + (f" ({len(xs) - len(finite)} not reached)" if len(finite) < len(xs) else "")

    mean = {name: statistics.fmean(xs) if all(x != float("inf") for x in xs) else float("inf")
            for name, xs in values.items()}  # fmt: skip
    per_seed = all(better(x, y) for x, y in zip(values[favoured], values[other], strict=True))
    ratio = mean[favoured] / mean[other] if mean[other] not in (0.0, float("inf")) else float("nan")
    verdict = "reproduced" if better(mean[favoured], mean[other]) else "NOT reproduced"
    return (f"{claim}: {name_a} {fmt(a)} | {name_b} {fmt(b)} | ratio {favoured}/{other} {ratio:.3f} | {verdict} "
            f"in the mean, {'in every seed' if per_seed else 'not in every seed'}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--threshold", type=float, default=0.5, help="accuracy for the dynamic-sampling claim")
    parser.add_argument("--claims", default=",".join(CLAIMS))
    parser.add_argument("--output_dir", default="bench_paper_claims")
    args = parser.parse_args(argv)
    claims = [name.strip() for name in args.claims.split(",")]
    unknown = [name for name in claims if name not in CLAIMS]
    if unknown or args.seeds < 2 or args.steps < 2:
        parser.error(f"--claims from {', '.join(CLAIMS)} (unknown: {unknown}); --seeds and --steps >= 2")
    root = Path(args.output_dir)
    base = CompareSettings(steps=args.steps, updates_per_rollout=4, max_completion_length=24, show_progress=False)
    values = {claim: {variant: [] for variant in CLAIMS[claim][1]} for claim in claims}
    runs = []  # every run's log, for other measures afterwards
    started = time.perf_counter()
    for seed in range(args.seeds):
        policy, dataset = task_of_seed(base, seed, root)
        for claim in claims:
            recipe, variants, _ = CLAIMS[claim]
            for variant, overrides in variants.items():
                settings = dataclasses.replace(base, output_dir=str(root / claim / variant),
                                               extra_config={recipe: overrides})  # fmt: skip
                probe = (WrongLengthProbe(),) if claim == "dr_grpo_wrong_length" else ()
                run, _ = train_one(recipe, seed, policy, dataset, settings, extra_rewards=probe,
                                   extra_log_keys=(WRONG_LENGTH_KEY,))  # fmt: skip
                values[claim][variant].append(measure(claim, run, args.threshold))
                runs.append({"claim": claim, "variant": variant, **run})
                print(f"seed {seed} {claim} {variant}: {values[claim][variant][-1]:.3f}", flush=True)
    (root / "claims.json").write_text(json.dumps({"values": values, "runs": runs}, indent=1))
    print(f"\n{args.seeds} seeds x {args.steps} steps, {time.perf_counter() - started:.0f} s "
          f"(load {os.getloadavg()[0]:.1f})")  # fmt: skip
    for claim in claims:
        print(summary_line(claim, values[claim], CLAIMS[claim][2]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
