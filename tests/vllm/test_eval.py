"""`trl-ext eval --use_vllm` generates with a real vLLM engine and scores exactly its completions."""

from __future__ import annotations

import json
import os
import shutil
import socket

import pytest

from trl_ext.cli import main

pytestmark = pytest.mark.vllm

SCORED: list[str] = []


def recording_length_reward(completions, **kwargs) -> list[float]:
    """A reward named on the command line as `tests.vllm.test_eval:recording_length_reward`."""
    SCORED.extend(completions)
    return [float(len(text) % 2) for text in completions]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_eval_use_vllm_scores_the_engines_completions(vllm_model_paths, tmp_path, monkeypatch):
    import vllm

    model = tmp_path / "model"  # eval writes its results next to the model
    shutil.copytree(vllm_model_paths["policy"], model)
    data = tmp_path / "test.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"What is {i} + {i}?"}) + "\n" for i in range(3)))
    generated, real_llm = [], vllm.LLM

    def eager_llm(**kwargs):
        # The engine runs in this process, without compilation (as the colocated engines of the other tests): vLLM's
        # engine and worker processes and its torch.compile take minutes on a CPU and are no part of what is checked.
        engine = real_llm(**kwargs, enforce_eager=True, distributed_executor_backend="external_launcher")
        engine_generate = engine.generate

        def generate(*args, **kw):
            outputs = engine_generate(*args, **kw)
            generated.extend(choice.text for output in outputs for choice in output.outputs)
            return outputs

        engine.generate = generate
        return engine

    monkeypatch.setattr(vllm, "LLM", eager_llm)
    for name, value in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1"}.items():
        monkeypatch.setenv(name, os.environ.get(name, value))  # as TRL sets them for its colocated engine
    monkeypatch.setenv("MASTER_PORT", os.environ.get("MASTER_PORT", str(_free_port())))
    SCORED.clear()
    argv = ["eval", "--model_name_or_path", str(model), "--dataset_name", str(data), "--use_vllm",
            "--reward_funcs", "tests.vllm.test_eval:recording_length_reward", "--num_samples", "4",
            "--max_new_tokens", "8"]  # fmt: skip
    assert main(argv) == 0
    assert len(generated) == 3 * 4 and generated == SCORED
    rows = json.loads((model / "eval_results.json").read_text())
    metrics = {row["metric_type"]: row["metric_value"] for row in rows}
    expected = sum(len(text) % 2 for text in generated) / len(generated)
    assert metrics["mean_reward"] == pytest.approx(expected, abs=1e-4)
