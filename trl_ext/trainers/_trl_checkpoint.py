"""TRL's checkpoint hooks, in one place: ``Trainer._save_checkpoint`` and ``Trainer._load_optimizer_and_scheduler``.

Features that keep state in a checkpoint (reference resets, dynamic sampling, the PPO critic) never override these
private methods: they implement ``save_checkpoint_state(directory)`` / ``load_checkpoint_state(checkpoint)``, call
``super()`` first, and list themselves before ``CheckpointHooksMixin`` in the trainer's bases. Both hooks are guarded
in ``_trl_hooks`` (their signatures) and by tests/trainers/test_trl_guards.py (that TRL calls them).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import torch


def checkpoint_dir(trainer: Any) -> str:
    """The folder ``Trainer._save_checkpoint`` writes for the current step (no hyper-parameter search trials)."""
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    return os.path.join(trainer.args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{trainer.state.global_step}")


class CheckpointHooksMixin:
    """Calls ``save_checkpoint_state`` after TRL wrote a checkpoint and ``load_checkpoint_state`` after TRL loaded
    the optimizer and scheduler of the checkpoint it resumes from; list it just before the TRL base class."""

    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        self.save_checkpoint_state(checkpoint_dir(self))

    def _load_optimizer_and_scheduler(self, checkpoint):
        with _cpu_device_loads_on_cpu(self.args.device):
            super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is not None:
            self.load_checkpoint_state(checkpoint)

    def save_checkpoint_state(self, directory: str) -> None:
        """Write this feature's state into the checkpoint folder ``directory`` (every process calls it)."""

    def load_checkpoint_state(self, checkpoint: str) -> None:
        """Restore this feature's state from the checkpoint folder ``checkpoint`` (every process calls it)."""


@contextlib.contextmanager
def _cpu_device_loads_on_cpu(device: torch.device) -> Iterator[None]:
    """Transformers before 5.18 loads the optimizer of a multi-process run with ``map_location=args.device``, which is
    ``cpu:<rank>`` on CPU, and torch 2.13 refuses that location ("don't know how to restore data location ...
    cpu:0"), so two-process resume on CPU failed there (transformers 5.17 is what vLLM 0.31 pins). Inside this
    block a ``cpu:<n>`` map location means ``cpu``; nothing else changes."""
    if device.type != "cpu" or device.index is None:
        yield
        return
    original_load = torch.load

    def load(*args: Any, **kwargs: Any) -> Any:
        location = kwargs.get("map_location")
        if isinstance(location, (str, torch.device)) and torch.device(location).type == "cpu":
            kwargs["map_location"] = "cpu"
        return original_load(*args, **kwargs)

    torch.load = load
    try:
        yield
    finally:
        torch.load = original_load
