"""Arguments shared by the examples: a real model by default, or `--model path --max_steps 2` for a quick check."""

import argparse


def example_args(default_model: str, description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", default=default_model, help="Hub id or local path of the policy")
    parser.add_argument("--output_dir", default=None)
    parser.add_argument("--max_steps", type=int, default=500)
    parser.add_argument("--cpu", action="store_true", help="run on CPU (bf16 off)")
    return parser.parse_args()


def device_settings(args: argparse.Namespace) -> dict:
    if args.cpu:
        return {"use_cpu": True, "bf16": False, "gradient_checkpointing": False, "report_to": "none"}
    return {"bf16": True}
