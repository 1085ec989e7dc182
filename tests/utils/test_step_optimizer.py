"""`step_optimizer`: a fused Adam stepped through torch's kernel is bit-identical to
`optimizer.step()`, and every optimiser the kernel path does not cover steps itself."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_pre_hook

from corral.utils import torch_utils
from corral.utils.torch_utils import step_optimizer


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))


def _pair(make: Callable[[list], torch.optim.Optimizer]) -> tuple:
    """Two identical nets, each with its own optimiser made by `make`."""
    a = _net()
    b = copy.deepcopy(a)
    return a, make(list(a.parameters())), b, make(list(b.parameters()))


def _train(net: nn.Module, opt: torch.optim.Optimizer, step: Callable, steps: int) -> None:
    gen = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(8, 4, generator=gen)
        for group in opt.param_groups:  # a schedule moving the learning rate
            group["lr"] = group["lr"] * 0.7
        opt.zero_grad(set_to_none=True)
        net(x).pow(2).mean().backward()
        step(opt)


def _same(a: nn.Module, opt_a: torch.optim.Optimizer, b: nn.Module, opt_b) -> None:
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)
    sa, sb = opt_a.state_dict(), opt_b.state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    assert list(sa["state"]) == list(sb["state"])
    for key, state in sa["state"].items():
        assert list(state) == list(sb["state"][key])
        for name, value in state.items():
            other = sb["state"][key][name]
            assert (value.dtype, value.device) == (other.dtype, other.device), (key, name)
            assert torch.equal(value, other), (key, name)


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"amsgrad": True},
        {"weight_decay": 0.1},
        {"weight_decay": 0.1, "decoupled_weight_decay": True},
        {"maximize": True, "betas": (0.8, 0.95), "eps": 1e-5},
    ],
    ids=["plain", "amsgrad", "l2", "decoupled", "maximize"],
)
def test_fused_adam_bit_identical_to_its_own_step(kwargs: dict) -> None:
    if "decoupled_weight_decay" in kwargs and "decoupled_weight_decay" not in (
        torch.optim.Adam.__init__.__code__.co_varnames
    ):
        pytest.skip("this torch's Adam has no decoupled_weight_decay")
    a, opt_a, b, opt_b = _pair(lambda ps: torch.optim.Adam(ps, lr=1e-2, fused=True, **kwargs))
    calls = []
    kernel = torch_utils._fused_adam_calls

    def counted(opt):
        result = kernel(opt)
        calls.append(result is not None)
        return result

    torch_utils._fused_adam_calls = counted
    try:
        _train(a, opt_a, lambda opt: opt.step(), 6)
        _train(b, opt_b, step_optimizer, 6)  # the first step (state made here) included
    finally:
        torch_utils._fused_adam_calls = kernel
    assert calls == [True] * 6  # the kernel path was taken, not optimizer.step()
    _same(a, opt_a, b, opt_b)


@pytest.mark.parametrize("idle_steps", [(1, 3), (0, 2)], ids=["after-first", "from-first"])
def test_groups_with_and_without_gradients(idle_steps: tuple[int, ...]) -> None:
    """Two groups at their own learning rates; a step where one group has no gradients
    (TD3's delayed actor) leaves that group's weights and state as they were, also where
    that group's first step comes after the other's."""

    def make(ps: list) -> torch.optim.Optimizer:
        return torch.optim.Adam(
            [{"params": ps[:2], "lr": 1e-2}, {"params": ps[2:], "lr": 3e-3}], fused=True
        )

    a, opt_a, b, opt_b = _pair(make)
    for net, opt, step in ((a, opt_a, lambda o: o.step()), (b, opt_b, step_optimizer)):
        x = torch.randn(8, 4, generator=torch.Generator().manual_seed(2))
        for i in range(4):
            opt.zero_grad(set_to_none=True)
            net(x).pow(2).mean().backward()
            if i in idle_steps:
                for p in opt.param_groups[0]["params"]:
                    p.grad = None
            step(opt)
    _same(a, opt_a, b, opt_b)


def _fallbacks() -> list[tuple[str, Callable[[list], torch.optim.Optimizer]]]:
    hooked = []

    def with_hook(ps: list) -> torch.optim.Optimizer:
        opt = torch.optim.Adam(ps, lr=1e-2, fused=True)
        opt.register_step_post_hook(lambda *_: hooked.append(1))
        return opt

    return [
        ("not fused", lambda ps: torch.optim.Adam(ps, lr=1e-2, fused=False)),
        ("sgd", lambda ps: torch.optim.SGD(ps, lr=1e-2)),
        ("adam subclass", lambda ps: type("MyAdam", (torch.optim.Adam,), {})(ps, fused=True)),
        ("tensor lr", lambda ps: torch.optim.Adam(ps, lr=torch.tensor(1e-2), fused=True)),
        ("step hook", with_hook),
    ]


@pytest.mark.parametrize("name,make", _fallbacks(), ids=[n for n, _ in _fallbacks()])
def test_other_optimizers_step_themselves(name: str, make: Callable) -> None:
    a, opt_a, b, opt_b = _pair(make)
    _train(a, opt_a, lambda opt: opt.step(), 3)
    _train(b, opt_b, step_optimizer, 3)
    assert torch_utils._fused_adam_calls(opt_b) is None
    _same(a, opt_a, b, opt_b)


def test_patched_step_uses_optimizer_step() -> None:
    net = _net()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2, fused=True)
    net(torch.ones(2, 4)).sum().backward()
    step_optimizer(opt)
    called = []
    original = opt.step
    opt.step = lambda *a, **k: called.append(1) or original(*a, **k)  # e.g. an LR scheduler
    step_optimizer(opt)
    assert called == [1]


def test_global_hook_falls_back() -> None:
    net = _net()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2, fused=True)
    net(torch.ones(2, 4)).sum().backward()
    opt.step()
    seen = []
    handle = register_optimizer_step_pre_hook(lambda *_: seen.append(1))
    try:
        step_optimizer(opt)
    finally:
        handle.remove()
    assert seen == [1]


@pytest.mark.parametrize(
    ("kwargs", "plain"),
    [({}, True), ({"momentum": 0.9}, False), ({"weight_decay": 0.1}, False)],
    ids=["plain", "momentum", "weight-decay"],
)
def test_plain_sgd_steps_here_bit_identical(kwargs: dict, plain: bool) -> None:
    a, opt_a, b, opt_b = _pair(lambda ps: torch.optim.SGD(ps, lr=0.1, **kwargs))
    taken = []
    fast = torch_utils._plain_sgd_step

    def counted(opt):
        result = fast(opt)
        taken.append(result)
        return result

    torch_utils._plain_sgd_step = counted
    try:
        _train(a, opt_a, lambda opt: opt.step(), 3)
        _train(b, opt_b, step_optimizer, 3)
    finally:
        torch_utils._plain_sgd_step = fast
    assert taken == [plain] * 3
    _same(a, opt_a, b, opt_b)
