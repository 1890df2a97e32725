"""PPOTrainer options on the tiny model: unscorable completions, KL in the loss or off, PPO epochs over minibatches,
a LoRA policy, evaluation, and the clear error under DeepSpeed ZeRO-3."""

import os
import subprocess
import sys

import pytest
import torch
from peft import LoraConfig

from tests.scripts.ppo_common import even_token_reward, prompts, tiny_ppo_config
from trl_ext.trainers.ppo import PPOTrainer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class RolloutRecorder(PPOTrainer):
    def generate_and_score(self, inputs):
        output = super().generate_and_score(inputs)
        self.__dict__.setdefault("rollouts", []).append(
            {k: v.clone() for k, v in output.items() if torch.is_tensor(v)}
        )
        return output


def train(tmp_path, reward=even_token_reward, trainer_cls=PPOTrainer, trainer_kwargs=None, **overrides):
    args = tiny_ppo_config(tmp_path, **overrides)
    trainer = trainer_cls(
        model=os.environ["PPO_TEST_POLICY"], reward_funcs=reward, args=args, train_dataset=prompts(),
        **(trainer_kwargs or {}),
    )  # fmt: skip
    trainer.train()
    return trainer


@pytest.fixture(autouse=True)
def policy_path(tiny_policy_path, monkeypatch):
    monkeypatch.setenv("PPO_TEST_POLICY", tiny_policy_path)


def test_unscorable_completions_get_no_advantage_and_no_value_target(tmp_path):
    def every_other(completion_ids, **kwargs):
        return [None if i % 2 else 1.0 for i in range(len(completion_ids))]

    trainer = train(tmp_path, reward=every_other, trainer_cls=RolloutRecorder, max_steps=1)
    rollout = trainer.rollouts[0]
    assert rollout["value_mask"][1::2].sum() == 0 and rollout["advantages"][1::2].abs().sum() == 0
    assert torch.equal(rollout["value_mask"][::2], rollout["completion_mask"][::2])
    assert rollout["advantages"][::2].abs().sum() > 0


def test_kl_in_the_loss_instead_of_the_reward(tmp_path):
    trainer = train(tmp_path, kl_coef=0.0, beta=0.1)
    assert trainer.ref_model is not None and trainer.beta == 0.1
    logs = [log for log in trainer.state.log_history if "ppo/kl" in log]
    assert all(log["ppo/kl"] == 0 for log in logs) and logs[-1]["kl"] > 0  # TRL's k3 KL in the loss


def test_no_kl_loads_no_reference_model(tmp_path):
    trainer = train(tmp_path, kl_coef=0.0)
    assert trainer.ref_model is None and trainer.beta == 0.0


def test_ppo_epochs_over_minibatches_clip_the_value(tmp_path):
    trainer = train(
        tmp_path, trainer_cls=RolloutRecorder, max_steps=4, per_device_train_batch_size=2, num_iterations=2,
        steps_per_generation=2, cliprange_value=0.01,
    )  # fmt: skip
    assert len(trainer.rollouts) == 1  # 4 optimizer steps: 2 minibatches × 2 epochs over one rollout
    clipfrac = [log["ppo/value_clipfrac"] for log in trainer.state.log_history if "ppo/value_clipfrac" in log]
    assert clipfrac[0] == 0 and max(clipfrac) > 0  # V_old = V on the first pass, then the clip bites


def test_lora_policy_with_full_critic(tmp_path):
    lora = LoraConfig(r=4, target_modules=["q_proj", "v_proj"])
    trainer = train(tmp_path, trainer_kwargs={"peft_config": lora})
    assert type(trainer.model).__name__ == "PeftModel" and trainer.ref_model is None
    assert [log["ppo/kl"] for log in trainer.state.log_history if "ppo/kl" in log][-1] != 0
    trainer.save_model()
    assert (tmp_path / "adapter_config.json").exists() and (tmp_path / "critic" / "model.safetensors").exists()


def test_evaluation_logs_the_ppo_metrics(tmp_path):
    args = dict(eval_strategy="steps", eval_steps=1, per_device_eval_batch_size=4, max_steps=1)
    trainer = train(tmp_path, trainer_kwargs={"eval_dataset": prompts(4)}, **args)
    evaluation = [log for log in trainer.state.log_history if "eval_loss" in log][0]
    assert "eval_ppo/value_loss" in evaluation and "eval_ppo/explained_variance" in evaluation


def test_deepspeed_zero3_is_refused_with_a_clear_error(tmp_path):
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from tests.scripts.ppo_common import even_token_reward, prompts, tiny_ppo_config\n"
        "from trl_ext.trainers.ppo import PPOTrainer\n"
        "args = tiny_ppo_config(sys.argv[2], use_cpu=False)\n"
        "assert args.deepspeed_plugin is not None\n"
        "PPOTrainer(model=sys.argv[3], reward_funcs=even_token_reward, args=args, train_dataset=prompts())\n"
    )
    env = {
        **os.environ,
        "ACCELERATE_USE_DEEPSPEED": "true",
        "ACCELERATE_DEEPSPEED_ZERO_STAGE": "3",
        "OMP_NUM_THREADS": "1",
    }
    command = [sys.executable, "-c", code, ROOT, str(tmp_path), os.environ["PPO_TEST_POLICY"]]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "NotImplementedError: PPOTrainer trains its critic (a DDP replica on every process)" in result.stderr
    assert "Not supported yet: DeepSpeed ZeRO-3" in result.stderr
