"""The offline tiny-model harness loads back with the Auto classes and works with TRL's expectations."""

import torch
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer


def test_tiny_policy_and_tokenizer_load_offline(tiny_policy_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_policy_path)
    model = AutoModelForCausalLM.from_pretrained(tiny_policy_path)
    assert tokenizer.padding_side == "left"
    assert tokenizer.pad_token is not None and tokenizer.eos_token == "<|im_end|>"
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 2 + 2?"}], tokenize=False, add_generation_prompt=True
    )
    assert prompt.endswith("<|im_start|>assistant\n")
    batch = tokenizer([prompt, "short"], return_tensors="pt", padding=True)
    out = model.generate(**batch, max_new_tokens=4, do_sample=False)
    prompt_length = batch["input_ids"].shape[1]
    assert out.shape[0] == 2 and prompt_length < out.shape[1] <= prompt_length + 4
    assert sum(p.numel() for p in model.parameters()) < 1_000_000


def test_tiny_reward_model_scores_one_scalar_per_sequence(tiny_reward_model_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_reward_model_path)
    model = AutoModelForSequenceClassification.from_pretrained(tiny_reward_model_path)
    batch = tokenizer(["a", "a longer text"], return_tensors="pt", padding=True)
    logits = model(**batch).logits
    assert logits.shape == (2, 1) and torch.isfinite(logits).all()


def test_tiny_models_are_deterministic(tmp_path):
    from trl_ext.tiny import build_tiny_causal_lm, build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer()
    first, second = build_tiny_causal_lm(tokenizer, seed=3), build_tiny_causal_lm(tokenizer, seed=3)
    for a, b in zip(first.parameters(), second.parameters(), strict=True):
        assert torch.equal(a, b)


def test_vllm_loadable_overrides_reach_both_saved_models(tmp_path):
    """vLLM's CPU attention needs a head size >= 32 (the default tiny model has 16): the overrides give 32."""
    from transformers import AutoConfig

    from trl_ext.tiny import VLLM_LOADABLE, save_tiny_models

    paths = save_tiny_models(tmp_path, **VLLM_LOADABLE)
    for path in paths.values():
        config = AutoConfig.from_pretrained(path)
        assert config.hidden_size // config.num_attention_heads == 32 and config.num_key_value_heads == 1
    default = AutoConfig.from_pretrained(save_tiny_models(tmp_path / "default")["policy"])
    assert default.hidden_size // default.num_attention_heads == 16  # the existing tests' model is unchanged
    policy = AutoModelForCausalLM.from_pretrained(paths["policy"])
    out = policy.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=2, min_new_tokens=2, do_sample=False)
    assert out.shape == (1, 5)
