"""Code RL with sandboxed unit tests (bubblewrap): python examples/code_rl_sandbox.py [--model ...]."""

import json

from _common import device_settings, example_args
from datasets import Dataset

from trl_ext import GRPOConfig, GRPOTrainer
from trl_ext.rewards import code_block_format, code_tests

args = example_args("Qwen/Qwen2.5-Coder-1.5B-Instruct", __doc__)
problems = [
    ("Write a Python function add(a, b) that returns a + b.",
     {"kind": "call", "fn_name": "add", "cases": [{"args": [1, 2], "expected": 3}, {"args": [-1, 1], "expected": 0}]}),
    ("Read two integers from stdin, one per line, and print their product.",
     {"kind": "stdio", "cases": [{"input": "3\n4\n", "output": "12"}, {"input": "0\n9\n", "output": "0"}]}),
]  # fmt: skip
dataset = Dataset.from_list(
    [{"prompt": [{"role": "user", "content": p}], "tests": json.dumps(t)} for p, t in problems] * 16
)
config = GRPOConfig(
    output_dir=args.output_dir or "code-rl", max_steps=args.max_steps, num_generations=4,
    per_device_train_batch_size=4, max_completion_length=16 if args.cpu else 1024, reward_weights=[1.0, 0.1],
    **device_settings(args),
)  # fmt: skip
trainer = GRPOTrainer(model=args.model, reward_funcs=[code_tests, code_block_format], args=config,
                      train_dataset=dataset)  # fmt: skip
trainer.train()
