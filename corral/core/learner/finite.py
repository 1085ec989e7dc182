"""The learner's guard against NaN/inf: checks a loss and its gradients before a step.

One scalar per minibatch on the fast path (see `_sum_is_finite`); the names of the
non-finite loss terms and parameter groups are worked out only on failure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch

from corral.utils.torch_utils import steps_plainly

# One optimiser, or a dict of them (name -> optimiser) for `learn_step` policies.
Optimizers = torch.optim.Optimizer | Mapping[str, torch.optim.Optimizer]


class NonFiniteUpdateError(FloatingPointError):
    """A loss or gradient that is NaN or infinite, caught before the optimiser step.

    The message names the policy and the loss terms (or parameter groups) that are
    not finite; the weights are as they were before the failed step.

    Attributes:
        detail: what was not finite.
        policy_id: the policy being trained (set by the `Learner`).
    """

    def __init__(self, detail: str, policy_id: str | None = None) -> None:
        self.detail = detail
        self.policy_id = policy_id
        who = f"Policy {policy_id!r}" if policy_id is not None else "A policy"
        super().__init__(
            f"{who}: {detail} The optimiser step was not taken, so the weights are unchanged "
            "(still finite). Look for NaN/inf in the env's rewards and for learning settings "
            "that diverge (lr, grad_clip, loss coefficients); `skip_nonfinite_updates: True` "
            "skips such updates (counted as `num_nonfinite_updates_skipped`) instead."
        )


def optimizers_of(optimizer: Optimizers) -> list[torch.optim.Optimizer]:
    """The optimiser, or each one of a dict of them."""
    return list(optimizer.values()) if isinstance(optimizer, Mapping) else [optimizer]


def _grads_of(optimizer: Optimizers) -> list[torch.Tensor]:
    """Every gradient an optimiser (or each of a dict of them) is about to apply."""
    return [
        p.grad
        for opt in optimizers_of(optimizer)
        for group in opt.param_groups
        for p in group["params"]
        if p.grad is not None
    ]


def _params_of(optimizer: Optimizers) -> list[tuple[str, list[torch.Tensor]]]:
    """(group name, parameters) of an optimiser, or of each one of a dict of them."""
    if isinstance(optimizer, Mapping):
        return [pair for name, opt in optimizer.items() for pair in _named_groups(opt, name)]
    return _named_groups(optimizer, "")


def _named_groups(
    optimizer: torch.optim.Optimizer, prefix: str
) -> list[tuple[str, list[torch.Tensor]]]:
    out = []
    for i, group in enumerate(optimizer.param_groups):
        name = group.get("name", f"group {i}" if len(optimizer.param_groups) > 1 else "")
        label = "/".join(x for x in (prefix, str(name)) if x) or "all parameters"
        out.append((label, list(group["params"])))
    return out


def sum_is_finite(tensors: Iterable[torch.Tensor]) -> bool:
    """Whether every element of every tensor is finite (one device sync; see below)."""
    # NaN and inf survive a sum, so one scalar (one sync) tells whether any element
    # of any tensor is non-finite; far cheaper than isfinite() per tensor. (Only
    # finite values adding up past float32's max would read as non-finite too, which
    # flags numbers that are broken anyway.)
    sums = [t.detach().sum() for t in tensors]
    return not sums or bool(torch.isfinite(torch.stack(sums).sum()))


def _all_finite(value: Any) -> bool:
    if torch.is_tensor(value):
        return bool(torch.isfinite(value.detach()).all())
    if isinstance(value, float | np.floating):
        return bool(np.isfinite(value))
    return True


def check_finite_update(
    loss: torch.Tensor | None, optimizer: Optimizers, terms: Mapping[str, Any] | None = None
) -> None:
    """Raise `NonFiniteUpdateError` unless the loss and every gradient are finite.

    Call it after `backward()` and before gradient clipping and `optimizer.step()`
    (the `Learner` does for `loss`-based policies; a policy's `learn_step` calls it
    itself), so that a NaN never reaches the weights or the optimiser's moments.

    Args:
        loss: the total loss that was backpropagated (None: check gradients only).
        optimizer: the optimiser (or dict of optimisers) about to step.
        terms: the loss terms / stats, to name the non-finite ones in the error.
    """
    # Fast path, every minibatch: one scalar; the named groups are built only on failure.
    grads = _grads_of(optimizer)
    if sum_is_finite(grads if loss is None else [loss, *grads]):
        return
    # Slow path, only on failure: say what is not finite.
    groups = _params_of(optimizer)
    bad_terms = [name for name, value in (terms or {}).items() if not _all_finite(value)]
    terms_text = ", ".join(repr(t) for t in bad_terms)
    if loss is not None and not bool(torch.isfinite(loss).all()):
        detail = f"the loss is {float(loss.detach().reshape(-1)[0])}"
        detail += f" (non-finite terms: {terms_text})." if bad_terms else "."
    else:
        bad_groups = [
            label
            for label, params in groups
            if not sum_is_finite([p.grad for p in params if p.grad is not None])
        ]
        detail = "the gradient of " + ", ".join(repr(g) for g in bad_groups) + " is NaN or inf"
        detail += (
            f" (non-finite loss terms: {terms_text})." if bad_terms else " (the loss is finite)."
        )
    raise NonFiniteUpdateError(detail)


def clip_grad_norm_checked(
    loss: torch.Tensor,
    optimizer: Optimizers,
    params: list[torch.Tensor],
    max_norm: float,
    terms: Mapping[str, Any] | None = None,
) -> float | torch.Tensor:
    """Clips the gradients of `params` to the global norm `max_norm`, after checking that
    the loss and every gradient are finite; returns the norm before clipping.

    The check reads the gradients' global norm (NaN or inf when any gradient is), which
    the clip computes anyway, and the loss in one host copy, so a checked and clipped
    minibatch costs one sync (`check_finite_update` then `clip_grad_norm_` cost more
    small ops and two). The arithmetic is `torch.nn.utils.clip_grad_norm_`'s: the same
    norm and scale factor, so the clipped gradients are the same to the bit.

    Raises:
        NonFiniteUpdateError: the loss or a gradient is NaN/inf (named as
            `check_finite_update` names them); the gradients are not clipped then.
    """
    grads = [p.grad for p in params if p.grad is not None]
    if not grads or any(
        g.dtype != grads[0].dtype or g.device != grads[0].device for g in grads
    ):  # mixed dtypes or devices: torch's own grouping
        check_finite_update(loss, optimizer, terms)
        return torch.nn.utils.clip_grad_norm_(params, max_norm)
    with torch.no_grad():
        norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
        norm_value, loss_value = torch.stack(
            (norm, loss.detach().reshape(()).to(norm.dtype))
        ).tolist()
        if not (math.isfinite(norm_value) and math.isfinite(loss_value)):
            # Says what is not finite (and raises). Finite gradients whose squares
            # overflow float32 read as an infinite norm; they are scaled to zero below.
            check_finite_update(loss, optimizer, terms)
        if norm_value + 1e-6 >= max_norm * (1.0 - 1e-6):  # else torch's factor is 1.0
            torch._foreach_mul_(grads, (max_norm / (norm + 1e-6)).clamp(max=1.0))
    return norm_value


def scalar_values(values: list[Any]) -> list[Any]:
    """`values` with each one-element tensor turned into a Python number, in one host copy
    per dtype and device (the other entries as they are).

    The learner turns a whole update's stats (and its weight check) into numbers at once
    instead of one sync per stat.
    """
    groups: dict[tuple[torch.dtype, torch.device], list[int]] = {}
    for i, value in enumerate(values):
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            groups.setdefault((value.dtype, value.device), []).append(i)
    if not groups:
        return values
    out = list(values)
    with torch.no_grad():
        for positions in groups.values():
            tensors = [values[i] for i in positions]
            tensors = [t if t.dim() == 0 else t.reshape(()) for t in tensors]
            for i, number in zip(positions, torch.stack(tensors).tolist()):
                out[i] = number
    return out


def finite_probes(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """One-element tensors, made without a sync, that are all finite when every element
    of `tensors` is; `all_finite(tensors)` settles a non-finite one.

    float32 tensors on one device: their L2 norms, in one fused call (`_foreach_norm`,
    what gradient clipping uses). Otherwise one sum per tensor, in float32 or wider. A
    NaN or inf element makes its probe non-finite; so can finite elements whose squares
    (or sum) overflow, hence `all_finite` before calling the tensors non-finite.
    """
    if not tensors:
        return []
    first = tensors[0]
    if all(t.dtype == torch.float32 and t.device == first.device for t in tensors):
        with torch.no_grad():  # (cheaper than a `detach()` per tensor)
            return list(torch._foreach_norm(tensors))
    sums = [t.detach().sum(dtype=torch.float32 if t.dtype.itemsize < 4 else None) for t in tensors]
    if len({(s.dtype, s.device) for s in sums}) > 1:
        return [torch.stack([s.double().cpu() for s in sums]).sum()]
    return [torch.stack(sums).sum()]


# The largest update `steps_keep_weights_finite` allows: under half the spacing of
# float32's largest finite numbers (2**103, about 1.01e31), so that adding it to any finite
# float32 or float64 weight rounds to a finite number.
_MAX_UPDATE = 1e30
# The gradient norm it allows: squares (Adam's second moments) stay far from overflowing.
_MAX_GRAD_NORM = 1e15
# The smallest Adam epsilon it allows: where a gradient's square underflows to 0 (below
# about 1e-23 in float32), the first moment (as small) over epsilon stays tiny.
_MIN_EPS = 1e-16
# The parameter dtypes it allows (float16's largest number, 65504, is too close).
_WIDE_FLOATS = frozenset((torch.float32, torch.float64))


def steps_keep_weights_finite(optimizer: torch.optim.Optimizer, max_grad_norm: float) -> bool:
    """Whether a step of `optimizer` on finite gradients of global norm at most
    `max_grad_norm` (as `grad_clip` leaves them) provably keeps finite weights finite,
    so that the learner need not copy the weights before an update and check them after.

    True for a plain `torch.optim.Adam` or `AdamW` (`steps_plainly`) on float32/float64
    parameters whose groups have float hyperparameters with `eps >= 1e-16`,
    `0 <= beta1 < 1`, `beta1**2 < beta2 < 1`, no L2 `weight_decay` (Adam; it adds the
    unbounded weights to the gradients) or `0 <= lr * weight_decay <= 1` (AdamW: the
    weights are scaled by a factor in [0, 1]), the bounds below at most 1e30, and
    `max_grad_norm <= 1e15`. Why: with every |g| <= G, the moments stay within
    |m| <= G and v <= G**2 (no overflow), and by Cauchy-Schwarz
    `|m_t| <= (1 - beta1) * sqrt(v_t / ((1 - beta2) * (1 - beta1**2 / beta2)))`, so the
    step `lr / (1 - beta1**t) * m / (sqrt(v / (1 - beta2**t)) + eps)` moves a weight by at
    most `lr / sqrt((1 - beta2) * (1 - beta1**2 / beta2))` (AMSGrad's larger denominator
    only shrinks it); the products on the way (the step size times the first moment, or
    over `eps`) stay under `lr / (1 - beta1) * max(G, 1 / eps)`. With both under 1e30,
    less than half the spacing of float32's largest numbers, no finite weight can round
    to inf (`step_bound`; tests/core/test_bounded_steps.py steps weights at float32's
    largest values at that bound). Anything else (SGD, whose step `lr * g` has no such
    bound, a hook, a huge `lr`) returns False.
    """
    if (
        type(optimizer) not in (torch.optim.Adam, torch.optim.AdamW)
        or not 0 < max_grad_norm <= _MAX_GRAD_NORM
        or not steps_plainly(optimizer)
    ):
        return False
    for group in optimizer.param_groups:
        lr, (beta1, beta2) = group["lr"], group["betas"]
        eps, decay = group["eps"], group["weight_decay"]
        if not all(isinstance(x, (int, float)) for x in (lr, beta1, beta2, eps, decay)):
            return False  # tensors (capturable) or anything unexpected
        if not (
            eps >= _MIN_EPS
            and 0 <= beta1 < 1
            and beta1 * beta1 < beta2 < 1
            and lr >= 0
            and {p.dtype for p in group["params"]} <= _WIDE_FLOATS
        ):
            return False
        if group.get("decoupled_weight_decay"):
            if not 0 <= lr * decay <= 1:
                return False
        elif decay != 0:
            return False
        if step_bound(lr, beta1, beta2, eps, max_grad_norm) > _MAX_UPDATE:
            return False
    return True


def step_bound(lr: float, beta1: float, beta2: float, eps: float, max_grad_norm: float) -> float:
    """The largest magnitude in an Adam step on gradients of norm at most
    `max_grad_norm` (see `steps_keep_weights_finite`): the update itself, and the
    products an implementation may form on the way, `lr / bias_correction1` times the
    first moment or over the denominator."""
    update = lr / math.sqrt((1 - beta2) * (1 - beta1 * beta1 / beta2))
    return max(update, lr / (1 - beta1) * max(max_grad_norm, 1 / eps))


def all_finite(tensors: Iterable[torch.Tensor]) -> bool:
    """Whether every element of every tensor is finite (exact; one sync per tensor)."""
    return all(_all_finite(t) for t in tensors)
