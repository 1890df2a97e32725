"""Guards of every private TRL/transformers touch in trainers/_trl*: each checks the signature or the behaviour trl_ext
relies on, so that a TRL upgrade that changes one fails here instead of drifting silently."""

import inspect

import pytest
import transformers
import trl

import trl_ext
from trl_ext.hub import ModelCardMixin
from trl_ext.trainers._trl_checkpoint import CheckpointHooksMixin, checkpoint_dir
from trl_ext.trainers._trl_dpo import DPO_ATTRIBUTES, DPO_HOOKS, DPOHookMixin
from trl_ext.trainers._trl_hooks import GRPO_HOOKS, TRAINER_PUSH_HOOKS, check_trl_hooks
from trl_ext.trainers._trl_ppo import PPO_TRL_HOOKS, PPOHookMixin, reference_model_kept
from trl_ext.trainers._trl_reward import REWARD_HOOKS, RewardHookMixin


def _source(function) -> str:
    return inspect.getsource(function)


@pytest.mark.parametrize(
    ("trainer_cls", "hooks"),
    [
        (trl.GRPOTrainer, GRPO_HOOKS),
        (trl.GRPOTrainer, PPO_TRL_HOOKS),
        (trl.DPOTrainer, DPO_HOOKS),
        (trl.RewardTrainer, REWARD_HOOKS),
        (transformers.Trainer, TRAINER_PUSH_HOOKS),
    ],
    ids=["grpo", "ppo", "dpo", "reward", "trainer-push"],
)
def test_every_wrapped_method_keeps_the_signature_relied_on(trainer_cls, hooks):
    assert check_trl_hooks(trainer_cls, hooks) == []


def test_trainer_calls_the_checkpoint_hooks_on_save_and_resume(tmp_path):
    """CheckpointHooksMixin relies on Trainer calling _save_checkpoint(model, trial) at each save and
    _load_optimizer_and_scheduler(checkpoint) on resume, and on the checkpoint folder being output_dir/checkpoint-N."""
    training = _source(transformers.Trainer._prepare_for_training) + _source(
        transformers.Trainer._maybe_log_save_evaluate
    )
    assert "self._save_checkpoint(model, trial)" in training
    assert "self._load_optimizer_and_scheduler(resume_from_checkpoint)" in training
    assert "PREFIX_CHECKPOINT_DIR" in _source(transformers.Trainer._save_checkpoint)

    class State:
        global_step = 7

    class Args:
        output_dir = str(tmp_path)

    class Fake:
        args, state = Args(), State()

    assert checkpoint_dir(Fake()) == str(tmp_path / "checkpoint-7")
    assert {"_save_checkpoint", "_load_optimizer_and_scheduler"} <= set(vars(CheckpointHooksMixin))


def test_ppo_beta_toggle_matches_how_trl_uses_beta():
    """TRL loads a reference model only when beta != 0, computes reference log-probs during generation only when
    beta != 0, and adds beta * KL to the loss with the same attribute: what PPOHookMixin's toggle relies on."""
    init = _source(trl.GRPOTrainer.__init__)
    assert "self.beta = args.beta" in init and "if self.beta == 0.0:" in init
    generation = _source(trl.GRPOTrainer._generate_and_score_completions)
    assert "if self.beta != 0.0:" in generation and "ref_per_token_logps" in generation
    loss = _source(trl.GRPOTrainer._compute_loss)
    assert "if self.beta != 0.0:" in loss and "self.beta * per_token_kl" in loss
    assert "return logps, entropies" in _source(trl.GRPOTrainer._get_per_token_logps_and_entropies)


def test_ppo_beta_toggle_restores_beta():
    class Args:
        beta = 0.0

    args = Args()
    with reference_model_kept(args, needed=True):
        assert args.beta == 1.0
    assert args.beta == 0.0
    with reference_model_kept(args, needed=False):
        assert args.beta == 0.0

    class Trainer(PPOHookMixin):
        beta, _needs_reference = 0.0, True

    trainer = Trainer()
    with trainer.reference_logps_requested():
        assert trainer.beta == 1.0
    assert trainer.beta == 0.0
    trainer.beta = 0.5  # a KL-in-loss beta is left as it is
    with trainer.reference_logps_requested():
        assert trainer.beta == 0.5


