"""Evaluation: sampling, scoring, pass@k from the unbiased estimator, and results that reach the model card."""

import json
import sys
import types

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from trl_ext.cli import main
from trl_ext.data.demo import arithmetic_prompts
from trl_ext.evaluation import evaluate_policy


def first_sample_passes(completions, **kwargs):
    """1 for the first of every 4 samples of a prompt, 0 otherwise: pass@1 = 0.25 and pass@4 = 1 exactly."""
    return [1.0 if index % 4 == 0 else 0.0 for index in range(len(completions))]


def test_pass_at_k_and_mean_reward_follow_the_scores(tiny_policy_path):
    model = AutoModelForCausalLM.from_pretrained(tiny_policy_path)
    tokenizer = AutoTokenizer.from_pretrained(tiny_policy_path)
    dataset = arithmetic_prompts().select(range(5))
    report = evaluate_policy(model, tokenizer, dataset, [first_sample_passes], num_samples=4, ks=(1, 2, 4),
                             max_new_tokens=4)  # fmt: skip
    assert report.num_prompts == 5 and report.mean_reward == pytest.approx(0.25)
    assert report.pass_at == pytest.approx({1: 0.25, 2: 0.5, 4: 1.0})  # 1 − C(3,2)/C(4,2) = 0.5


def test_eval_command_writes_results_that_the_card_shows(tmp_path, tiny_policy_path):
    import shutil

    model_dir = tmp_path / "model"
    shutil.copytree(tiny_policy_path, model_dir)
    (model_dir / "README.md").write_text("---\nlibrary_name: transformers\n---\n\n# a card\n")
    data = tmp_path / "test.jsonl"
    arithmetic_prompts().select(range(3)).to_json(str(data))
    assert main(["eval", "--model_name_or_path", str(model_dir), "--dataset_name", str(data), "--num_samples", "2",
                 "--max_new_tokens", "4", "--reward_funcs", "math_accuracy"]) == 0  # fmt: skip
    rows = json.loads((model_dir / "eval_results.json").read_text())
    assert {row["metric_type"] for row in rows} == {"mean_reward", "pass@1", "pass@2"}
    assert all(0.0 <= row["metric_value"] <= 1.0 for row in rows)
    from huggingface_hub import ModelCard

    card = ModelCard.load(model_dir / "README.md")
    assert {result.metric_type for result in card.data.eval_results} == {"mean_reward", "pass@1", "pass@2"}
    assert "model-index" in card.content and "# a card" in card.content


def test_pass_at_k_ships_as_an_offline_evaluate_metric():
    import evaluate

    from trl_ext.metrics import PASS_AT_K

    metric = evaluate.load(PASS_AT_K)
    predictions = [[True, False, False, False], [True, True, False, False], [False] * 4]
    result = metric.compute(predictions=predictions, references=[0, 0, 0], k=[1, 2, 4])
    # per problem pass@2: 1 − C(3,2)/C(4,2) = 0.5, 1 − C(2,2)/C(4,2) = 5/6, 0
    assert result == pytest.approx({"pass@1": 0.25, "pass@2": (0.5 + 5 / 6) / 3, "pass@4": 2 / 3})
    combined = evaluate.combine([metric])  # composes with users' other evaluate metrics
    assert combined.compute(predictions=predictions, references=[0, 0, 0])["pass@1"] == pytest.approx(0.25)


def test_eval_model_loads_in_the_requested_dtype_on_the_available_device(tiny_policy_path):
    from accelerate import PartialState

    from trl_ext.evaluation import load_eval_model

    model = load_eval_model(tiny_policy_path, "bfloat16")
    assert model.dtype == torch.bfloat16 and model.device == PartialState().device
    assert load_eval_model(tiny_policy_path, "float32").dtype == torch.float32
    with pytest.raises(ValueError, match="`dtype`='bf16'"):
        load_eval_model(tiny_policy_path, "bf16")


@pytest.fixture
def model_copy(tmp_path, tiny_policy_path):
    """A copy of the tiny model: `trl-ext eval` writes its results into a local model's folder."""
    import shutil

    return str(shutil.copytree(tiny_policy_path, tmp_path / "model"))


@pytest.fixture
def eval_data(tmp_path):
    data = tmp_path / "test.jsonl"
    arithmetic_prompts().select(range(2)).to_json(str(data))
    return str(data)


def test_eval_command_honours_dtype(model_copy, eval_data, monkeypatch):
    import trl_ext.evaluation as evaluation

    loaded = []
    original = evaluation.load_eval_model
    monkeypatch.setattr(evaluation, "load_eval_model", lambda *a, **k: loaded.append(original(*a, **k)) or loaded[-1])
    argv = ["eval", "--model_name_or_path", model_copy, "--dataset_name", eval_data, "--num_samples", "2",
            "--max_new_tokens", "3", "--dtype", "bfloat16"]  # fmt: skip
    assert main(argv) == 0
    assert [model.dtype for model in loaded] == [torch.bfloat16]


class FakeVLLM(types.ModuleType):
    """Stands in for vllm: LLM(model, dtype).generate(prompts, SamplingParams(n=...)) -> outputs with .text."""

    def __init__(self):
        super().__init__("vllm")
        self.engines = []
        fake = self

        class LLM:
            def __init__(self, model, dtype="auto", **kwargs):
                self.model, self.dtype = model, dtype
                fake.engines.append(self)

            def generate(self, prompts, params):
                self.prompts = prompts
                return [types.SimpleNamespace(outputs=[types.SimpleNamespace(text=f"\\boxed{{{i}}}")
                                                      for i in range(params.n)]) for _ in prompts]  # fmt: skip

        self.LLM = LLM
        self.SamplingParams = lambda **kwargs: types.SimpleNamespace(**kwargs)


def test_eval_command_generates_with_vllm_when_asked(model_copy, eval_data, monkeypatch, capsys):
    fake = FakeVLLM()
    monkeypatch.setitem(sys.modules, "vllm", fake)
    argv = ["eval", "--model_name_or_path", model_copy, "--dataset_name", eval_data, "--num_samples", "3",
            "--use_vllm", "--dtype", "bfloat16"]  # fmt: skip
    assert main(argv) == 0
    (engine,) = fake.engines
    assert engine.model == model_copy and engine.dtype == "bfloat16" and len(engine.prompts) == 2
    metrics = json.loads(capsys.readouterr().out.split("results written")[0])
    # the fake samples \boxed{0}, \boxed{1}, \boxed{2}: the first two prompts' answers are 0 and 1 (one sample each)
    assert metrics["pass@3"] == pytest.approx(1.0) and metrics["mean_reward"] == pytest.approx(1 / 3)


def test_use_vllm_without_vllm_is_a_clear_error(model_copy, eval_data, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm raises ImportError
    argv = ["eval", "--model_name_or_path", model_copy, "--dataset_name", eval_data, "--use_vllm"]
    with pytest.raises(ImportError, match="`--use_vllm` needs vLLM, which is not installed"):
        main(argv)
