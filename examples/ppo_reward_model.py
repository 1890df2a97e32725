"""PPO with a reward model and a critic: python examples/ppo_reward_model.py --reward_model path/to/rm."""

import argparse

from _common import device_settings
from datasets import Dataset

from trl_ext import PPOConfig, PPOTrainer

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--model", default="Qwen/Qwen2.5-0.5B-Instruct")
parser.add_argument("--reward_model", required=True, help="a sequence-classification reward model (path or id)")
parser.add_argument("--output_dir", default="ppo-rm")
parser.add_argument("--max_steps", type=int, default=500)
parser.add_argument("--cpu", action="store_true")
args = parser.parse_args()

prompts = Dataset.from_dict({"prompt": ["Write a haiku about the sea.", "Explain gravity to a child."] * 64})
config = PPOConfig(
    output_dir=args.output_dir, max_steps=args.max_steps, per_device_train_batch_size=4, max_completion_length=16
    if args.cpu else 256, value_model_name_or_path=args.reward_model, kl_coef=0.05, **device_settings(args),
)  # fmt: skip
trainer = PPOTrainer(model=args.model, reward_funcs=args.reward_model, args=config, train_dataset=prompts)
trainer.train()
trainer.save_model()  # the policy in output_dir, the critic in output_dir/critic (trl_ext.trainers.ppo.load_value_model)
