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
