"""The classic RLHF pipeline on tiny offline models: TRL's RewardTrainer on preference pairs → save → PPO with that
reward model as reward function (and as the critic's initialisation, as in InstructGPT) → save → reload both."""

import torch
import trl
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

from tests.scripts.ppo_common import prompts, tiny_ppo_config
from trl_ext.trainers.ppo import PPOTrainer


def preference_pairs(n=16):
    return Dataset.from_dict(
        {
            "prompt": [f"What is {i} + {i}?" for i in range(n)],
            "chosen": [f" The answer is \\boxed{{{2 * i}}}." for i in range(n)],
            "rejected": [" the lazy dog jumps over" for _ in range(n)],
        }
    )


def test_reward_model_then_ppo_then_reload(tmp_path, tiny_policy_path, tiny_reward_model_path):
    reward_args = trl.RewardConfig(
        output_dir=str(tmp_path / "rm"), per_device_train_batch_size=8, learning_rate=1e-3, num_train_epochs=1,
        use_cpu=True, bf16=False, gradient_checkpointing=False, report_to=[], save_strategy="no", seed=0,
    )  # fmt: skip
    reward_trainer = trl.RewardTrainer(
        model=tiny_reward_model_path, args=reward_args, train_dataset=preference_pairs()
    )
    reward_trainer.train()
    reward_dir = tmp_path / "rm" / "final"
    reward_trainer.save_model(str(reward_dir))

    args = tiny_ppo_config(tmp_path / "ppo", max_steps=2)
    trainer = PPOTrainer(
        model=tiny_policy_path, reward_funcs=str(reward_dir), value_model=str(reward_dir), args=args,
        train_dataset=prompts(),
    )  # fmt: skip
    reward_model = AutoModelForSequenceClassification.from_pretrained(reward_dir)
    assert torch.equal(trainer.value_model.score.weight, reward_model.score.weight)  # critic starts from the RM
    trainer.train()
    rewards = [log[f"rewards/{reward_dir.name}/mean"] for log in trainer.state.log_history if "ppo/kl" in log]
    assert len(rewards) == 2 and all(r == r for r in rewards)  # the RM scored every rollout
    trainer.save_model()

    policy = AutoModelForCausalLM.from_pretrained(tmp_path / "ppo")
    critic = AutoModelForSequenceClassification.from_pretrained(tmp_path / "ppo" / "critic")
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "ppo" / "critic")
    for reloaded, live in ((policy, trainer.model), (critic, trainer.value_model)):
        for key, value in live.state_dict().items():
            assert torch.equal(reloaded.state_dict()[key], value), key
    assert not torch.equal(critic.score.weight, reward_model.score.weight)  # the critic was trained
    encoded = tokenizer(["What is 1 + 1?"], return_tensors="pt")
    generated = policy.generate(**encoded, max_new_tokens=4, do_sample=False)
    assert critic(generated).logits.shape == (1, 1)
