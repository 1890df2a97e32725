"""PPO learns: on a simple learnable reward (the fraction of even token ids in the completion), 40 steps on the tiny
model raise the mean reward well above the random policy's ~0.5."""

from tests.scripts.ppo_common import even_token_reward, prompts, tiny_ppo_config
from trl_ext.trainers.ppo import PPOTrainer


def test_ppo_raises_the_mean_reward(tmp_path, tiny_policy_path):
    args = tiny_ppo_config(
        tmp_path, max_steps=40, per_device_train_batch_size=8, learning_rate=1e-2, lr_scheduler_type="constant"
    )
    trainer = PPOTrainer(model=tiny_policy_path, reward_funcs=even_token_reward, args=args, train_dataset=prompts(64))
    trainer.train()
    rewards = [log["reward"] for log in trainer.state.log_history if "reward" in log]
    first, last = sum(rewards[:5]) / 5, sum(rewards[-5:]) / 5
    assert last > first + 0.15, rewards
    assert last > 0.7, rewards