def test_dpo_precompute_flip_makes_trl_read_reference_logps_from_the_batch():
    loss = _source(trl.DPOTrainer._compute_loss)
    assert (
        'if self.precompute_ref_logps:\n            ref_chosen_logps, ref_rejected_logps = inputs["ref_chosen_logps"]'
        in loss
    )

    class Trainer(DPOHookMixin):
        precompute_ref_logps = False

    trainer = Trainer()
    with trainer.reference_logps_from_batch():
        assert trainer.precompute_ref_logps is True
    assert trainer.precompute_ref_logps is False
    with pytest.raises(KeyError), trainer.reference_logps_from_batch():
        raise KeyError("restored on error too")
    assert trainer.precompute_ref_logps is False


def test_dpo_attributes_and_metrics_layout():
    init = _source(trl.DPOTrainer.__init__)
    assert all(f"self.{name} =" in init for name in DPO_ATTRIBUTES if name != "ref_model")
    assert 'self._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}' in init
    loss = _source(trl.DPOTrainer._compute_loss)
    assert 'self._metrics[mode]["rewards/chosen"]' in loss and 'self._metrics[mode]["rewards/margins"]' in loss


def test_signature_columns_are_what_trainer_keeps():
    """SignatureColumnMixin (DPO's margin, the reward model's weight) relies on Trainer keeping exactly the columns
    of ``_signature_columns``, filled by ``_set_signature_columns_if_needed``."""
    remove = _source(transformers.Trainer._remove_unused_columns)
    assert (
        "self._set_signature_columns_if_needed()" in remove and "signature_columns = self._signature_columns" in remove
    )
    assert DPOHookMixin.extra_signature_column == "margin" and RewardHookMixin.extra_signature_column == "weight"


def test_reward_trainer_prepares_every_dataset_through_prepare_dataset():
    init = _source(trl.RewardTrainer.__init__)
    assert 'self._prepare_dataset(train_dataset, processing_class, args, "train")' in init
    assert 'self._prepare_dataset(eval_dataset, processing_class, args, "eval")' in init


def test_grpo_metrics_layout():
    init = _source(trl.GRPOTrainer.__init__)
    assert 'self._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}' in init


@pytest.mark.parametrize("trainer_cls", [trl.GRPOTrainer, trl.DPOTrainer, trl.RewardTrainer])
def test_trl_tags_the_model_with_the_tag_names_trl_ext_hands_it(trainer_cls):
    """RecipeTagsMixin gives TRL recipe_card.tags as _tag_names: TRL reads it on the instance when it builds the
    trainer and tags the model with it (the behaviour: test_trl_ext_trainers_tag_their_models)."""
    assert "self.model.add_model_tags(self._tag_names)" in _source(trainer_cls.__init__)
    assert isinstance(trainer_cls._tag_names, list)  # a class attribute: a property earlier in the MRO shadows it


def test_trl_reads_name_and_paper_only_in_the_card_trl_ext_replaces():
    """TRL's _name and _paper are read by its create_model_card, which ModelCardMixin replaces: trl_ext sets neither."""
    card = _source(trl.trainer.base_trainer._BaseTrainer.create_model_card)
    assert "self._name" in card and "self._paper" in card
    assert ModelCardMixin.create_model_card is not trl.trainer.base_trainer._BaseTrainer.create_model_card
    for trainer_cls in (trl_ext.GRPOTrainer, trl_ext.DPOTrainer, trl_ext.RewardTrainer, trl_ext.PPOTrainer):
        assert trainer_cls.create_model_card is ModelCardMixin.create_model_card


def test_trl_ext_trainers_tag_their_models(tmp_path, tiny_policy_path):
    from tests.scripts.grpo_family import scores_dataset, scripted_reward, tiny_args

    args = tiny_args(trl_ext.DAPOConfig, str(tmp_path))
    trainer = trl_ext.DAPOTrainer(
        model=tiny_policy_path, reward_funcs=scripted_reward, args=args, train_dataset=scores_dataset(8)
    )
    assert {"trl-ext", "dapo"} <= set(trainer.model.model_tags)
