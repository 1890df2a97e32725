"""Optimizer-state re-initialisation and policy → reference copies (trl_ext.resets)."""

import copy

import pytest
import torch
from accelerate import Accelerator
from peft import LoraConfig, get_peft_model

from trl_ext.resets import (
    adapter_pairs,
    copy_policy_to_reference,
    load_reference,
    optimizer_chain,
    reset_optimizer_state,
    save_reference,
)


def small_net(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def train_steps(net, optimizer, steps, seed=1):
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(16, 4, generator=generator)
        loss = net(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


@pytest.mark.parametrize("optimizer_cls", [torch.optim.AdamW, torch.optim.Adam])
def test_reset_optimizer_state_zeroes_in_place_and_then_acts_like_a_fresh_optimizer(optimizer_cls):
    net = small_net()
    optimizer = optimizer_cls(net.parameters(), lr=1e-2)
    train_steps(net, optimizer, 3)
    state_tensors = [t for state in optimizer.state.values() for t in state.values()]
    assert any(t.abs().sum() > 0 for t in state_tensors)

    zeroed = reset_optimizer_state(optimizer)

    assert zeroed == len(state_tensors)
    for state in optimizer.state.values():
        for value in state.values():
            assert torch.count_nonzero(value) == 0
    # The very same tensor objects survive (never replaced or cleared: ZeRO checkpointing reads them).
    assert [t for state in optimizer.state.values() for t in state.values()][0] is state_tensors[0]

    twin = copy.deepcopy(net)
    fresh = optimizer_cls(twin.parameters(), lr=1e-2)
    train_steps(net, optimizer, 2, seed=5)
    train_steps(twin, fresh, 2, seed=5)
    for a, b in zip(net.parameters(), twin.parameters(), strict=True):
        assert torch.equal(a, b)


def test_reset_walks_the_accelerate_wrapper_chain_and_keeps_the_lr_schedule():
    accelerator = Accelerator(cpu=True)
    net = small_net()
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 - step / 10)
    net, wrapped, scheduler = accelerator.prepare(net, optimizer, scheduler)
    assert optimizer_chain(wrapped)[-1] is optimizer
    for _ in range(3):
        train_steps(net, wrapped, 1)
        scheduler.step()
    reset_optimizer_state(wrapped)
    assert all(torch.count_nonzero(t) == 0 for s in optimizer.state.values() for t in s.values())
    assert optimizer.param_groups[0]["lr"] == pytest.approx(1e-2 * (1 - 3 / 10))


def test_reset_counts_int_steps_and_group_steps():
    net = small_net()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    train_steps(net, optimizer, 2)
    first = next(iter(optimizer.state.values()))
    first["step"] = 7  # some optimizers keep python ints
    optimizer.param_groups[0]["step"] = 7  # DeepSpeed FusedAdam counts per group
    reset_optimizer_state(optimizer)
    assert first["step"] == 0 and optimizer.param_groups[0]["step"] == 0
    assert torch.count_nonzero(first["momentum_buffer"]) == 0


def test_reset_rejects_something_that_is_no_optimizer():
    with pytest.raises(ValueError, match="`optimizer`"):
        reset_optimizer_state(object())


def test_full_model_copy_is_exact_and_round_trips_through_a_checkpoint(tmp_path):
    policy, reference = small_net(0), small_net(1)
    copy_policy_to_reference(policy, reference)
    for a, b in zip(policy.parameters(), reference.parameters(), strict=True):
        assert torch.equal(a, b)
    save_reference(tmp_path, policy, reference)
    restored = small_net(2)
    assert load_reference(tmp_path, policy, restored)
    for a, b in zip(reference.parameters(), restored.parameters(), strict=True):
        assert torch.equal(a, b)
    assert not load_reference(tmp_path / "empty", policy, restored)


def peft_policy():
    base = torch.nn.Sequential()
    base.add_module("proj", torch.nn.Linear(4, 4))
    base.add_module("head", torch.nn.Linear(4, 1))
    torch.manual_seed(0)
    model = get_peft_model(base, LoraConfig(r=2, target_modules=["proj"], init_lora_weights=False))
    return model


def test_peft_copy_creates_a_frozen_ref_adapter_equal_to_the_policy_adapter(tmp_path):
    model = peft_policy()
    copy_policy_to_reference(model, None)
    assert "ref" in model.peft_config and model.active_adapter == "default"
    pairs = list(adapter_pairs(model))
    assert len(pairs) == 2
    for policy_param, ref_param in pairs:
        assert torch.equal(policy_param, ref_param)
        assert policy_param.requires_grad and not ref_param.requires_grad
    with torch.no_grad():
        for policy_param, _ in pairs:
            policy_param.add_(1.0)
    saved = [ref_param.detach().clone() for _, ref_param in adapter_pairs(model)]
    save_reference(tmp_path, model, None)
    copy_policy_to_reference(model, None)  # overwrite the ref adapter, then restore the saved one
    assert not torch.equal(saved[0], next(adapter_pairs(model))[1])
    assert load_reference(tmp_path, model, None)
    for expected, (_, ref_param) in zip(saved, adapter_pairs(model), strict=True):
        assert torch.equal(expected, ref_param)


def test_copy_without_any_reference_is_a_clear_error():
    with pytest.raises(ValueError, match="no reference model"):
        copy_policy_to_reference(small_net(), None)


def test_copy_works_in_a_process_where_accelerate_was_never_initialised():
    import subprocess
    import sys

    code = (
        "import torch\n"
        "from trl_ext.resets import copy_policy_to_reference\n"
        "a, b = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)\n"
        "copy_policy_to_reference(a, b)\n"
        "assert torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]


def test_reference_is_saved_in_bounded_shards_and_read_back_one_tensor_at_a_time(tmp_path, monkeypatch):
    import trl_ext.resets.weights as resets

    policy, reference = small_net(0), small_net(1)
    copy_policy_to_reference(policy, reference)
    largest = max(p.numel() * p.element_size() for p in reference.parameters())
    monkeypatch.setattr(resets, "MAX_SHARD_BYTES", largest)  # the largest tensor fills a file
    folder = save_reference(tmp_path, policy, reference)
    files = sorted(p.name for p in folder.glob("*.safetensors"))
    assert files == ["replicated-00000.safetensors", "replicated-00001.safetensors"]  # no per-rank files here
    assert all(p.stat().st_size < largest + 1024 for p in folder.glob("*.safetensors"))
    restored = small_net(2)
    assert load_reference(tmp_path, policy, restored)
    for a, b in zip(reference.parameters(), restored.parameters(), strict=True):
        assert torch.equal(a, b)


def test_only_the_writing_process_writes_replicated_weights(tmp_path):
    policy, reference = small_net(0), small_net(1)
    folder = save_reference(tmp_path, policy, reference, write=False)
    assert list(folder.iterdir()) == []
    assert not load_reference(tmp_path, policy, reference)


def test_a_reference_that_does_not_match_the_model_is_a_clear_error(tmp_path):
    policy, reference = small_net(0), small_net(1)
    save_reference(tmp_path, policy, reference)
    smaller = torch.nn.Sequential(torch.nn.Linear(4, 8))
    with pytest.raises(ValueError, match="does not match the model: unknown parameter `2.bias`"):
        load_reference(tmp_path, smaller, smaller)
    larger = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1), torch.nn.Linear(1, 1))
    with pytest.raises(ValueError, match=r"lacks parameters \['3.bias', '3.weight'\]"):
        load_reference(tmp_path, larger, larger)
