"""Models from anywhere: an adapter repo/directory as the model trains the adapter (API and CLI); ModelConfig flags
reach the model as `trl grpo` passes them, and flags that cannot apply are errors."""

import json

import pytest
import torch
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from tests._reset_trainers import length_reward, prompts, tiny_config
from trl_ext.cli import main, train
from trl_ext.models import adapter_config_file
from trl_ext.trainers.grpo import GRPOTrainer

TINY_RUN = [
    "--max_steps", "1", "--per_device_train_batch_size", "4", "--max_completion_length", "4", "--num_generations",
    "4", "--bf16", "False", "--gradient_checkpointing", "False", "--report_to", "none", "--save_strategy", "no",
    "--disable_tqdm", "True", "--use_cpu", "True", "--learning_rate", "0.05",
]  # fmt: skip
ADAPTER_FILE = "adapter_model.safetensors"


@pytest.fixture(scope="module")
def adapter_dir(tmp_path_factory, tiny_policy_path):
    """A published LoRA adapter for the tiny policy: non-zero weights, so it changes the model's outputs."""
    base = AutoModelForCausalLM.from_pretrained(tiny_policy_path)
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    path = tmp_path_factory.mktemp("adapter")
    get_peft_model(base, config).save_pretrained(str(path))
    assert json.loads((path / "adapter_config.json").read_text())["base_model_name_or_path"] == tiny_policy_path
    return path


@pytest.fixture(scope="module")
def prompt_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "prompts.jsonl"
    prompts().to_json(str(path))
    return str(path)


def lora_weights(model: PeftModel, adapter: str = "default") -> dict[str, torch.Tensor]:
    return {
        name.replace(f".{adapter}", ""): p.detach().clone()
        for name, p in model.named_parameters()
        if f".{adapter}." in name and "lora_" in name
    }


def saved_lora(path) -> dict[str, torch.Tensor]:
    return load_file(str(path / ADAPTER_FILE))


def test_an_adapter_directory_as_the_model_trains_the_adapter_and_keeps_it_as_reference(
    adapter_dir, tmp_path, tiny_policy_path
):
    args = tiny_config(tmp_path, max_steps=2, beta=0.5)
    trainer = GRPOTrainer(model=str(adapter_dir), reward_funcs=length_reward, args=args, train_dataset=prompts())
    assert isinstance(trainer.model, PeftModel)
    start = lora_weights(trainer.model)
    base_before = {n: p.clone() for n, p in trainer.model.named_parameters() if "lora_" not in n}
    assert len(start) == 2 * 2 * 2  # 2 layers x (q, v) x (A, B): the saved adapter, loaded
    for name, value in saved_lora(adapter_dir).items():  # loaded as published, not re-initialised
        key = name.replace("base_model.model.", "").replace(".weight", "")
        assert any(key in n and torch.equal(t, value) for n, t in start.items()), name
    trainer.train()
    after = lora_weights(trainer.model)
    assert any(not torch.equal(start[n], after[n]) for n in start)  # the adapter trained
    assert all(p.requires_grad is False for n, p in trainer.model.named_parameters() if "lora_" not in n)
    assert all(torch.equal(p, base_before[n]) for n, p in trainer.model.named_parameters() if "lora_" not in n)
    reference = lora_weights(trainer.model, "ref")  # TRL's frozen copy of the adapter as it was loaded
    assert reference.keys() == start.keys() and all(torch.equal(reference[n], start[n]) for n in start)


def test_cli_trains_an_adapter_and_saves_the_adapter(adapter_dir, tmp_path, prompt_file):
    trainer = train("grpo", ["--model_name_or_path", str(adapter_dir), "--dataset_name", prompt_file, "--output_dir",
                             str(tmp_path), *TINY_RUN] + ["--reward_funcs", "tests._reset_trainers:length_reward"])  # fmt: skip
    assert isinstance(trainer.model, PeftModel)
    trained, published = saved_lora(tmp_path), saved_lora(adapter_dir)
    assert trained.keys() == published.keys()
    assert any(not torch.equal(trained[n], published[n]) for n in trained)


