"""Tiny random models and a tokenizer built fully offline (tests, the demo and smoke runs).

Nothing here touches the network: the tokenizer is a byte-level BPE trained on a small built-in corpus with
`tokenizers`, and the models are randomly initialised Qwen2 configurations. Everything is deterministic for a
given seed, so two processes that build the same tiny model get identical weights.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen2ForSequenceClassification,
)

PAD_TOKEN = "<|endoftext|>"
BOS_TOKEN = "<|im_start|>"
EOS_TOKEN = "<|im_end|>"
SPECIAL_TOKENS = [PAD_TOKEN, BOS_TOKEN, EOS_TOKEN, "<think>", "</think>"]

# ChatML, as Qwen2 uses it; `{% generation %}` markers let TRL build assistant masks.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] + '<|im_end|>' }}"
    "{% endgeneration %}{% else %}{{ message['content'] + '<|im_end|>' }}{% endif %}{{ '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_CORPUS = [
    "What is 12 + 30? The answer is \\boxed{42}.",
    "Compute 7 * 8. <think>7 times 8 is 56</think> \\boxed{56}",
    "Solve for x: 2x + 3 = 11. So x = \\boxed{4}.",
    "```python\ndef add(a, b):\n    return a + b\nprint(add(1, 2))\n```",
    "The quick brown fox jumps over the lazy dog.",
    "user assistant system: You are a helpful assistant. Please answer the question.",
    "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 + - * / = ( ) { } [ ] \\frac \\pi \\sqrt",
]


def build_tiny_tokenizer(vocab_size: int = 512) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer with ChatML special tokens, pad/eos set and left padding (as TRL expects)."""
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_CORPUS * 4, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        pad_token=PAD_TOKEN,
        eos_token=EOS_TOKEN,
        bos_token=None,
        padding_side="left",
        model_max_length=2048,
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


# vLLM's CPU attention kernels need a head size of at least 32; the default 64 / 4 heads = 16 is refused. These
# overrides keep hidden 64 with 2 heads (1 KV head): head size 32, the smallest vLLM loads, on CPU and GPU.
VLLM_LOADABLE: dict[str, int] = {"num_attention_heads": 2, "num_key_value_heads": 1}


def tiny_qwen2_config(tokenizer: PreTrainedTokenizerFast, **overrides) -> Qwen2Config:
    """hidden 64, 2 layers, 4 heads (2 KV heads), tied embeddings: a few hundred thousand parameters.

    ``overrides`` replace any Qwen2Config field; ``**VLLM_LOADABLE`` gives a model vLLM can load (head size 32).
    """
    settings = dict(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    settings.update(overrides)
    return Qwen2Config(**settings)


def build_tiny_causal_lm(tokenizer: PreTrainedTokenizerFast, seed: int = 0, **overrides) -> Qwen2ForCausalLM:
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(tiny_qwen2_config(tokenizer, **overrides))
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def build_tiny_reward_model(
    tokenizer: PreTrainedTokenizerFast, seed: int = 1, **overrides
) -> Qwen2ForSequenceClassification:
    """A scalar-head sequence classifier (num_labels=1) sharing the tiny tokenizer: a reward model."""
    torch.manual_seed(seed)
    return Qwen2ForSequenceClassification(tiny_qwen2_config(tokenizer, num_labels=1, **overrides))


def save_tiny_models(directory: str | os.PathLike, seed: int = 0, **overrides) -> dict[str, Path]:
    """Build and save the tiny policy and reward model (each with the tokenizer) under ``directory``.

    Returns {"policy": path, "reward_model": path}. Saving matters: TRL re-creates the reference model from
    ``config._name_or_path``, so an in-memory model that was never saved fails with β > 0. ``overrides`` replace
    Qwen2Config fields of both models: ``save_tiny_models(path, **VLLM_LOADABLE)`` saves models vLLM can load.
    """
    directory = Path(directory)
    tokenizer = build_tiny_tokenizer()
    paths = {"policy": directory / "tiny-policy", "reward_model": directory / "tiny-reward-model"}
    builders = {"policy": build_tiny_causal_lm, "reward_model": build_tiny_reward_model}
    for name, path in paths.items():
        model = builders[name](tokenizer, seed=seed + (name == "reward_model"), **overrides)
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
    return paths
