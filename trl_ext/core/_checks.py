"""Argument checks shared by the core formulas (each error names the offending argument)."""

from __future__ import annotations

import torch


def as_groups(rewards: torch.Tensor, group_size: int, *, name: str = "rewards") -> torch.Tensor:
    """Reshape a flat (N,) tensor with contiguous groups into (N // group_size, group_size)."""
    if not isinstance(rewards, torch.Tensor) or rewards.dim() != 1:
        raise ValueError(f"`{name}` must be a 1-D tensor of shape (N,), got {_describe(rewards)}.")
    if not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"`group_size` must be a positive int, got {group_size!r}.")
    if rewards.numel() % group_size != 0:
        raise ValueError(
            f"`group_size`={group_size} does not divide the number of {name} N={rewards.numel()}; "
            "groups must be contiguous and complete."
        )
    return rewards.view(-1, group_size)


def check_same_shape(**tensors: torch.Tensor) -> None:
    """Raise a ValueError naming the first argument whose shape differs from the first one's."""
    names = list(tensors)
    reference = tensors[names[0]]
    for name in names[1:]:
        if tensors[name].shape != reference.shape:
            raise ValueError(
                f"`{name}` has shape {tuple(tensors[name].shape)} but `{names[0]}` has shape "
                f"{tuple(reference.shape)}; they must match."
            )


def check_2d(name: str, tensor: torch.Tensor) -> None:
    if not isinstance(tensor, torch.Tensor) or tensor.dim() != 2:
        raise ValueError(f"`{name}` must be a 2-D tensor of shape (B, T), got {_describe(tensor)}.")


def check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"Unknown `{name}`={value!r}; expected one of {', '.join(map(repr, choices))}.")


def _describe(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    return type(value).__name__