def test_cli_dtype_bfloat16_gives_a_bfloat16_model(tiny_policy_path, tmp_path, prompt_file):
    trainer = train("grpo", ["--model_name_or_path", tiny_policy_path, "--dataset_name", prompt_file, "--output_dir",
                             str(tmp_path), "--dtype", "bfloat16", "--attn_implementation", "eager", *TINY_RUN,
                             "--reward_funcs", "tests._reset_trainers:length_reward"])  # fmt: skip
    assert trainer.model.dtype == torch.bfloat16
    assert trainer.model.config._attn_implementation == "eager"


def test_an_adapter_whose_base_cannot_be_found_is_a_clear_error(adapter_dir, tmp_path):
    broken = tmp_path / "broken-adapter"
    broken.mkdir()
    config = json.loads((adapter_dir / "adapter_config.json").read_text())
    (broken / "adapter_config.json").write_text(json.dumps({**config, "base_model_name_or_path": "/nowhere/base"}))
    (broken / ADAPTER_FILE).write_bytes((adapter_dir / ADAPTER_FILE).read_bytes())
    args = tiny_config(tmp_path / "out")
    with pytest.raises(ValueError, match=r"`model`=.*broken-adapter.*base model '/nowhere/base'.*cannot be found"):
        GRPOTrainer(model=str(broken), reward_funcs=length_reward, args=args, train_dataset=prompts())


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--load_in_4bit", "True"], "`load_in_4bit`/`load_in_8bit` quantise the base model"),
        (["--use_peft", "True"], "holds a PEFT adapter, which is trained as it is"),
    ],
)
def test_flags_that_cannot_apply_are_errors(flags, message, adapter_dir, tiny_policy_path, tmp_path):
    model = str(adapter_dir) if "--use_peft" in flags else tiny_policy_path
    argv = ["grpo", "--model_name_or_path", model, "--dataset_name", "unused", "--output_dir", str(tmp_path),
            "--use_cpu", "True", "--bf16", "False", *flags]  # fmt: skip
    with pytest.raises(ValueError, match=message):
        main(argv)


def test_adapter_detection(adapter_dir, tiny_policy_path):
    assert adapter_config_file(str(adapter_dir)).endswith("adapter_config.json")
    assert adapter_config_file(tiny_policy_path) is None


def test_dpo_trains_an_adapter_against_the_adapter_as_reference(adapter_dir, tmp_path):
    from datasets import Dataset

    from trl_ext import DPOConfig, DPOTrainer

    pairs = Dataset.from_dict({"prompt": ["1+1", "2+2"] * 2, "chosen": [" 2", " 4"] * 2, "rejected": [" 3", " 5"] * 2})
    args = DPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=2, max_steps=2, learning_rate=5e-2,
                     use_cpu=True, bf16=False, gradient_checkpointing=False, report_to=[], save_strategy="no")  # fmt: skip
    trainer = DPOTrainer(model=str(adapter_dir), args=args, train_dataset=pairs)
    assert isinstance(trainer.model, PeftModel)
    start = lora_weights(trainer.model)
    trainer.train()
    assert any(not torch.equal(start[n], t) for n, t in lora_weights(trainer.model).items())
    reference = lora_weights(trainer.model, "ref")  # the published adapter, frozen, is DPO's reference
    assert reference.keys() == start.keys() and all(torch.equal(reference[n], start[n]) for n in start)


def test_ppo_trains_an_adapter_with_a_critic_from_its_base(adapter_dir, tmp_path, tiny_policy_path):
    from tests.scripts.ppo_common import even_token_reward, tiny_ppo_config
    from trl_ext.trainers.ppo import PPOTrainer

    args = tiny_ppo_config(tmp_path, max_steps=1)
    trainer = PPOTrainer(model=str(adapter_dir), reward_funcs=even_token_reward, args=args, train_dataset=prompts())
    start = lora_weights(trainer.model)
    trainer.train()
    assert any(not torch.equal(start[n], t) for n, t in lora_weights(trainer.model).items())
    assert trainer.value_model.config._name_or_path == tiny_policy_path
