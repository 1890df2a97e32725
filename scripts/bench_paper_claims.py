"""The papers' directional claims, measured at toy scale on held-out prompts over several seeds.

    HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 python scripts/bench_paper_claims.py [--seeds 5] [--workers 2]

Each claim compares two variants of one recipe that differ in one setting, in a setting chosen so that the mechanism
the claim needs is present, with `trl-ext compare`'s machinery and its mixed task (``trl_ext.compare.tasks``: learnable
``a+b`` prompts, a third of the problems held out, plus a set share of always-rewarded and never-rewarded prompts).
Every run of a seed starts from the same warm-started tiny policy (seed 0's, or one per seed with
``--per_seed_warm_start``); held-out accuracy is sampled at a fixed evaluation seed, before and after training.

1. dynamic sampling (DAPO §3.2) improves what is learnt per optimizer step when many groups carry no signal:
   80% too-easy/too-hard prompts, one update per rollout, lr 1e-3, 120 steps; measured: held-out accuracy gain.
2. its control: the same with no too-easy/too-hard prompts (the mechanism removed); no separation expected.
3. clip-higher (DAPO §3.1): ε_high 0.28 keeps the policy entropy higher than symmetric 0.2; the clip must bind, so
   4 updates per rollout; measured: mean entropy over the second half of training.
4. Dr GRPO's constant normaliser (§3.1): per-sequence normalisation lets wrong answers grow longer; completions up to
   24 tokens; measured: mean length of wrong completions over the second half (a weight-0 probe reward logs it).

The separation rule is ``trl_ext.compare.separation.RULE``. The script prints per-seed numbers and verdicts and
writes ``<output_dir>/claims.md`` (the README's claims table) and ``claims.json`` (every run's log).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from trl_ext.compare import CompareSettings, task_of_seed, train_one  # noqa: E402
from trl_ext.compare.separation import RULE, separate  # noqa: E402
from trl_ext.compare.tasks import TaskSpec, heldout_accuracy, task_dataset  # noqa: E402

WRONG_LENGTH_KEY = "wrong_length_probe/wrong_length"
MIXED = TaskSpec(name="mixed", easy_share=0.4, hard_share=0.4)
LEARNABLE_ONLY = TaskSpec(name="mixed", easy_share=0.0, hard_share=0.0)


@dataclasses.dataclass(frozen=True)
class Claim:
    paper: str  # the claim, as the paper states it
    mechanism: str  # what must be present in the setting for the claim to show
    setting: str
    measure: str  # "gain", "entropy" or "wrong_length"
    higher_is_better: bool
    recipe: str
    variants: dict  # variant -> Config overrides; the first is the favoured one
    task: TaskSpec
    compare: dict  # CompareSettings overrides
    expected: str = "separates"


CLAIMS = {
    "dynamic_sampling": Claim(
        "dynamic sampling (drop groups whose rewards are all equal, refill) trains better per step (DAPO §3.2)",
        "many groups with zero reward variance: without the filter most steps carry little or no signal",
        "DAPO, 80% too-easy/too-hard prompts, 1 update per rollout, lr 1e-3, 120 steps",
        "gain", True, "dapo", {"dynamic_sampling": {}, "no_filter": {"dynamic_sampling": False}}, MIXED,
        {"steps": 120, "updates_per_rollout": 1},
    ),
    "dynamic_sampling_control": Claim(
        "control of the above: the uninformative prompts removed",
        "absent: only learnable prompts",
        "DAPO, 0% too-easy/too-hard prompts, 1 update per rollout, lr 1e-3, 120 steps",
        "gain", True, "dapo", {"dynamic_sampling": {}, "no_filter": {"dynamic_sampling": False}}, LEARNABLE_ONLY,
        {"steps": 120, "updates_per_rollout": 1}, expected="does not separate",
    ),
    "clip_higher_entropy": Claim(
        "clip-higher ε_high 0.28 keeps the entropy higher than symmetric ε 0.2 (DAPO §3.1)",
        "the up-clip must bind: samples reused over several updates",
        "DAPO, learnable prompts only, 4 updates per rollout, lr 1e-3, 60 steps",
        "entropy", True, "dapo", {"eps_high_0.28": {}, "symmetric_0.2": {"epsilon_high": 0.2}}, LEARNABLE_ONLY,
        {"steps": 60, "updates_per_rollout": 4},
    ),
    "dr_grpo_wrong_length": Claim(
        "the constant normaliser stops wrong answers growing longer, as per-sequence normalisation lets them (Dr GRPO §3.1)",
        "room to grow: completions up to 24 tokens, several updates per rollout",
        "Dr GRPO vs its loss_type='grpo', learnable prompts only, 4 updates per rollout, lr 1e-3, 60 steps",
        "wrong_length", False, "dr_grpo",
        {"constant_normaliser": {"reward_weights": [1.0, 0.0]},
         "per_sequence": {"reward_weights": [1.0, 0.0], "loss_type": "grpo"}},
        LEARNABLE_ONLY, {"steps": 60, "updates_per_rollout": 4, "max_completion_length": 24},
    ),
}  # fmt: skip


class WrongLengthProbe:
    """A weight-0 reward that logs the mean token length of the wrong completions of each round (never a signal)."""

    __name__ = "wrong_length_probe"
    trl_ext_shaping = True  # not a task reward: never a dynamic-sampling filter

    def __call__(self, completions, completion_ids, solution, log_metric=None, **kwargs):
        from trl_ext.rewards import math_accuracy

        correct = math_accuracy(completions, solution=solution)
        wrong = [len(ids) for ids, score in zip(completion_ids, correct, strict=True) if score != 1.0]
        if log_metric is not None and wrong:
            log_metric(WRONG_LENGTH_KEY, statistics.fmean(wrong))
        return [0.0] * len(completions)


def second_half_mean(run: dict, key: str) -> float:
    values = [record[key] for record in run["log"] if key in record]
    return statistics.fmean(values[len(values) // 2 :]) if values else float("nan")


def settings_of(claim: Claim, variant: str, root: Path, per_seed_warm_start: bool) -> CompareSettings:
    return CompareSettings(
        output_dir=str(root / "runs"), show_progress=False, task=claim.task, shared_warm_start=not per_seed_warm_start,
        extra_config={claim.recipe: claim.variants[variant]}, **claim.compare,
    )  # fmt: skip


def run_job(
    name: str, variant: str, seed: int, policy: str, start: float, root: str, per_seed: bool, steps: int | None
) -> dict:
    """One (claim, variant, seed) run, in a worker process: its record with the measures."""
    import torch

    torch.set_num_threads(1)
    claim = CLAIMS[name]
    if steps is not None:  # a smoke run
        claim = dataclasses.replace(claim, compare={**claim.compare, "steps": steps})
    settings = settings_of(claim, variant, Path(root) / name / variant, per_seed)
    dataset = task_dataset(claim.task)
    probe = (WrongLengthProbe(),) if claim.measure == "wrong_length" else ()
    run, _ = train_one(claim.recipe, seed, policy, dataset, settings, extra_rewards=probe,
                       extra_log_keys=(WRONG_LENGTH_KEY,))  # fmt: skip
    gain = run["final_accuracy"] - start
    value = {"gain": gain, "entropy": second_half_mean(run, "entropy"),
             "wrong_length": second_half_mean(run, WRONG_LENGTH_KEY)}[claim.measure]  # fmt: skip
    return {"claim": name, "variant": variant, "value": value, "gain": gain, "start_accuracy": start, **run}


def warm_starts(seeds: int, root: Path, per_seed: bool, warmup_steps: int) -> dict[int, tuple[str, float]]:
    """seed -> (warm-start path, its held-out accuracy at the evaluation seed); one warm start, or one per seed."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = CompareSettings(task=MIXED, shared_warm_start=not per_seed, warmup_steps=warmup_steps)
    starts: dict[int, tuple[str, float]] = {}
    for seed in range(seeds):
        if not per_seed and seed > 0:
            starts[seed] = starts[0]
            continue
        policy = task_of_seed(base, seed, root)[0]
        model, tokenizer = AutoModelForCausalLM.from_pretrained(policy), AutoTokenizer.from_pretrained(policy)
        starts[seed] = (policy, heldout_accuracy(model, tokenizer, MIXED))  # every claim's task holds out the same
    return starts


