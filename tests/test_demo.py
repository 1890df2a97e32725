"""The offline demo: deterministic task, warm start, and a short run of the real pipeline (the full demo takes
minutes; its margin is measured by the README command, not here)."""

from trl_ext.data.demo import arithmetic_prompts, arithmetic_sft_pairs
from trl_ext.demo import run_demo
from trl_ext.rewards import math_accuracy


def test_task_is_deterministic_and_its_gold_answers_verify():
    prompts = arithmetic_prompts()
    assert len(prompts) == 25 and prompts[7]["prompt"] == [{"role": "user", "content": "1+2"}]
    assert prompts[7]["solution"] == "\\boxed{3}"
    pairs = arithmetic_sft_pairs()
    completions = [row["completion"] for row in pairs]
    assert math_accuracy(completions, solution=prompts["solution"]) == [1.0] * 25
    wrong = [[{"role": "assistant", "content": "\\boxed{99}"}]] * 25
    assert math_accuracy(wrong, solution=prompts["solution"]) == [0.0] * 25


def test_short_demo_run_writes_model_card_and_plot(tmp_path):
    result = run_demo(output_dir=str(tmp_path), warmup_steps=20, steps=3)
    assert 0.0 <= result["start_reward"] <= 1.0 and 0.0 <= result["end_reward"] <= 1.0
    for name in ("model.safetensors", "tokenizer.json", "README.md", "training_curves.png"):
        assert (tmp_path / name).exists(), name
    assert "DAPO" in (tmp_path / "README.md").read_text()
