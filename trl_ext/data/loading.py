"""Dataset loading for the command line: a Hub id, a `save_to_disk` directory, a data directory or a data file."""

from __future__ import annotations

import os

DATA_FILE_BUILDERS = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv"}


def load_any_dataset(name: str, config: str | None = None, split: str = "train"):
    """A datasets.Dataset from a Hub id, a `save_to_disk` directory, a data directory, or a single data file."""
    import datasets

    extension = os.path.splitext(name)[1].lower()
    if os.path.isfile(name):
        if extension not in DATA_FILE_BUILDERS:
            raise ValueError(f"`dataset_name`={name!r}: unsupported file type; use {', '.join(DATA_FILE_BUILDERS)}.")
        return datasets.load_dataset(DATA_FILE_BUILDERS[extension], data_files={split: name}, split=split)
    if os.path.isdir(name) and os.path.exists(os.path.join(name, "dataset_info.json")):
        return datasets.load_from_disk(name)
    return datasets.load_dataset(name, config, split=split)