def _cell(values: list[float], digits: int) -> str:
    return f"{statistics.fmean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def claim_rows(name: str, values: dict[str, list[float]], digits: int = 3) -> tuple[str, str]:
    """(the printed line, the Markdown row) of one claim."""
    claim = CLAIMS[name]
    (fav, a), (other, b) = values.items()
    result = separate(a, b, claim.higher_is_better)
    seeds = ", ".join(f"{x:+.{digits}f}" if claim.measure == "gain" else f"{x:.{digits}f}" for x in a)
    seeds_b = ", ".join(f"{x:+.{digits}f}" if claim.measure == "gain" else f"{x:.{digits}f}" for x in b)
    better = "higher" if claim.higher_is_better else "lower"
    line = (
        f"{name}: {fav} {_cell(a, digits)} [{seeds}] | {other} {_cell(b, digits)} [{seeds_b}] | {fav} {better} "
        f"in {result.wins} of {result.seeds} seeds | {result.verdict} (expected: {claim.expected})"
    )
    measure = {
        "gain": "held-out accuracy gain",
        "entropy": "entropy, second half",
        "wrong_length": "wrong-answer length (tokens), second half",
    }[claim.measure]
    row = (
        f"| {claim.paper} | {claim.mechanism} | {claim.setting} | {measure} ({better} is better) | {fav}: "
        f"{_cell(a, digits)} ({seeds}) | {other}: {_cell(b, digits)} ({seeds_b}) | {result.wins} of "
        f"{result.seeds} | **{result.verdict}** (expected: {claim.expected}) |"
    )
    return line, row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--claims", default=",".join(CLAIMS))
    parser.add_argument("--workers", type=int, default=2, help="runs trained at once (one CPU thread each)")
    parser.add_argument("--warmup_steps", type=int, default=140)
    parser.add_argument("--per_seed_warm_start", action="store_true", help="one warm start per seed")
    parser.add_argument("--steps", type=int, default=None, help="override every claim's steps (smoke runs only)")
    parser.add_argument("--output_dir", default="bench_paper_claims")
    args = parser.parse_args(argv)
    claims = [name.strip() for name in args.claims.split(",")]
    unknown = [name for name in claims if name not in CLAIMS]
    if unknown or args.seeds < 2 or args.workers < 1:
        parser.error(f"--claims from {', '.join(CLAIMS)} (unknown: {unknown}); --seeds >= 2; --workers >= 1")
    root = Path(args.output_dir)
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    starts = warm_starts(args.seeds, root, args.per_seed_warm_start, args.warmup_steps)
    jobs = [(name, variant, seed, *starts[seed], str(root), args.per_seed_warm_start, args.steps)
            for name in claims for seed in range(args.seeds) for variant in CLAIMS[name].variants]  # fmt: skip
    runs = []
    with ProcessPoolExecutor(args.workers, mp_context=get_context("spawn")) as pool:
        for run in pool.map(run_job, *zip(*jobs, strict=True)):
            runs.append(run)
            print(f"seed {run['seed']} {run['claim']} {run['variant']}: {run['value']:.3f} (held-out gain "
                  f"{run['gain']:+.3f}, {run['samples']} samples, {run['wall_seconds']:.0f} s)", flush=True)  # fmt: skip
    elapsed = time.perf_counter() - started
    cpu = sum(
        r.ru_utime + r.ru_stime for r in map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    )
    values = {name: {variant: [r["value"] for r in runs if r["claim"] == name and r["variant"] == variant]
                     for variant in CLAIMS[name].variants} for name in claims}  # fmt: skip
    (root / "claims.json").write_text(json.dumps({"values": values, "runs": runs}, indent=1))
    command = "python scripts/bench_paper_claims.py " + " ".join(sys.argv[1:] if argv is None else argv)
    header = (
        f"{args.seeds} seeds per variant, {len(runs)} runs, {elapsed:.0f} s with {args.workers} workers "
        f"(load average {os.getloadavg()[0]:.1f}; {cpu:.0f} CPU seconds, {cpu / 120:.1f} min on 2 free cores); "
        f"`{command.strip()}`. Rule: {RULE}."
    )
    print("\n" + header)
    lines, rows = zip(*(claim_rows(name, values[name]) for name in claims), strict=True)
    print("\n".join(lines))
    table = [
        "| claim (paper) | mechanism it needs | setting | measure | favoured variant: mean ± std (per seed) "
        "| other variant | favoured better in | verdict |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
    ]
    (root / "claims.md").write_text(header + "\n\n" + "\n".join(table) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
