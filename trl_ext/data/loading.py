"""Dataset loading for the command line: a Hub id, a `save_to_disk` directory, a data directory or a data file.

A split may be sliced as on the Hub (``train[512:]``, ``train[:10%]``) whatever the source: the recipes hold out an
evaluation slice of the training data that way (``dataset_train_split: train[512:]``, ``dataset_test_split:
train[:512]``), which must work for a local file too.
"""

from __future__ import annotations

import os
import re

DATA_FILE_BUILDERS = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv"}
_SPLIT_NAME = re.compile(r"^\s*(\w+(?:\.\w+)*)")


def split_name(split: str) -> str:
    """The split a split expression reads: ``train[512:]`` -> ``train`` (``datasets`` names must match \\w+(.\\w+)*)."""
    match = _SPLIT_NAME.match(split)
    if match is None:
        raise ValueError(f"Split {split!r} does not start with a split name; write e.g. 'train' or 'train[512:]'.")
    return match.group(1)


def load_any_dataset(name: str, config: str | None = None, split: str = "train"):
    """A datasets.Dataset from a Hub id, a `save_to_disk` directory, a data directory, or a single data file; ``split``
    may carry a slice (``train[512:]``)."""
    import datasets

    extension = os.path.splitext(name)[1].lower()
    if os.path.isfile(name):
        if extension not in DATA_FILE_BUILDERS:
            raise ValueError(f"`dataset_name`={name!r}: unsupported file type; use {', '.join(DATA_FILE_BUILDERS)}.")
        # the file becomes the split the expression names; the slice is then applied by `datasets` itself
        return datasets.load_dataset(DATA_FILE_BUILDERS[extension], data_files={split_name(split): name}, split=split)
    if os.path.isdir(name) and os.path.exists(os.path.join(name, "dataset_info.json")):
        return _sliced(datasets.load_from_disk(name), split)
    return datasets.load_dataset(name, config, split=split)


def _sliced(dataset, split: str):
    """A saved Dataset (taken as the split named) sliced as ``split`` says; with a slice, its rows in that order."""
    import datasets

    if "[" not in split and "+" not in split:
        return dataset
    instructions = datasets.ReadInstruction.from_spec(split).to_absolute({split_name(split): len(dataset)})
    pieces = [dataset.select(range(part.from_, part.to)) for part in instructions]
    return pieces[0] if len(pieces) == 1 else datasets.concatenate_datasets(pieces)
