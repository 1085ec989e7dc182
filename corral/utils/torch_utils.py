"""RLlib 1.13's torch helpers (``ray.rllib.utils.torch_utils``)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.optim import optimizer as torch_optimizer

from corral.utils._nest import flatten, map_structure
from corral.utils.deprecation import Deprecated
from corral.utils.lazy_dynamo import defer_dynamo_import
from corral.utils.typing import TensorStructType, TensorType

if TYPE_CHECKING:
    from corral.policy.torch_policy import TorchPolicy

__all__ = [
    "FLOAT_MAX",
    "FLOAT_MIN",
    "Swish",
    "apply_grad_clipping",
    "atanh",
    "concat_multi_gpu_td_errors",
    "convert_to_non_torch_type",
    "convert_to_torch_tensor",
    "explained_variance",
    "flatten_inputs_to_1d_tensor",
    "global_norm",
    "huber_loss",
    "l2_loss",
    "make_adam",
    "minimize_and_clip",
    "one_hot",
    "reduce_mean_ignore_inf",
    "sequence_mask",
    "set_torch_seed",
    "softmax_cross_entropy_with_logits",
    "step_optimizer",
    "steps_plainly",
]

# Stand-ins for -inf/inf logits (e.g. masked actions): -inf/inf would make NaNs in backprop.
FLOAT_MIN = -3.4e38
FLOAT_MAX = 3.4e38

_SMALL_NUMBER = 1e-6

# corral's torch code imports this module: its optimisers then import torch's compiler only
# when something compiles (`torch_compile_learner`), not when the first one is built.
defer_dynamo_import()


def apply_grad_clipping(
    policy: TorchPolicy, optimizer: torch.optim.Optimizer, loss: TensorType
) -> dict[str, TensorType]:
    """Clips the gradients of each of `optimizer`'s parameter groups to ``config["grad_clip"]``.

    Returns:
        ``{"grad_gnorm": norm before clipping}`` (of the last group), or ``{}`` when
        ``grad_clip`` is not set.
    """
    info: dict[str, Any] = {}
    clip = policy.config.get("grad_clip")
    if clip:
        for group in optimizer.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if params:
                info["grad_gnorm"] = float(nn.utils.clip_grad_norm_(params, clip))
    return info


@Deprecated(old="corral.utils.torch_utils.atanh", new="torch.atanh", error=False)
def atanh(x: TensorType) -> TensorType:
    """Inverse tanh, clamped away from +-1."""
    return 0.5 * torch.log((1 + x).clamp(min=_SMALL_NUMBER) / (1 - x).clamp(min=_SMALL_NUMBER))


def concat_multi_gpu_td_errors(policy: TorchPolicy) -> dict[str, TensorType]:
    """The TD errors the policy's model towers stored in ``tower_stats``, concatenated.

    Also sets ``policy.td_error``. corral trains one tower (``policy.model``) unless the
    policy has ``model_gpu_towers``.
    """
    towers = getattr(policy, "model_gpu_towers", None) or [policy.model]
    device = getattr(policy, "device", "cpu")
    td_error = torch.cat(
        [
            getattr(t, "tower_stats", {}).get("td_error", torch.tensor([0.0])).to(device)
            for t in towers
        ],
        dim=0,
    )
    policy.td_error = td_error
    return {"td_error": td_error, "mean_td_error": torch.mean(td_error)}


def _to_numpy(item: Any) -> Any:
    if isinstance(item, torch.Tensor):
        return item.cpu().item() if item.dim() == 0 else item.detach().cpu().numpy()
    return item


@Deprecated(new="corral.utils.numpy.convert_to_numpy", error=False)
def convert_to_non_torch_type(stats: TensorStructType) -> TensorStructType:
    """Tensors in a structure -> numpy arrays (0-d tensors -> Python numbers)."""
    return map_structure(_to_numpy, stats)


def convert_to_torch_tensor(x: TensorStructType, device: Any = None) -> TensorStructType:
    """Every leaf of `x` as a torch tensor (float64 becomes float32), on `device` if given.

    Object arrays (e.g. info dicts) stay as they are; ``RepeatedValues`` keep their lengths.
    """
    from corral.models.repeated_values import RepeatedValues

    def convert(item: Any) -> Any:
        if torch.is_tensor(item):
            return item if device is None else item.to(device)
        if isinstance(item, RepeatedValues):
            return RepeatedValues(map_structure(convert, item.values), item.lengths, item.max_len)
        if isinstance(item, np.ndarray):
            if item.dtype == object:
                return item
            if not item.flags.writeable:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    tensor = torch.from_numpy(item)
            else:
                tensor = torch.from_numpy(item)
        else:
            tensor = torch.from_numpy(np.asarray(item))
        if tensor.dtype == torch.double:
            tensor = tensor.float()
        return tensor if device is None else tensor.to(device)

    return map_structure(convert, x)


def clear_grads(params: Iterable[torch.Tensor]) -> None:
    """Drops the gradients of `params`: `optimizer.zero_grad(set_to_none=True)` without
    its profiler annotation (a `record_function` region per call, which costs more than
    the loop itself on a learner's hot path)."""
    for param in params:
        param.grad = None


def make_adam(params: Any, options: dict | None = None, **defaults: Any) -> torch.optim.Adam:
    """`torch.optim.Adam(params, **defaults, **options)` on torch's fused kernel, unless
    `options` picks the implementation (`fused` or `foreach`).

    This is the Adam the built-in policies make. One kernel for all parameters beats a
    Python loop over them for small RL models, and `step_optimizer` steps a fused Adam
    directly.

    Args:
        params: the parameters, or parameter groups.
        options: the config's `optimizer` dict (Adam's keyword arguments, e.g.
            `{"eps": 1e-5}`), or None.
        **defaults: the algorithm's own arguments (e.g. `lr`). A key in both raises
            Adam's TypeError for a repeated argument.
    """
    options = dict(options or {})
    if "foreach" not in options:
        options.setdefault("fused", True)
    return torch.optim.Adam(params, **defaults, **options)


def step_optimizer(optimizer: torch.optim.Optimizer) -> None:
    """`optimizer.step()`; for a fused `torch.optim.Adam` in its ordinary state, the same
    arithmetic straight through torch's fused kernel (and for a plain SGD, see
    `_plain_sgd_step`).

    `Adam.step` spends more time in Python than in the kernel for a learner's small
    networks (a 256x256 Q-network on one CPU thread: about 83 us a step, against 55 us
    this way): a profiler region and the hook calls, a state lookup per
    parameter, and grouping the tensors by device and dtype. The kernel here is called
    with the same tensors and hyperparameters, so the weights and the optimiser state are
    the same to the bit (tests/utils/test_step_optimizer.py). Anything else takes
    `optimizer.step()`: another optimiser or a subclass, step hooks (global or the
    optimiser's own), a patched `step`, a `GradScaler`'s attributes, a parameter group
    that is not fused or is differentiable or capturable, tensor hyperparameters, a
    parameter the fused kernel does not take, or a group whose parameters do not share one
    device and dtype. A parameter's first step has Adam make its state (`_init_group`)
    and steps it through the kernel too, so the optimiser never needs `Adam.step`, which
    imports `torch._dynamo` on every call (see `corral.utils.lazy_dynamo`). The torch
    profiler shows no `Optimizer.step#Adam.step` region for the fast steps.
    """
    if _plain_sgd_step(optimizer):
        return
    calls = _fused_adam_calls(optimizer)
    if calls is None:
        optimizer.step()
        return
    with torch.no_grad():
        for kernel, tensors, steps, hyper in calls:
            torch._foreach_add_(steps, 1)
            kernel(*tensors, steps, **hyper, grad_scale=None, found_inf=None)


def _plain_sgd_step(optimizer: torch.optim.Optimizer) -> bool:
    """For a plain `torch.optim.SGD` (no momentum, weight decay or `maximize`; not fused
    nor differentiable; a number as learning rate; no hooks), its step done here:
    ``p -= lr * grad`` in one foreach call per group, the arithmetic of `SGD.step`
    without its first call's import of `torch._dynamo` (seconds: MAML's workers take one
    such step each). Returns False, having done nothing, for any other optimiser."""
    if type(optimizer) is not torch.optim.SGD or not steps_plainly(optimizer):
        return False
    for group in optimizer.param_groups:
        if (
            group["momentum"]
            or group["weight_decay"]
            or group["maximize"]
            or group.get("fused")
            or group.get("differentiable")
            or isinstance(group["lr"], torch.Tensor)
            or any(p.grad is not None and p.grad.is_sparse for p in group["params"])
        ):
            return False
    with torch.no_grad():
        for group in optimizer.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if params:
                torch._foreach_add_(params, [p.grad for p in params], alpha=-group["lr"])
    return True


_FUSED_ADAM = getattr(torch, "_fused_adam_", None)
_FUSED_ADAMW = getattr(torch, "_fused_adamw_", None)


def _fused_adam_calls(optimizer: torch.optim.Optimizer) -> list[tuple] | None:
    """The fused kernel calls (kernel, tensor lists, steps, hyperparameters) that make
    `optimizer.step()`, one per parameter group with gradients; None where the optimiser
    must step itself (see `step_optimizer`). A group with a parameter on its first step
    is first initialised by Adam itself (`_init_adam_group`)."""
    if (
        type(optimizer) is not torch.optim.Adam
        or _FUSED_ADAM is None
        or not steps_plainly(optimizer)
    ):
        return None
    state = optimizer.state
    calls = []
    for group in optimizer.param_groups:
        if not group.get("fused") or group.get("differentiable") or group.get("capturable"):
            return None
        params = [p for p in group["params"] if p.grad is not None]
        if not params:
            continue
        lr, (beta1, beta2) = group["lr"], group["betas"]
        if any(isinstance(x, torch.Tensor) for x in (lr, beta1, beta2)):
            return None
        first = params[0]
        dtype, device = first.dtype, first.device
        grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps = [], [], [], [], []
        amsgrad = group["amsgrad"]
        for p in params:
            p_state = state.get(p)
            if not p_state:  # its first step: Adam makes the group's missing state
                if not _init_adam_group(optimizer, group):
                    return None
                p_state = state[p]
            grad = p.grad
            if (
                p.dtype is not dtype
                or p.device != device
                or grad.is_sparse
                or grad.dtype is not dtype
            ):
                return None
            grads.append(grad)
            exp_avgs.append(p_state["exp_avg"])
            exp_avg_sqs.append(p_state["exp_avg_sq"])
            if amsgrad:
                max_exp_avg_sqs.append(p_state["max_exp_avg_sq"])
            steps.append(p_state["step"])
        decoupled = bool(group.get("decoupled_weight_decay"))
        kernel = _FUSED_ADAMW if decoupled else _FUSED_ADAM
        if kernel is None:
            return None
        hyper = {
            "amsgrad": amsgrad,
            "lr": lr,
            "beta1": beta1,
            "beta2": beta2,
            "weight_decay": group["weight_decay"],
            "eps": group["eps"],
            "maximize": group["maximize"],
        }
        tensors = (params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs)
        calls.append((kernel, tensors, steps, hyper))
    return calls


def steps_plainly(optimizer: torch.optim.Optimizer) -> bool:
    """Whether `optimizer.step()` is its class's own arithmetic and nothing else: no step
    hooks (global or the optimiser's own), no `step` patched onto the instance, no
    `GradScaler` attributes."""
    return not (
        optimizer._optimizer_step_pre_hooks
        or optimizer._optimizer_step_post_hooks
        or getattr(torch_optimizer, "_global_optimizer_pre_hooks", None)
        or getattr(torch_optimizer, "_global_optimizer_post_hooks", None)
        or "step" in vars(optimizer)
        or getattr(optimizer, "grad_scale", None) is not None
        or getattr(optimizer, "found_inf", None) is not None
    )


def _init_adam_group(optimizer: torch.optim.Optimizer, group: dict) -> bool:
    """Adam's own lazy state initialisation of `group`'s parameters with gradients
    (`Adam._init_group`, the first thing `Adam.step` does, and the state it would make);
    False where this torch has no such method or it refuses a parameter (e.g. one the
    fused kernel does not take: `Adam.step` then raises that error itself)."""
    try:
        optimizer._init_group(group, [], [], [], [], [], [])  # type: ignore[attr-defined]
    except (AttributeError, TypeError, RuntimeError):
        return False
    return True


def loss_term(coeff: float, compute: Callable[[], TensorType]) -> TensorType:
    """`compute()`, a loss term that the loss weights by `coeff`: with autograd (where
    the caller has it on) when `coeff` is non-zero, without when it is 0.

    A term weighted away is still reported as a statistic, but builds no graph and costs
    no backward pass; the caller adds `coeff * term` to the loss only for a non-zero
    `coeff` (a term times 0 would still be differentiated, and 0 * inf is NaN).
    """
    if coeff != 0.0 or not torch.is_grad_enabled():
        return compute()
    with torch.no_grad():
        return compute()


def explained_variance(y: TensorType, pred: TensorType) -> TensorType:
    """``max(-1, 1 - Var[y - pred] / Var[y])``: how much of the returns' variance is explained.

    Variances are over the batch (first) axis; of several columns the first one's value is
    returned (RLlib's convention). Constant targets (``Var[y] = 0``) give 0: there is
    nothing to explain. The policies log it per minibatch, so there is no Python branch on
    a tensor (that would force a device sync).
    """
    y_var = torch.var(y, dim=0)
    diff_var = torch.var(y - pred, dim=0)
    ev = torch.clamp(1.0 - diff_var / y_var, min=-1.0)
    return torch.where(y_var > 0, ev, torch.zeros_like(ev)).reshape(-1)[0]


def flatten_inputs_to_1d_tensor(
    inputs: TensorStructType,
    spaces_struct: Any = None,
    time_axis: bool = False,
) -> TensorType:
    """A (nested) structure of [B, ...] (or [B, T, ...]) tensors -> one [B, n] ([B, T, n]).

    Leaves of a ``Discrete``/``MultiDiscrete`` space (in `spaces_struct`, same structure)
    are one-hot encoded (old `gym.spaces` ones too); others are flattened and cast to float.
    """
    from corral.env.gym_compat import convert_space

    flat_inputs = flatten(inputs)
    flat_spaces = (
        [convert_space(s) for s in flatten(spaces_struct)]
        if spaces_struct is not None
        else [None] * len(flat_inputs)
    )
    batch = time = None
    out = []
    for tensor, space in zip(flat_inputs, flat_spaces):
        if batch is None:
            batch = tensor.shape[0]
            if time_axis:
                time = tensor.shape[1]
        if isinstance(space, gym.spaces.Discrete):
            if time_axis:
                tensor = torch.reshape(tensor, [batch * time])
            out.append(one_hot(tensor, space).float())
        elif isinstance(space, gym.spaces.MultiDiscrete):
            if time_axis:
                tensor = torch.reshape(tensor, [batch * time, -1])
            out.append(one_hot(tensor, space).float())
        else:
            shape = [batch * time, -1] if time_axis else [batch, -1]
            out.append(torch.reshape(tensor, shape).float())
    merged = torch.cat(out, dim=-1)
    if time_axis:
        merged = torch.reshape(merged, [batch, time, -1])
    return merged


def global_norm(tensors: list[TensorType]) -> TensorType:
    """The L2 norm of all `tensors` together."""
    return torch.sqrt(sum(torch.sum(t.pow(2.0)) for t in tensors))


def huber_loss(x: TensorType, delta: float = 1.0) -> TensorType:
    """Elementwise Huber loss: ``0.5 x^2`` within ``delta``, linear beyond."""
    return torch.where(
        torch.abs(x) < delta, torch.pow(x, 2.0) * 0.5, delta * (torch.abs(x) - 0.5 * delta)
    )


def l2_loss(x: TensorType) -> TensorType:
    """``0.5 * sum(x^2)``."""
    return 0.5 * torch.sum(torch.pow(x, 2.0))


def minimize_and_clip(optimizer: torch.optim.Optimizer, clip_val: float = 10.0) -> None:
    """Clips the gradient norm of each of `optimizer`'s parameters to `clip_val` (each alone).

    (RLlib 1.13 meant this but passed the gradients themselves to ``clip_grad_norm_``,
    which then clipped nothing; corral clips.)
    """
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.grad is not None:
                nn.utils.clip_grad_norm_(p, clip_val)


def one_hot(x: TensorType, space: gym.Space) -> TensorType:
    """One-hot encoding of a ``Discrete`` ([B] -> [B, n]) or ``MultiDiscrete`` batch
    ([B, k] -> [B, sum(nvec)]); old gym spaces (what RLlib 1.x models hold) too."""
    from corral.env.gym_compat import convert_space

    space = convert_space(space)
    if isinstance(space, gym.spaces.Discrete):
        return nn.functional.one_hot(x.long(), int(space.n))
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = np.asarray(space.nvec).reshape(-1)
        return torch.cat(
            [nn.functional.one_hot(x[:, i].long(), int(n)) for i, n in enumerate(nvec)], dim=-1
        )
    raise ValueError(f"Unsupported space for `one_hot`: {space}")


def reduce_mean_ignore_inf(x: TensorType, axis: int | None = None) -> TensorType:
    """The mean over `axis` of the entries that are not ``-inf``."""
    mask = torch.ne(x, float("-inf"))
    x_zeroed = torch.where(mask, x, torch.zeros_like(x))
    if axis is None:
        return torch.sum(x_zeroed) / torch.sum(mask.float())
    return torch.sum(x_zeroed, axis) / torch.sum(mask.float(), axis)


def sequence_mask(
    lengths: TensorType,
    maxlen: int | None = None,
    dtype: torch.dtype | None = None,
    time_major: bool = False,
) -> TensorType:
    """``[B, maxlen]`` mask (``[maxlen, B]`` if `time_major`): True for the first
    ``lengths[b]`` steps of each row (as ``tf.sequence_mask``). Boolean unless `dtype`."""
    lengths = torch.as_tensor(lengths)
    if maxlen is None:
        maxlen = int(lengths.max())
    steps = torch.arange(maxlen, device=lengths.device)
    mask = steps[None, :] < lengths[:, None]
    if time_major:
        mask = mask.t()
    return mask if dtype is None else mask.to(dtype)


def set_torch_seed(seed: int | None = None) -> None:
    """Seeds torch and asks for deterministic algorithms (as RLlib 1.13; ops without a
    deterministic version warn instead of failing)."""
    if seed is None:
        return
    torch.manual_seed(seed)
    cuda = torch.version.cuda
    if cuda is not None and float(cuda) >= 10.2:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = "4096:8"
    else:
        torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.deterministic = True


def softmax_cross_entropy_with_logits(logits: TensorType, labels: TensorType) -> TensorType:
    """``sum(-labels * log_softmax(logits))`` over the last axis (TF's op of that name)."""
    return torch.sum(-labels * nn.functional.log_softmax(logits, -1), -1)


class Swish(nn.Module):
    """``x * sigmoid(beta * x)`` with a learned ``beta`` (initially 1)."""

    def __init__(self) -> None:
        super().__init__()
        self._beta = nn.Parameter(torch.tensor(1.0))

    def forward(self, input_tensor: TensorType) -> TensorType:
        return input_tensor * torch.sigmoid(self._beta * input_tensor)
