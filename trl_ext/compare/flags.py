"""The flags of `trl-ext compare` and the run they start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trl_ext.compare.run import run_compare
from trl_ext.compare.settings import (
    COMPARE_RECIPES,
    DEFAULT_RECIPES,
    PLOT_FILE,
    POLICY_CRITIC,
    TABLE_FILE,
    CompareError,
    CompareSettings,
    parse_recipes,
    validate,
)
from trl_ext.compare.tasks import TASKS, TaskSpec


def add_compare_arguments(parser: Any) -> None:
    """The flags of `trl-ext compare` on an argparse (sub)parser."""
    defaults = CompareSettings()
    parser.add_argument(
        "--recipes", default=",".join(DEFAULT_RECIPES), help="comma-separated: " + ",".join(COMPARE_RECIPES)
    )
    parser.add_argument("--seeds", type=int, default=defaults.seeds, help="seeds per recipe (0, 1, ...)")
    parser.add_argument("--steps", type=int, default=defaults.steps, help="optimizer steps per run")
    parser.add_argument("--output_dir", default=defaults.output_dir)
    parser.add_argument("--model_name_or_path", default=None, help="a real policy (with --dataset_name)")
    parser.add_argument("--dataset_name", default=None, help="prompt/solution data (with --model_name_or_path)")
    parser.add_argument("--value_model_name_or_path", default=None,
                        help=f"PPO's critic: a path, or '{POLICY_CRITIC}' to start it from the policy")  # fmt: skip
    parser.add_argument("--threshold", type=float, default=defaults.threshold, help="accuracy to reach")
    parser.add_argument("--updates_per_rollout", type=int, default=defaults.updates_per_rollout)
    parser.add_argument("--learning_rate", type=float, default=defaults.learning_rate)
    parser.add_argument("--max_completion_length", type=int, default=defaults.max_completion_length)
    parser.add_argument("--warmup_steps", type=int, default=defaults.warmup_steps, help="SFT warm-up (demo task)")
    parser.add_argument("--cards_dir", default=None, help="write seed 0's model card of each recipe here")
    task = defaults.task
    parser.add_argument(
        "--task",
        default=task.name,
        choices=TASKS,
        help="built-in task: demo (single-digit sums) or mixed (with too-easy/too-hard prompts)",
    )
    parser.add_argument("--easy_share", type=float, default=task.easy_share, help="mixed: always-rewarded prompts")
    parser.add_argument("--hard_share", type=float, default=task.hard_share, help="mixed: never-rewarded prompts")
    parser.add_argument("--shared_warm_start", action="store_true", help="every seed starts from seed 0's warm start")
    parser.add_argument(
        "--eval_every",
        type=int,
        default=defaults.eval_every,
        help="held-out accuracy every N optimizer steps (built-in tasks; 0: only at the end)",
    )


def compare_from_args(args: Any) -> dict[str, Any]:
    """Run `trl-ext compare` from parsed flags; bad input raises SystemExit naming the flag, before any training."""
    try:
        settings = CompareSettings(
            recipes=parse_recipes(args.recipes), seeds=args.seeds, steps=args.steps, output_dir=args.output_dir,
            model_name_or_path=args.model_name_or_path, dataset_name=args.dataset_name,
            value_model_name_or_path=args.value_model_name_or_path, threshold=args.threshold,
            updates_per_rollout=args.updates_per_rollout, learning_rate=args.learning_rate,
            max_completion_length=args.max_completion_length, warmup_steps=args.warmup_steps,
            cards_dir=args.cards_dir, shared_warm_start=args.shared_warm_start, eval_every=args.eval_every,
            task=TaskSpec(name=args.task, easy_share=args.easy_share, hard_share=args.hard_share),
        )  # fmt: skip
        validate(settings)
    except CompareError as error:
        raise SystemExit(f"trl-ext compare: {error}") from None
    results = run_compare(settings)
    print(f"[trl-ext compare] {Path(settings.output_dir, TABLE_FILE)} and {Path(settings.output_dir, PLOT_FILE)}")
    return results
