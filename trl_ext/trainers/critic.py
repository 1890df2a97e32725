"""The critic of :class:`~trl_ext.trainers.ppo.PPOTrainer`: a value model read at every token, and how it is loaded
(from a reward-model or causal-LM checkpoint, or from the policy's own weights) and checked against the policy."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import torch
from accelerate.utils import is_peft_model
from torch import nn
from transformers import AutoModelForSequenceClassification, AutoTokenizer, PreTrainedModel

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


class TokenValueModel(nn.Module):
    """V(s_t) at every position: the scalar head of a ``*ForSequenceClassification`` critic applied to the hidden
    state of every token (the classifier's own forward pools the last token only). Wrapping it in one module keeps
    the forward inside DDP, so the critic's gradients are all-reduced."""

    def __init__(self, critic: PreTrainedModel):
        super().__init__()
        if not isinstance(getattr(critic, "score", None), nn.Module) or not hasattr(critic, critic.base_model_prefix):
            raise ValueError(
                f"value_model must be a *ForSequenceClassification model with a `score` head and a "
                f"`{critic.base_model_prefix}` backbone (AutoModelForSequenceClassification, num_labels=1); got "
                f"{type(critic).__name__}."
            )
        if critic.config.num_labels != 1:
            raise ValueError(f"value_model must have one output (num_labels=1), got {critic.config.num_labels}.")
        self.critic = critic

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        backbone = getattr(self.critic, self.critic.base_model_prefix)
        hidden = backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.critic.score(hidden).squeeze(-1).float()


def load_value_model(
    value_model: str | PreTrainedModel | None,
    policy: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    **from_pretrained_kwargs: Any,
) -> PreTrainedModel:
    """The critic of :class:`PPOTrainer`, a sequence classifier with one output whose head is read at every token.

    - ``None``: the policy's weights with a fresh scalar head (the policy's backbone copied in memory; for a PEFT
      policy, its base checkpoint);
    - a path or Hub id: a reward-model checkpoint (head kept) or a causal-LM checkpoint (fresh head), loaded with
      ``AutoModelForSequenceClassification.from_pretrained(path, num_labels=1)``;
    - a ``PreTrainedModel``: used as it is.

    Raises a ValueError when the critic cannot read the policy's token ids (vocabulary or tokenizer mismatch).
    """
    if value_model is None:
        critic = _critic_from_policy(policy, **from_pretrained_kwargs)
    elif isinstance(value_model, str):
        critic = AutoModelForSequenceClassification.from_pretrained(
            value_model, num_labels=1, **from_pretrained_kwargs
        )
        _check_tokenizer_matches(value_model, tokenizer)
    elif isinstance(value_model, PreTrainedModel):
        critic = value_model
    else:
        raise TypeError(f"value_model must be None, a path or a PreTrainedModel, got {type(value_model).__name__}.")
    _check_vocabulary(critic, tokenizer)
    critic.config.pad_token_id = tokenizer.pad_token_id
    return critic


def _critic_from_policy(policy: PreTrainedModel, **from_pretrained_kwargs: Any) -> PreTrainedModel:
    if is_peft_model(policy):
        path = policy.get_base_model().config.name_or_path
        return AutoModelForSequenceClassification.from_pretrained(path, num_labels=1, **from_pretrained_kwargs)
    config = copy.deepcopy(policy.config)
    config.num_labels = 1
    critic = AutoModelForSequenceClassification.from_config(config, dtype=policy.dtype)
    missing, _ = critic.load_state_dict(policy.state_dict(), strict=False)
    backbone_missing = [key for key in missing if not key.startswith("score.")]
    if backbone_missing:
        raise ValueError(
            f"Could not initialise the critic from the policy ({type(policy).__name__}): the sequence classifier "
            f"expects weights the policy does not have, e.g. {backbone_missing[:3]}. Pass value_model explicitly."
        )
    return critic.to(next(policy.parameters()).device)


def _check_tokenizer_matches(path: str, tokenizer: PreTrainedTokenizerBase) -> None:
    try:
        own = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError):
        return  # no tokenizer saved with the value model: only the vocabulary size can be checked
    if own.get_vocab() != tokenizer.get_vocab():
        raise ValueError(
            f"value_model {path!r} has a different tokenizer than the policy ({len(own)} vs {len(tokenizer)} tokens, "
            "different ids). The critic reads the policy's token ids, so it must share the policy's tokenizer."
        )


def _check_vocabulary(critic: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
    rows = critic.get_input_embeddings().num_embeddings
    if rows < len(tokenizer):
        raise ValueError(
            f"value_model has {rows} token embeddings but the policy's tokenizer has {len(tokenizer)} tokens. The "
            "critic reads the policy's token ids, so it must share the policy's tokenizer and vocabulary."
        )
