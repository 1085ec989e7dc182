"""RLlib 1.13's framework helpers: ``try_import_torch`` and the TF/JAX stand-ins.

corral runs on PyTorch only. ``try_import_tf()`` returns RLlib's ``(None, None, None)`` when
TensorFlow is not installed (and never imports it otherwise, unlike RLlib: corral has no use
for it), ``try_import_jax()`` ``(None, None)``, ``try_import_tfp()`` ``None``, so RLlib code
that keeps TF branches next to its torch ones still imports.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from corral.utils.deprecation import Deprecated
from corral.utils.typing import TensorShape, TensorType

__all__ = [
    "ModuleStub",
    "NNStub",
    "TensorShape",
    "TensorType",
    "get_activation_fn",
    "get_variable",
    "tf_function",
    "try_import_jax",
    "try_import_tf",
    "try_import_tfp",
    "try_import_torch",
]

logger = logging.getLogger(__name__)


def _no_framework(name: str, error: bool) -> None:
    if error:
        raise ImportError(
            f"Could not import {name}: corral runs on PyTorch only (use framework='torch')."
        )


def try_import_tf(error: bool = False) -> tuple[Any, Any, Any]:
    """``(tf1, tf, version)`` as RLlib's; ``(None, None, None)`` without TensorFlow.

    A TensorFlow already imported by the process is returned as RLlib would (``tf1`` its
    ``compat.v1``); corral itself never imports TensorFlow.

    Args:
        error: raise ``ImportError`` instead of returning Nones.
    """
    if "RLLIB_TEST_NO_TF_IMPORT" in os.environ or "tensorflow" not in sys.modules:
        _no_framework("TensorFlow", error)
        return None, None, None
    tf = sys.modules["tensorflow"]
    tf1 = getattr(getattr(tf, "compat", None), "v1", tf)
    version = 2 if str(getattr(tf, "__version__", "2")).startswith("2") else 1
    return tf1, tf, version


def try_import_tfp(error: bool = False) -> Any:
    """TensorFlow Probability: ``None`` (corral runs on PyTorch only)."""
    _no_framework("TensorFlow Probability", error)
    return None


def try_import_jax(error: bool = False) -> tuple[Any, Any]:
    """``(jax, flax)``: ``(None, None)`` (corral runs on PyTorch only)."""
    _no_framework("JAX", error)
    return None, None


class ModuleStub:
    """RLlib's stand-in for ``torch.nn.Module`` when torch is missing (can be subclassed)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise ImportError("Could not import `torch`.")


class NNStub:
    """RLlib's stand-in for ``torch.nn`` when torch is missing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.functional = None
        self.Module = ModuleStub


def try_import_torch(error: bool = False) -> tuple[Any, Any]:
    """``(torch, torch.nn)``; RLlib's ``(None, NNStub())`` when torch cannot be imported.

    Args:
        error: raise ``ImportError`` instead of returning the stubs.
    """
    if "RLLIB_TEST_NO_TORCH_IMPORT" in os.environ:
        return None, NNStub()
    try:
        import torch
        from torch import nn
    except ImportError:
        if error:
            raise ImportError("Could not import PyTorch (`pip install torch`).") from None
        return None, NNStub()
    return torch, nn


def tf_function(tf_module: Any) -> Callable[[Any], Any]:
    """RLlib's conditional ``@tf.function``: without TensorFlow, returns the function as is."""

    def decorator(func: Any) -> Any:
        if tf_module is None or tf_module.executing_eagerly():
            return func
        return tf_module.function(func)

    return decorator


def get_variable(
    value: Any,
    framework: str = "tf",
    trainable: bool = False,
    tf_name: str = "unnamed-variable",
    torch_tensor: bool = False,
    device: Any = None,
    shape: TensorShape | None = None,
    dtype: Any = None,
) -> Any:
    """A torch tensor (``framework="torch", torch_tensor=True``) or ``value`` as it is.

    Args:
        value: the initial value (a number or numpy array).
        framework: "torch" (or None); a TF framework raises (corral has no TF variables).
        trainable: for a tensor: ``requires_grad``.
        tf_name: unused (RLlib's TF variable name).
        torch_tensor: whether to make a torch tensor rather than return ``value``.
        device: the tensor's device.
        shape: unused (RLlib's TF initializer shape).
        dtype: the tensor's dtype (numpy or torch float32/int32/float64).
    """
    if framework in ("tf", "tf2", "tfe"):
        raise ImportError(
            "get_variable(framework='tf'): corral runs on PyTorch only (framework='torch')."
        )
    if framework == "torch" and torch_tensor:
        import numpy as np
        import torch

        tensor = torch.as_tensor(np.asarray(value))
        if dtype in (torch.float32, np.float32):
            tensor = tensor.float()
        elif dtype in (torch.int32, np.int32):
            tensor = tensor.int()
        elif dtype in (torch.float64, np.float64):
            tensor = tensor.double()
        if device:
            tensor = tensor.to(device)
        if trainable:
            tensor.requires_grad_(True)
        return tensor
    return value


@Deprecated(
    old="corral.utils.framework.get_activation_fn",
    new="corral.models.utils.get_activation_fn",
    error=False,
)
def get_activation_fn(name: str | None = None, framework: str = "tf") -> Any:
    """The torch activation class for a name (RLlib's deprecated location of it)."""
    from corral.models.utils import get_activation_fn as current

    return current(name, framework="torch" if framework in ("tf", "tf2", "tfe") else framework)
