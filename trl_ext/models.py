"""Model loading shared by the trainers and the CLI: adapters as the model, and TRL's ModelConfig flags.

TRL loads a ``model`` given by name with ``from_pretrained``; a repo or directory that holds only a PEFT adapter
(``adapter_config.json``) then fails with "Unrecognized model". trl_ext loads the adapter's base model with the same
keyword arguments TRL would use and puts the adapter on top, trainable; TRL then trains it (and with β > 0 keeps a
frozen "ref" copy of it as the reference, as it does for any PeftModel it is given).
"""

from __future__ import annotations

import json
import os
from typing import Any

# The ModelConfig fields that become from_pretrained keyword arguments, as TRL's own `trl grpo` script maps them.
MODEL_INIT_FIELDS = {"model_revision": "revision", "attn_implementation": "attn_implementation", "dtype": "dtype"}


def adapter_config_file(model_id: str, revision: str | None = None) -> str | None:
    """The path of ``adapter_config.json`` when ``model_id`` (a directory or Hub id) holds a PEFT adapter, else None."""
    if os.path.isdir(model_id):
        path = os.path.join(model_id, "adapter_config.json")
        return path if os.path.isfile(path) else None
    from transformers.utils.peft_utils import find_adapter_config_file

    try:
        return find_adapter_config_file(model_id, revision=revision)
    except (OSError, ValueError):  # not a Hub id either: loading the model itself reports that
        return None


def model_init_kwargs_from(model_args: Any, init_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """from_pretrained keyword arguments from TRL's ModelConfig, updated by a config's own ``model_init_kwargs``."""
    kwargs = {name: getattr(model_args, field) for field, name in MODEL_INIT_FIELDS.items()}
    kwargs.update(init_kwargs or {})
    return kwargs


def check_model_flags(model_args: Any, quantized: bool, adapter: bool) -> None:
    """Refuse ModelConfig flags that cannot apply to this model, instead of ignoring them."""
    if quantized and not (model_args.use_peft or adapter):
        raise ValueError(
            "`load_in_4bit`/`load_in_8bit` quantise the base model, which then cannot be trained itself: add "
            "`--use_peft` (QLoRA) or pass an adapter as `--model_name_or_path`."
        )
    if adapter and model_args.use_peft:
        raise ValueError(
            f"`model_name_or_path`={model_args.model_name_or_path!r} holds a PEFT adapter, which is trained as it is; "
            "`use_peft` would add a second, new adapter. Drop `--use_peft` (and the `--lora_*` flags)."
        )


def kbit_device_map() -> dict[str, int] | None:
    """Each process's whole model on its own GPU: a quantised model cannot be moved after loading (None on CPU)."""
    import torch
    from accelerate import PartialState

    return {"": PartialState().local_process_index} if torch.cuda.is_available() else None


def _base_model_id(model_id: str, config_path: str) -> str:
    with open(config_path) as handle:
        base = json.load(handle).get("base_model_name_or_path")
    if not base:
        raise ValueError(
            f"`model`={model_id!r} holds a PEFT adapter whose adapter_config.json names no base model "
            "(`base_model_name_or_path`). Set it to the base model's Hub id or local path."
        )
    return base


def load_adapter_model(
    model_id: str,
    model_init_kwargs: dict[str, Any] | None = None,
    quantization_config: Any = None,
    architecture: Any = None,
) -> Any:
    """Load the base model named in the adapter's config with ``model_init_kwargs`` (as TRL would load a model by
    name) and the adapter of ``model_id`` on top of it, trainable. Returns a ``peft.PeftModel``."""
    from peft import PeftModel, prepare_model_for_kbit_training
    from trl.trainer.utils import create_model_from_path

    kwargs = dict(model_init_kwargs or {})
    revision = kwargs.pop("revision", None)
    config_path = adapter_config_file(model_id, revision)
    base_id = _base_model_id(model_id, config_path)
    if quantization_config is not None:
        kwargs["quantization_config"] = quantization_config
        kwargs.setdefault("device_map", kbit_device_map())
    if architecture is not None:
        kwargs["architecture"] = architecture
    try:
        base = create_model_from_path(base_id, **kwargs)
    except OSError as error:  # not a directory, not on the Hub, not in the cache (offline)
        raise ValueError(
            f"`model`={model_id!r} is a PEFT adapter for the base model {base_id!r} (adapter_config.json: "
            f"base_model_name_or_path), which cannot be found: {error}. Make the base available (download it, or "
            "fix base_model_name_or_path to its Hub id or local path)."
        ) from error
    if quantization_config is not None:
        base = prepare_model_for_kbit_training(base)
    return PeftModel.from_pretrained(base, model_id, is_trainable=True, revision=revision)


def resolve_model(model: Any, args: Any, trainer_kwargs: dict[str, Any], architecture: Any = None) -> Any:
    """What a trl_ext trainer hands TRL as ``model``: an adapter id/path becomes base + trainable adapter (using
    ``args.model_init_kwargs`` and a ``quantization_config`` taken out of ``trainer_kwargs``); all else is unchanged."""
    if not isinstance(model, str):
        return model
    init_kwargs = dict(getattr(args, "model_init_kwargs", None) or {})
    if adapter_config_file(model, init_kwargs.get("revision")) is None:
        return model
    if trainer_kwargs.get("peft_config") is not None:
        raise ValueError(
            f"`model`={model!r} holds a PEFT adapter, which is trained as it is; a `peft_config` would add a second, "
            "new adapter. Pass no peft_config."
        )
    init_kwargs.setdefault("trust_remote_code", getattr(args, "trust_remote_code", False))
    if getattr(args, "distributed_state", None) is not None and args.distributed_state.distributed_type in (
        "MULTI_GPU",
        "DEEPSPEED",
    ):
        init_kwargs["device_map"] = None  # as TRL: distributed training places the model itself
    quantization_config = trainer_kwargs.pop("quantization_config", None)
    return load_adapter_model(model, init_kwargs, quantization_config, architecture)
