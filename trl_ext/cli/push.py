"""`trl-ext push`: upload an output directory to the Hub."""

from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> None:
    from trl_ext.hub import HubPushError, push_folder

    try:
        checkpoints = args.include_checkpoints
        print(push_folder(args.output_dir, args.repo_id, private=args.private, include_checkpoints=checkpoints))
    except HubPushError as error:
        raise SystemExit(f"trl-ext push: {error}") from None
