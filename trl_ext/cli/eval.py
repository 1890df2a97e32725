"""`trl-ext eval`: sample k completions per prompt, report mean reward and pass@k, add them to the model card."""

from __future__ import annotations

import argparse
import os

from trl_ext.cli.train import resolve_reward
from trl_ext.data.loading import load_any_dataset


def run(args: argparse.Namespace) -> None:
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
