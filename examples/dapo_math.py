"""Train DAPO on verifiable math: python examples/dapo_math.py [--model Qwen/Qwen2.5-1.5B-Instruct]."""

from _common import device_settings, example_args
from datasets import load_dataset

from trl_ext import DAPOConfig, DAPOTrainer
from trl_ext.data.demo import arithmetic_prompts
from trl_ext.trainers.dapo import dapo_math_accuracy  # the paper's reward: +1 correct, -1 otherwise

args = example_args("Qwen/Qwen2.5-1.5B-Instruct", __doc__)
# prompt + solution columns; on a tiny local model use the built-in arithmetic task instead of a download
dataset = arithmetic_prompts(repeats=8) if args.cpu else load_dataset("trl-lib/DeepMath-103K", split="train")
config = DAPOConfig(
    output_dir=args.output_dir or "dapo-math", max_steps=args.max_steps, num_generations=8,
    per_device_train_batch_size=8, max_completion_length=16 if args.cpu else 4096, **device_settings(args),
)  # fmt: skip
trainer = DAPOTrainer(model=args.model, reward_funcs=dapo_math_accuracy, args=config, train_dataset=dataset)
trainer.train()
trainer.save_model()
