"""Uploads to the Hub, intercepted offline: a checkpoint leaves only once every trl_ext file of it is written (all
hub strategies), `push_folder` sends checkpoints only when asked, and the card's loading snippet runs as written."""

import re
from concurrent.futures import Future
from pathlib import Path

import pytest
from huggingface_hub import HfApi, RepoUrl

from tests._reset_trainers import length_reward, prompts, tiny_config
from tests.scripts.ppo_common import even_token_reward, tiny_ppo_config
from trl_ext.callbacks import RESET_STATE_FILE
from trl_ext.cli import main
from trl_ext.hub import push_folder
from trl_ext.resets import REFERENCE_DIR, REFERENCE_INDEX
from trl_ext.trainers.grpo import DYNAMIC_SAMPLING_STATE_FILE, GRPOTrainer
from trl_ext.trainers.ppo import CRITIC_DIR, CRITIC_OPTIMIZER_NAME, PPO_STATE_NAME, PPOTrainer


class FakeHub:
    """Stands in for HfApi's network calls; records the files each upload would find when it starts."""

    def __init__(self, monkeypatch):
        self.uploads: list[dict] = []
        monkeypatch.setattr(HfApi, "create_repo", self.create_repo)
        monkeypatch.setattr(HfApi, "upload_folder", self.upload_folder)

    @staticmethod
    def create_repo(api, repo_id, **kwargs):
        return RepoUrl(f"https://huggingface.co/{repo_id}")

    def upload_folder(self, *, repo_id, folder_path, path_in_repo=None, run_as_future=False, **kwargs):
        root = Path(folder_path)
        files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
        self.uploads.append({"path_in_repo": path_in_repo or "", "files": files, "folder": str(root), **kwargs})
        if not run_as_future:
            return f"https://huggingface.co/{repo_id}/commit/fake"
        done = Future()
        done.set_result("fake")
        return done

    def checkpoint_uploads(self) -> list[dict]:
        return [u for u in self.uploads if re.match(r"(last-checkpoint|checkpoint-\d+)$", u["path_in_repo"])]


HUB = dict(push_to_hub=True, hub_model_id="someone/tiny", save_strategy="steps", save_steps=1, max_steps=2)
GRPO_FILES = {
    f"{REFERENCE_DIR}/{REFERENCE_INDEX}",
    f"{REFERENCE_DIR}/replicated-00000.safetensors",
    RESET_STATE_FILE,
    DYNAMIC_SAMPLING_STATE_FILE,
    "trainer_state.json",
    "optimizer.pt",
}


@pytest.mark.parametrize("strategy", ["checkpoint", "all_checkpoints", "every_save"])
def test_checkpoint_upload_starts_after_every_trl_ext_file_is_written(
    strategy, tmp_path, tiny_policy_path, monkeypatch
):
    hub = FakeHub(monkeypatch)
    args = tiny_config(tmp_path, ref_reset_steps=1, dynamic_sampling=True, hub_strategy=strategy, **HUB)
    GRPOTrainer(model=tiny_policy_path, reward_funcs=length_reward, args=args, train_dataset=prompts()).train()
    model_uploads = [u for u in hub.uploads if u["path_in_repo"] == ""]
    assert len(model_uploads) == 2 and all("model.safetensors" in u["files"] for u in model_uploads)
    assert all(u["ignore_patterns"] == ["_*", "checkpoint-*"] for u in model_uploads)
    checkpoints = hub.checkpoint_uploads()
    assert len(checkpoints) == (0 if strategy == "every_save" else 2)
    for upload in checkpoints:
        assert set(upload["files"]) >= GRPO_FILES, upload


def test_ppo_checkpoint_upload_holds_the_critic_and_its_optimizer(tmp_path, tiny_policy_path, monkeypatch):
    hub = FakeHub(monkeypatch)
    args = tiny_ppo_config(tmp_path, hub_strategy="checkpoint", **HUB)
    trainer = PPOTrainer(model=tiny_policy_path, reward_funcs=even_token_reward, args=args, train_dataset=prompts())
    trainer.train()
    (upload,) = hub.checkpoint_uploads()[-1:]
    assert {PPO_STATE_NAME, CRITIC_OPTIMIZER_NAME, f"{CRITIC_DIR}/model.safetensors"} <= set(upload["files"])
    trainer.push_to_hub()
    final = hub.uploads[-1]
    assert {"README.md", f"{CRITIC_DIR}/model.safetensors", "model.safetensors"} <= set(final["files"])


@pytest.fixture
def output_with_checkpoints(tmp_path, tiny_policy_path):
    """A finished run's folder with two checkpoints and stray DeepSpeed/optimizer files at its top level."""
    args = tiny_config(tmp_path / "out", save_strategy="steps", save_steps=1, max_steps=2)
    trainer = GRPOTrainer(model=tiny_policy_path, reward_funcs=length_reward, args=args, train_dataset=prompts())
    trainer.train()
    trainer.save_model()
    trainer.create_model_card()
    root = Path(args.output_dir)
    for name in ("global_step2/mp_rank_00_model_states.pt", "latest", "zero_to_fp32.py", "optimizer.pt"):
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_text("stray")
    return root


def _uploaded(hub: FakeHub) -> dict[str, set[str]]:
    """path_in_repo -> files that the upload sends after its ignore patterns."""
    from huggingface_hub.utils import filter_repo_objects

    return {
        u["path_in_repo"]: set(filter_repo_objects(u["files"], ignore_patterns=u.get("ignore_patterns")))
        for u in hub.uploads
    }


def test_push_folder_sends_the_model_and_checkpoints_only_when_asked(output_with_checkpoints, monkeypatch):
    hub = FakeHub(monkeypatch)
    push_folder(output_with_checkpoints, "someone/tiny", token="hf_fake")
    (files,) = _uploaded(hub).values()
    assert {"model.safetensors", "config.json", "tokenizer.json", "README.md"} <= files
    assert not {f for f in files if f.startswith(("checkpoint-", "global_step", "optimizer", "latest", "zero_to"))}

    hub.uploads.clear()
    push_folder(output_with_checkpoints, "someone/tiny", token="hf_fake", include_checkpoints=True)
    uploaded = _uploaded(hub)
    assert set(uploaded) == {"", "checkpoint-1", "checkpoint-2"}
    assert uploaded[""] == files
    assert {"optimizer.pt", "trainer_state.json", "model.safetensors"} <= uploaded["checkpoint-2"]

    hub.uploads.clear()
    main(["push", str(output_with_checkpoints), "someone/tiny", "--include-checkpoints"])
    assert _uploaded(hub) == uploaded


def _python_blocks(card: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", card, flags=re.DOTALL)


def test_card_snippets_load_the_pushed_folder(tmp_path, tiny_policy_path):
    args = tiny_ppo_config(tmp_path, max_steps=1)
    trainer = PPOTrainer(model=tiny_policy_path, reward_funcs=even_token_reward, args=args, train_dataset=prompts())
    trainer.train()
    trainer.save_model()
    trainer.create_model_card()
    blocks = _python_blocks((tmp_path / "README.md").read_text())
    assert len(blocks) == 2 and str(tmp_path) in blocks[0]  # the policy, then the critic
    namespace: dict = {}
    for block in blocks:
        exec(block, namespace)
    assert type(namespace["model"]).__name__ == "Qwen2ForCausalLM"
    assert namespace["critic"].config.num_labels == 1 and namespace["tokenizer"].pad_token is not None
