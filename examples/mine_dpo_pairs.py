"""Mine preference pairs with a verifiable reward, then DPO with reference resets (iterative DPO)."""

from _common import device_settings, example_args

from trl_ext import DPOConfig, DPOTrainer
from trl_ext.data import build_preference_pairs
from trl_ext.data.demo import arithmetic_prompts
from trl_ext.rewards import math_accuracy

args = example_args("Qwen/Qwen2.5-1.5B-Instruct", __doc__)
prompts = arithmetic_prompts()  # prompt + solution; use your own math prompts with a `solution` column
pairs = build_preference_pairs(
    args.model, prompts, math_accuracy, num_samples=8, strategy="best_vs_worst", max_new_tokens=16 if args.cpu else 512
)
print(f"{len(pairs)} pairs mined from {len(prompts)} prompts")
if len(pairs):
    config = DPOConfig(
        output_dir=args.output_dir or "dpo-mined", max_steps=args.max_steps, per_device_train_batch_size=2,
        ref_reset_steps=max(1, args.max_steps // 2), **device_settings(args),
    )  # fmt: skip
    DPOTrainer(model=args.model, args=config, train_dataset=pairs).train()
