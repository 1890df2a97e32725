"""PPOTrainer on the tiny offline models: the rollout and the value loss of real steps against trl_ext.core, the
critic's training, saving and reloading, exact resume, configuration errors and the TRL hooks it relies on."""

import copy
import dataclasses
import types

import pytest
import torch
import trl
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

from tests.scripts.ppo_common import even_token_reward, prompts, tiny_ppo_config
from trl_ext.core.advantages import gae, whiten
from trl_ext.core.kl import kl_estimate
from trl_ext.core.losses import aggregate, clipped_surrogate, clipped_value_loss
from trl_ext.core.ppo import token_rewards
from trl_ext.tiny import build_tiny_reward_model, build_tiny_tokenizer
from trl_ext.trainers._trl_hooks import check_trl_hooks
from trl_ext.trainers.ppo import (
    PPO_TRL_HOOKS,
    PPOConfig,
    PPOTrainer,
    TokenValueModel,
    _check_supported_setup,
    load_value_model,
)


class RecordingPPOTrainer(PPOTrainer):
    """Records every rollout batch and, per micro-batch, the pieces of the loss computed independently."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.rollouts, self.loss_checks = [], []

    def generate_and_score(self, inputs):
        output = super().generate_and_score(inputs)
        self.rollouts.append({k: v.detach().clone() for k, v in output.items() if torch.is_tensor(v) and v.dim()})
        return output

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
        attention = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        with torch.no_grad():
            values = self.critic(ids, attention)[:, -inputs["completion_ids"].shape[1] - 1 : -1]
            policy_loss = trl.GRPOTrainer.compute_loss(self, model, inputs, return_outputs, num_items_in_batch)
        expected = clipped_value_loss(
            values, inputs["values"], inputs["returns"], inputs["value_mask"], self.args.cliprange_value
        )
        total = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        logged = self._metrics["train"]["ppo/value_loss"][-1]
        self.loss_checks.append((total.item(), policy_loss.item(), expected.item(), logged))
        return total


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_policy_path):
    """Two steps of 4 completions each, 2 micro-batches of 2 (gradient accumulation 2)."""
    output_dir = tmp_path_factory.mktemp("ppo-trained")
    args = tiny_ppo_config(output_dir, per_device_train_batch_size=2, gradient_accumulation_steps=2)
    trainer = RecordingPPOTrainer(
        model=tiny_policy_path, reward_funcs=even_token_reward, args=args, train_dataset=prompts()
    )
    before = {
        "policy": copy.deepcopy(trainer.model.state_dict()),
        "critic": copy.deepcopy(trainer.value_model.state_dict()),
        "critic_model": copy.deepcopy(trainer.value_model),
    }
    trainer.train()
    return trainer, before, output_dir


def test_config_defaults_are_the_papers():
    args = PPOConfig(output_dir="unused", use_cpu=True)
    assert (args.num_generations, args.beta, args.loss_type, args.epsilon) == (1, 0.0, "dapo", 0.2)
    assert (args.kl_coef, args.kl_estimator, args.gamma, args.lam, args.cliprange_value) == (
        0.02,
        "k1",
        1.0,
        0.95,
        0.2,
    )
    own = [f for f in dataclasses.fields(PPOConfig) if f.name in PPOConfig.__annotations__]
    assert len(own) >= 14
    assert all(f.metadata.get("help") for f in own), [f.name for f in own if not f.metadata.get("help")]
    assert PPOConfig(output_dir="unused", use_cpu=True, num_generations=2).num_generations == 2
    (parsed,) = trl.TrlParser((PPOConfig,)).parse_args_into_dataclasses(
        ["--output_dir", "unused", "--use_cpu", "--kl_target", "6", "--lam", "0.9"]
    )
    assert (parsed.kl_target, parsed.lam, parsed.num_generations) == (6.0, 0.9, 1)


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"gamma": 1.5}, "gamma"),
        ({"lam": -0.1}, "lam"),
        ({"cliprange_value": 0.0}, "cliprange_value"),
        ({"kl_coef": -1.0}, "kl_coef"),
        ({"kl_estimator": "k4"}, "kl_estimator"),
        ({"advantage_estimator": "rloo"}, "advantage_estimator"),
        ({"per_device_train_batch_size": 1}, "num_generations=1"),
    ],
)
def test_config_errors_name_the_field(overrides, match):
    with pytest.raises(ValueError, match=match):
        PPOConfig(output_dir="unused", use_cpu=True, **overrides)


def test_unsupported_setups_raise_a_clear_error():
    base = dict(deepspeed_plugin=None, fsdp=None, fp16=False)
    _check_supported_setup(types.SimpleNamespace(**base))
    _check_supported_setup(types.SimpleNamespace(**{**base, "deepspeed_plugin": types.SimpleNamespace(zero_stage=2)}))
    zero3 = types.SimpleNamespace(zero_stage=3)
    for key, value in (("deepspeed_plugin", zero3), ("fsdp", "full_shard"), ("fp16", True)):
        with pytest.raises(NotImplementedError, match="Supported: a single process, DDP"):
            _check_supported_setup(types.SimpleNamespace(**{**base, key: value}))


def test_trl_hooks_the_trainer_relies_on_are_unchanged():
    assert check_trl_hooks(PPOTrainer, PPO_TRL_HOOKS) == []
    assert check_trl_hooks(trl.GRPOTrainer, PPO_TRL_HOOKS) == []
    card = PPOTrainer.recipe_card
    assert card.name == "PPO" and card.paper["id"] == "1707.06347" and "ppo" in card.tags


def recompute_rollout(rollout, kl_coef=0.02):
    mask = rollout["value_mask"]
    ids = [row[m.bool()].tolist() for row, m in zip(rollout["completion_ids"], rollout["completion_mask"])]
    scores = torch.tensor(even_token_reward(ids))
    kl = kl_estimate(rollout["old_per_token_logps"], rollout["ref_per_token_logps"], "k1") * mask
    advantages, returns = gae(token_rewards(scores, kl, mask, kl_coef), rollout["values"], mask, 1.0, 0.95)
    return whiten(advantages, mask), returns, kl


def test_rollout_advantages_and_returns_equal_core(trained):
    trainer, before, _ = trained
    assert len(trainer.rollouts) == 2
    for rollout in trainer.rollouts:
        assert rollout["advantages"].shape == rollout["completion_ids"].shape  # (B, T) advantages fed to TRL
        advantages, returns, _ = recompute_rollout(rollout)
        torch.testing.assert_close(rollout["advantages"], advantages, atol=1e-6, rtol=0)
        torch.testing.assert_close(rollout["returns"], returns, atol=1e-6, rtol=0)
    first, second = trainer.rollouts
    assert recompute_rollout(first)[2].abs().max() == 0  # before any update the policy is the reference
    assert recompute_rollout(second)[2].abs().max() > 0
    # V_old of the first rollout is the initial critic's value of the prefix before each completion token.
    ids = torch.cat([first["prompt_ids"], first["completion_ids"]], dim=1)
    attention = torch.cat([first["prompt_mask"], first["completion_mask"]], dim=1)
    with torch.no_grad():
        values = TokenValueModel(before["critic_model"])(ids, attention)[:, -first["completion_ids"].shape[1] - 1 : -1]
    torch.testing.assert_close(first["values"], values, atol=1e-6, rtol=0)


def test_value_loss_in_real_steps_equals_core_and_is_scaled_for_accumulation(trained):
    trainer, _, _ = trained
    assert len(trainer.loss_checks) == 4  # 2 steps × 2 micro-batches
    for total, policy, value_loss, logged in trainer.loss_checks:
        assert logged == pytest.approx(value_loss, abs=1e-6)
        assert total == pytest.approx(policy + trainer.args.vf_coef * value_loss / 2, abs=1e-6)
    logged = trainer.state.log_history[0]
    for key in ("value_loss", "value_clipfrac", "explained_variance", "kl", "kl_coef", "returns_mean"):
        assert f"ppo/{key}" in logged
    assert logged["ppo/kl_coef"] == 0.02


def test_critic_and_policy_parameters_change_and_reload(trained):
    trainer, before, output_dir = trained
    changed = lambda old, new: any(not torch.equal(old[k], new[k]) for k in old)  # noqa: E731
    assert changed(before["policy"], trainer.model.state_dict())
    assert changed(before["critic"], trainer.value_model.state_dict())
    assert trainer.critic_lr_scheduler.get_last_lr()[0] == pytest.approx(trainer.lr_scheduler.get_last_lr()[0] * 2)
    trainer.save_model()
    critic = AutoModelForSequenceClassification.from_pretrained(output_dir / "critic")
    for key, value in trainer.value_model.state_dict().items():
        assert torch.equal(critic.state_dict()[key], value), key
    policy = AutoModelForCausalLM.from_pretrained(output_dir)
    assert torch.equal(policy.model.embed_tokens.weight, trainer.model.model.embed_tokens.weight)


def test_resume_reproduces_the_uninterrupted_run(tmp_path, tiny_policy_path):
    settings = dict(
        max_steps=3, save_strategy="steps", save_steps=2, per_device_train_batch_size=2,
        gradient_accumulation_steps=2, kl_target=0.01, kl_horizon=8,
    )  # fmt: skip

    def run(name, resume=None):
        args = tiny_ppo_config(tmp_path / name, **settings)
        trainer = PPOTrainer(
            model=tiny_policy_path, reward_funcs=even_token_reward, args=args, train_dataset=prompts()
        )
        trainer.train(resume_from_checkpoint=resume)
        return trainer

    full = run("full")
    assert (tmp_path / "full" / "checkpoint-2" / "critic" / "model.safetensors").exists()
    assert (tmp_path / "full" / "checkpoint-2" / "critic_optimizer.pt").exists()
    resumed = run("resumed", resume=str(tmp_path / "full" / "checkpoint-2"))
    assert resumed.kl_coef == pytest.approx(full.kl_coef, abs=1e-12) and full.kl_coef != 0.02
    for a, b in ((full.model, resumed.model), (full.value_model, resumed.value_model)):
        for (name, x), y in zip(a.state_dict().items(), b.state_dict().values()):
            torch.testing.assert_close(x, y, atol=1e-6, rtol=0, msg=name)
    last = [[log for log in t.state.log_history if log.get("step") == 3 and "loss" in log][0] for t in (full, resumed)]
    for key in ("loss", "ppo/value_loss", "ppo/kl", "ppo/kl_coef", "reward"):
        assert last[0][key] == pytest.approx(last[1][key], abs=1e-6), key


def test_value_model_from_reward_model_path_keeps_its_head(tmp_path, tiny_policy_path, tiny_reward_model_path):
    args = tiny_ppo_config(tmp_path, max_steps=1)
    trainer = PPOTrainer(
        model=tiny_policy_path, reward_funcs=even_token_reward, args=args, train_dataset=prompts(),
        value_model=tiny_reward_model_path,
    )  # fmt: skip
    reward_model = AutoModelForSequenceClassification.from_pretrained(tiny_reward_model_path)
    assert torch.equal(trainer.value_model.score.weight, reward_model.score.weight)
    # None: the policy's backbone with a fresh head
    policy = AutoModelForCausalLM.from_pretrained(tiny_policy_path)
    critic = load_value_model(None, policy, trainer.processing_class)
    assert torch.equal(critic.model.embed_tokens.weight, policy.model.embed_tokens.weight)


def test_value_model_with_another_vocabulary_is_refused(tmp_path, tiny_policy_path):
    policy = AutoModelForCausalLM.from_pretrained(tiny_policy_path)
    tokenizer = build_tiny_tokenizer()
    with pytest.raises(ValueError, match="token embeddings"):
        load_value_model(build_tiny_reward_model(tokenizer, vocab_size=100), policy, tokenizer)
    other_tokenizer = build_tiny_tokenizer(vocab_size=300)  # other ids, while the embedding table is large enough
    path = tmp_path / "other-rm"
    build_tiny_reward_model(tokenizer).save_pretrained(path)
    other_tokenizer.save_pretrained(path)
    with pytest.raises(ValueError, match="different tokenizer"):
        load_value_model(str(path), policy, tokenizer)


@pytest.mark.parametrize("delta", [None, 3.0])
def test_dual_clip_is_trl_delta(trained, delta):
    """TRL's loss with `delta` = c equals trl_ext.core's clipped surrogate with dual clip c, on ratios in [0.2, 5]."""
    trainer, _, _ = trained
    rollout = trainer.rollouts[1]
    inputs = {key: rollout[key][:2] for key in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask")}
    ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
    attention = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
    mask = inputs["completion_mask"]
    with torch.no_grad():
        logp, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, attention, mask.shape[1])
    log_ratio = torch.linspace(-1.6, 1.6, logp.numel()).view(logp.shape)  # ρ from 0.2 to 5, both signs of A
    old_logp = logp - log_ratio
    signs = torch.tensor([1.0, -1.0]).repeat(logp.numel() // 2 + 1)[: logp.numel()].view(logp.shape)
    advantages = signs * torch.randn(logp.shape, generator=torch.Generator().manual_seed(0)).abs()
    inputs.update(old_per_token_logps=old_logp, advantages=advantages, num_items_in_batch=mask.sum())
    trainer.args.delta = delta
    try:
        with torch.no_grad():
            loss = trl.GRPOTrainer.compute_loss(trainer, trainer.model, inputs)
    finally:
        trainer.args.delta = None
    expected = aggregate(clipped_surrogate(logp, old_logp, advantages, 0.2, 0.2, dual_clip=delta), mask, "token_mean")
    assert loss.item() == pytest.approx(expected.item(), abs=1e-6)
    plain = aggregate(clipped_surrogate(logp, old_logp, advantages, 0.2, 0.2), mask, "token_mean")
    assert (plain.item() != pytest.approx(expected.item(), abs=1e-4)) == (delta is not None)  # the dual clip bites
    with pytest.raises(ValueError, match="dual clip"):
        PPOConfig(output_dir="unused", use_cpu=True, delta=1.1)
