"""Acting on a few rows in numpy, on a torch model's own weights.

A sampler runs its policy's forward pass once per env step, on one row per sub-env. At
that size each torch op's dispatch costs more than its arithmetic: a 4-64-64-2 tanh MLP on
8 rows takes about 23 us through torch's ops and 8 us as numpy matmuls on the same weights,
and a 4-256-256-2 one on 1 row 25 us against 9 us (one thread, the AMD EPYC of
BENCHMARKS.md). `NumpyLayers` runs chains of a model's `nn.Linear` layers and
element-wise activations that way, for the models' `forward_inference` fast paths
(`FullyConnectedNetwork`, `DQNTorchModel`); training, and every batch too large for it,
runs in torch.

- The weights are numpy views of the parameters, not copies, so an optimiser's in-place
  step shows at once. Before each call the parameters are checked to be the ones viewed:
  the same tensors at the same addresses. A parameter replaced or moved
  (`load_state_dict(assign=True)`, `.to(...)`, `.double()`) gets new views, or the call goes
  back to torch when the parameters are no longer float32 on the CPU.
- A chain runs in numpy only while each of its matmuls is small (rows x inputs x outputs
  at most `MAX_LAYER_WORK`): numpy's BLAS runs those on the calling thread, and above that
  size its own threads would compete with torch's, the envs' and the other workers'.
- The results equal torch's to float32 rounding (the BLAS kernels sum in another order),
  not to the bit.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import torch
from torch import nn

# The largest rows x in_features x out_features of one matmul that runs in numpy. OpenBLAS
# (numpy's wheels) keeps a matrix product on the calling thread up to 4 x 65,536 multiply-adds
# (measured: 4 rows of a 256x256 layer on one thread, 8 rows on two); this is half that:
# 2 rows of a 256x256 layer, 32 rows of a 64x64 one, where numpy took 10 and 14 us against
# torch's 32 and 34 us for a whole 4-H-H-2 MLP.
MAX_LAYER_WORK = 131_072

# Element-wise activations numpy computes in place (on an array the chain made itself).
_NUMPY_ACTIVATIONS = {
    nn.Tanh: lambda x: np.tanh(x, out=x),
    nn.ReLU: lambda x: np.maximum(x, 0.0, out=x),
}


class NumpyLayers:
    """Named chains of a model's layers, run in numpy on views of its parameters.

    Args:
        **chains: name -> the modules applied in order (`nn.Sequential`s are unrolled;
            None entries are skipped). Supported: `nn.Linear` (exactly that class),
            `nn.Tanh`, `nn.ReLU`, `nn.Identity`; with anything else, every batch runs
            in torch (`accepts` and `ready` are False).
    """

    def __init__(self, **chains: Iterable[nn.Module | None]) -> None:
        self._modules = {name: _unrolled(modules) for name, modules in chains.items()}
        self._supported = all(
            _is_supported(m) for modules in self._modules.values() for m in modules
        )
        # What each call checks: (a layer's parameter dict, a name in it, the tensor
        # viewed, its address).
        self._viewed: list[tuple[dict[str, Any], str, torch.Tensor, int]] = []
        self._built = False
        # Per chain: (weight.T view or None, bias view or None, activation or None) steps.
        self._steps: dict[str, list[tuple]] = {}
        self._max_rows = 0

    def accepts(self, obs: torch.Tensor) -> bool:
        """Whether the batch `obs` runs in numpy: no gradients wanted (under `no_grad` or
        `inference_mode`), nothing tracing the model into a graph (TorchScript and ONNX
        export, `torch.compile`, `torch.export`), a CPU tensor, and `ready` for its rows."""
        if (
            torch.is_grad_enabled()
            or torch.jit.is_tracing()
            or torch.compiler.is_compiling()
            or not obs.is_cpu
        ):
            return False
        return self.ready(obs.shape[0])

    def ready(self, rows: int) -> bool:
        """Whether a batch of `rows` rows runs in numpy, for a caller that computes no
        graph (acting on numpy inputs, `forward_inference_numpy`): supported layers with
        float32 parameters on the CPU (viewed again when one moved), and matmuls small
        enough for its rows."""
        if not self._supported:
            return False
        if not self._current():
            self._view()
        return 0 < rows <= self._max_rows

    def __call__(self, chain: str, x: np.ndarray) -> np.ndarray:
        """Chain `chain` on `x` ([rows, in_features] float32, e.g. `as_input(obs)`; not
        written to). Call after `accepts(obs)` or `ready(rows)` returned True."""
        owned = False  # (activations work in place on arrays made here, never on `x`)
        for weight_t, bias, activation in self._steps[chain]:
            if weight_t is not None:
                x = x @ weight_t
                owned = True
                if bias is not None:
                    x += bias
            if activation is not None:
                if not owned:
                    x, owned = x.copy(), True
                activation(x)
        return x

    def _current(self) -> bool:
        if not self._built:
            return False
        for parameters, name, tensor, address in self._viewed:
            if parameters.get(name) is not tensor or tensor.data_ptr() != address:
                return False
        return True

    def _view(self) -> None:
        """Views of the current parameters (no chain runs in numpy, `_max_rows` 0, while
        one is not float32 on the CPU); the parameters are remembered either way, so
        that this runs again only when they change. (Built aside, then swapped in: a
        thread between `accepts` and a call keeps valid, if older, views.)"""
        viewed: list[tuple[dict[str, Any], str, torch.Tensor, int]] = [
            (layer._parameters, name, tensor, tensor.data_ptr())
            for modules in self._modules.values()
            for layer in modules
            for name, tensor in layer._parameters.items()
            if tensor is not None
        ]
        steps: dict[str, list[tuple]] = {}
        largest = 1
        usable = all(_is_supported(m) for chain in self._modules.values() for m in chain) and all(
            t.device.type == "cpu" and t.dtype == torch.float32 for *_, t, _ in viewed
        )  # (support again: e.g. a parametrization added since)
        for name, modules in self._modules.items() if usable else ():
            chain: list[tuple] = []
            for module in modules:
                activation = _NUMPY_ACTIVATIONS.get(type(module))
                if activation is not None:
                    if chain and chain[-1][0] is not None and chain[-1][2] is None:
                        chain[-1] = (*chain[-1][:2], activation)  # fused into the matmul's step
                    else:
                        chain.append((None, None, activation))
                elif isinstance(module, nn.Linear):
                    weight = module.weight.detach().numpy()
                    bias = None if module.bias is None else module.bias.detach().numpy()
                    largest = max(largest, weight.shape[0] * weight.shape[1])
                    chain.append((weight.T, bias, None))
            steps[name] = chain
        self._steps = steps
        self._max_rows = MAX_LAYER_WORK // largest if usable else 0
        self._viewed, self._built = viewed, True

    def __getstate__(self) -> dict[str, Any]:
        """Without the views (a copy, e.g. `copy.deepcopy` of the model for a target
        network, views its own parameters on its first call)."""
        return {**self.__dict__, "_viewed": [], "_built": False, "_steps": {}, "_max_rows": 0}


def as_input(obs: torch.Tensor | np.ndarray) -> np.ndarray:
    """A batch `[B, ...]` (a CPU tensor or an array) as the `[B, features]` float32 array
    the chains take (a view of it where it already is one)."""
    x = obs.numpy() if isinstance(obs, torch.Tensor) else np.asarray(obs)
    if x.ndim != 2:
        x = x.reshape(len(x), -1)
    return x if x.dtype == np.float32 else x.astype(np.float32)


def _unrolled(modules: Iterable[nn.Module | None]) -> list[nn.Module]:
    out: list[nn.Module] = []
    for module in modules:
        if module is None:
            continue
        if type(module) is nn.Sequential:
            out.extend(_unrolled(module))
        else:
            out.append(module)
    return out


def _is_supported(module: nn.Module) -> bool:
    """A plain `nn.Linear` whose weight is a parameter of its own (not one computed by a
    hook, as `weight_norm` makes it), `nn.Identity` or an activation numpy knows."""
    if type(module) is nn.Linear:
        return "weight" in module._parameters
    return type(module) in (nn.Identity, *_NUMPY_ACTIVATIONS)


__all__ = ["MAX_LAYER_WORK", "NumpyLayers", "as_input"]
