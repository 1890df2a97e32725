"""trainers/_trl_vllm.py: the colocated CPU engine's repacking is turned off only while a trainer builds a colocated
engine; the real engine tests are in tests/vllm (they need vLLM)."""

import importlib.util

import pytest

import trl_ext
from tests.scripts.grpo_family import scores_dataset, scripted_reward, tiny_args


def test_without_vllm_a_colocate_trainer_gets_trls_own_install_message(tiny_policy_path, tmp_path, monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real_find_spec(name, *a)
    )
    args = tiny_args(trl_ext.GRPOConfig, str(tmp_path), use_vllm=True, vllm_mode="colocate")
    with pytest.raises(ImportError, match="vLLM is not available"):
        trl_ext.GRPOTrainer(
            model=tiny_policy_path, reward_funcs=scripted_reward, args=args, train_dataset=scores_dataset(8)
        )
