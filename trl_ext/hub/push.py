"""Upload a training output directory to the Hub."""

from __future__ import annotations

import os
from pathlib import Path

from huggingface_hub import HfApi


class HubPushError(RuntimeError):
    """A push to the Hub failed; the local output directory was not modified."""


# Never uploaded from the top level of an output directory: checkpoints (only with include_checkpoints, each in its
# own commit), DeepSpeed shards and optimizer/RNG states (they belong inside checkpoints), and "_*" as Trainer does.
TOP_LEVEL_IGNORE = ["checkpoint-*", "global_step*", "latest", "zero_to_fp32.py", "optimizer.pt", "scheduler.pt",
                    "scaler.pt", "rng_state*.pth", "critic_optimizer.pt", "critic_scheduler.pt", "_*"]  # fmt: skip


def checkpoint_folders(output_dir: str | os.PathLike) -> list[Path]:
    """The ``checkpoint-<step>`` folders of an output directory, oldest first."""
    found = [p for p in Path(output_dir).glob("checkpoint-*") if p.is_dir() and p.name.split("-")[-1].isdigit()]
    return sorted(found, key=lambda p: int(p.name.split("-")[-1]))


def push_folder(
    output_dir: str | os.PathLike,
    repo_id: str,
    token: str | None = None,
    private: bool | None = None,
    commit_message: str = "Upload with trl_ext",
    include_checkpoints: bool = False,
) -> str:
    """Upload a training output directory (model, tokenizer, critic/, card, plot, logs) to the Hub.

    Checkpoints go up only with ``include_checkpoints``, one commit each, as ``<repo>/checkpoint-<step>/`` with
    everything a resume needs. Raises HubPushError with the reason (no token, no network, permissions) and leaves
    every local file as it was.
    """
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        raise HubPushError(f"Nothing to push: `{output_dir}` is not a directory.")
    api = HfApi(token=token)
    try:
        api.create_repo(repo_id, private=private, exist_ok=True)
        commit = api.upload_folder(
            folder_path=str(output_dir), repo_id=repo_id, commit_message=commit_message,
            ignore_patterns=TOP_LEVEL_IGNORE,
        )  # fmt: skip
        for checkpoint in checkpoint_folders(output_dir) if include_checkpoints else []:
            api.upload_folder(
                folder_path=str(checkpoint), path_in_repo=checkpoint.name, repo_id=repo_id,
                commit_message=f"{commit_message}: {checkpoint.name}",
            )  # fmt: skip
    except Exception as error:  # the hub client raises many types (HTTP, offline mode, auth, OS errors)
        raise HubPushError(
            f"Could not push `{output_dir}` to the Hub repo `{repo_id}`: {type(error).__name__}: {error}. "
            "The local output is intact; check your token (`hf auth login` or HF_TOKEN), your network and "
            "HF_HUB_OFFLINE, then run `trl-ext push` again."
        ) from error
    return str(getattr(commit, "commit_url", commit))
