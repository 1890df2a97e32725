"""Multi-process resume on CPU with transformers < 5.18: its optimizer load uses ``map_location=cpu:<rank>``."""

import types

import torch

from trl_ext.trainers._trl_checkpoint import CheckpointHooksMixin


class _LoadsLikeTransformers517:
    """The part of transformers 5.17's ``_load_optimizer_and_scheduler`` that matters: a world size above 1 loads
    the optimizer state with ``map_location=self.args.device``."""

    def _load_optimizer_and_scheduler(self, checkpoint):
        self.loaded = torch.load(checkpoint, map_location=self.args.device, weights_only=True)


class _Trainer(CheckpointHooksMixin, _LoadsLikeTransformers517):
    def __init__(self, device):
        self.args = types.SimpleNamespace(device=device)
        self.restored = None

    def load_checkpoint_state(self, checkpoint):
        self.restored = checkpoint


def _saved_state(tmp_path):
    path = tmp_path / "optimizer.pt"
    torch.save({"state": {0: {"exp_avg": torch.arange(3.0)}}}, path)
    return str(path)


def test_cpu_rank_device_loads_the_optimizer_state(tmp_path):
    path = _saved_state(tmp_path)
    trainer = _Trainer(torch.device("cpu", 1))
    trainer._load_optimizer_and_scheduler(path)
    assert torch.equal(trainer.loaded["state"][0]["exp_avg"], torch.arange(3.0))
    assert trainer.restored == path
    assert torch.load is torch.serialization.load  # put back after the load


def test_plain_cpu_device_is_left_alone(tmp_path):
    path = _saved_state(tmp_path)
    trainer = _Trainer(torch.device("cpu"))
    trainer._load_optimizer_and_scheduler(path)
    assert torch.equal(trainer.loaded["state"][0]["exp_avg"], torch.arange(3.0))
