"""Moving a policy's model out of and into corral: TorchScript, ONNX and HDF5.

Exported models serve without corral: they map a batch of preprocessed
observations to the action-distribution inputs (what the policy samples its
actions from) and the value estimates. HDF5 import maps weights written by
another tool onto the model's layers by name.
"""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING:
    from corral.models.torch.torch_modelv2 import TorchModelV2

# The torch.export-based ONNX exporter writes opset 18 and later; older opsets
# need the TorchScript-based exporter, which still honours them exactly.
_FIRST_DYNAMO_OPSET = 18
_ROOT = "<root>"


class InferenceModule(torch.nn.Module):
    """`obs [B, ...] -> (action-distribution inputs [B, n], values [B])` of a policy model."""

    def __init__(self, model: TorchModelV2) -> None:
        from corral.policy.torch_policy import _fast_forward_of

        super().__init__()
        self.model = model
        # The built-in fast path only where it computes what the model's own `forward`
        # and `value_function` do (not for a subclass that overrides either).
        self._fast = _fast_forward_of(model)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self._fast is not None:
            return self._fast(obs)
        out, _ = self.model({"obs": obs}, [], None)
        return out, self.model.value_function()


def example_obs(obs_shape: tuple[int, ...], model: torch.nn.Module | None = None) -> torch.Tensor:
    """A batch of two observations: batch size 1 would let exporters fix the batch dim.

    On the device of `model`'s parameters (a rollout worker's policy may act on a GPU,
    `num_gpus_per_worker`), the CPU without any.
    """
    param = next(iter(model.parameters()), None) if model is not None else None
    device = param.device if param is not None else torch.device("cpu")
    return torch.zeros((2, *obs_shape), dtype=torch.float32, device=device)


def export_torchscript(model: TorchModelV2, obs_shape: tuple[int, ...], export_dir: str) -> str:
    """Writes `model.pt` (TorchScript, loadable by `torch.jit.load` and libtorch)
    and `model_state_dict.pt` (tensors only); returns the model's path."""
    os.makedirs(export_dir, exist_ok=True)
    module = InferenceModule(model)
    with warnings.catch_warnings():
        # TorchScript is the documented export format; torch flags it as
        # deprecated in favour of torch.export, which libtorch cannot load.
        warnings.filterwarnings("ignore", message=".*torch.jit.*deprecated", category=Warning)
        traced = torch.jit.trace(module, example_obs(obs_shape, model))
    path = os.path.join(export_dir, "model.pt")
    traced.save(path)
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    torch.save(state, os.path.join(export_dir, "model_state_dict.pt"))
    return path


def export_onnx(
    model: TorchModelV2, obs_shape: tuple[int, ...], export_dir: str, opset: int
) -> str:
    """Writes `model.onnx`: input `obs`, outputs `output` (action-distribution
    inputs) and `value`, with a dynamic batch dimension; returns its path."""
    try:
        import onnx  # noqa: F401  (torch's exporter needs it)
    except ImportError as e:
        raise ImportError("ONNX export needs the `onnx` extra: pip install 'corral[onnx]'") from e
    os.makedirs(export_dir, exist_ok=True)
    path = os.path.join(export_dir, "model.onnx")
    dynamo = int(opset) >= _FIRST_DYNAMO_OPSET
    batch = {0: "batch"}
    dynamic = (
        {"dynamic_shapes": {"obs": {0: torch.export.Dim("batch")}}}
        if dynamo
        else {"dynamic_axes": {"obs": batch, "output": batch, "value": batch}}
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)
        torch.onnx.export(
            InferenceModule(model).eval(),
            (example_obs(obs_shape, model),),
            path,
            opset_version=int(opset),
            input_names=["obs"],
            output_names=["output", "value"],
            dynamo=dynamo,
            **dynamic,
        )
    return path


def read_h5_layers(import_file: str) -> dict[str, dict[str, np.ndarray]]:
    """Layer name -> {parameter name -> array} of an HDF5 weights file.

    Every group holding datasets is a layer, named by its path below the
    root ("/" becomes "."); a Keras-style `model_weights` group is used as
    the root when present. Datasets at the root belong to the layer `<root>`.
    """
    try:
        import h5py
    except ImportError as e:
        raise ImportError("HDF5 import needs h5py: pip install 'corral[h5]'") from e
    layers: dict[str, dict[str, np.ndarray]] = {}
    with h5py.File(import_file, "r") as f:
        root = f.get("model_weights", f)

        def visit(name: str, item: Any) -> None:
            if isinstance(item, h5py.Dataset):
                layer, _, param = name.rpartition("/")
                layers.setdefault(layer.replace("/", ".") or _ROOT, {})[param] = item[()]

        root.visititems(visit)
    return layers


def h5_layers_to_state(
    layers: dict[str, dict[str, np.ndarray]], expected: dict[str, np.ndarray], import_file: str
) -> dict[str, np.ndarray]:
    """Maps `read_h5_layers` output onto a model's state dict (`expected`).

    Keras names are understood: `kernel` is a transposed `weight`, and a
    `:0` suffix is dropped. Raises ValueError listing missing and
    unexpected layers, and parameters whose names or shapes do not match.
    """
    wanted: dict[str, dict[str, np.ndarray]] = {}
    for key, value in expected.items():
        layer, _, param = key.rpartition(".")
        wanted.setdefault(layer or _ROOT, {})[param] = value
    missing = sorted(set(wanted) - set(layers))
    unexpected = sorted(set(layers) - set(wanted))
    state: dict[str, np.ndarray] = {}
    problems: list[str] = []
    for layer in sorted(set(wanted) & set(layers)):
        given = dict(_torch_param(name, value) for name, value in layers[layer].items())
        for param, target in wanted[layer].items():
            key = param if layer == _ROOT else f"{layer}.{param}"
            if param not in given:
                problems.append(f"{key} missing (layer has {sorted(given)})")
            elif given[param].shape != np.shape(target):
                problems.append(
                    f"{key} has shape {given[param].shape}, expected {np.shape(target)}"
                )
            else:
                state[key] = given[param].astype(np.asarray(target).dtype)
    if missing or unexpected or problems:
        raise ValueError(
            f"{import_file} does not fit the model: missing layers {missing}, unexpected "
            f"layers {unexpected}" + (f", parameters: {'; '.join(problems)}" if problems else "")
        )
    return state


def _torch_param(name: str, value: np.ndarray) -> tuple[str, np.ndarray]:
    name = name.split(":")[0]
    if name == "kernel":
        return "weight", np.ascontiguousarray(np.asarray(value).T)
    return name, np.asarray(value)
