"""RLlib 1.13's model helpers: activation and initializer lookup, default conv filters."""

from __future__ import annotations

from typing import Any

__all__ = ["get_activation_fn", "get_filter_config", "get_initializer"]

_TF = ("tf", "tf2", "tfe")


def _tf_only(what: str, framework: str) -> None:
    from corral._surface import TensorFlowOnlyError

    raise TensorFlowOnlyError(
        f"{what}(framework={framework!r}): TensorFlow/JAX-only; corral runs on PyTorch only: "
        "pass framework='torch'."
    )


def get_activation_fn(name: Any = None, framework: str = "tf") -> Any:
    """The torch activation class for `name` ("relu", "tanh", "elu", "swish"); ``None`` for
    "linear"/None; a callable `name` is returned as is.

    Raises:
        ValueError: an unknown name.
        TensorFlowOnlyError: a TF/JAX `framework` (RLlib's default is "tf").
    """
    if callable(name):
        return name
    if framework != "torch":
        _tf_only("get_activation_fn", framework)
    if name in ("linear", None):
        return None
    from torch import nn

    if name in ("swish", "silu"):
        from corral.utils.torch_utils import Swish

        return Swish
    table = {"relu": nn.ReLU, "tanh": nn.Tanh, "elu": nn.ELU}
    if name in table:
        return table[name]
    raise ValueError(f"Unknown activation ({name}) for framework={framework}!")


_FILTERS = {
    (480, 640): [[16, [24, 32], [14, 18]], [32, [6, 6], 4], [256, [9, 9], 1]],
    (240, 320): [[16, [12, 16], [7, 9]], [32, [6, 6], 4], [256, [9, 9], 1]],
    (96, 96): [[16, [8, 8], 4], [32, [4, 4], 2], [256, [11, 11], 2]],
    (84, 84): [[16, [8, 8], 4], [32, [4, 4], 2], [256, [11, 11], 1]],
    (42, 42): [[16, [4, 4], 2], [32, [4, 4], 2], [256, [11, 11], 1]],
    (10, 10): [[16, [5, 5], 2], [32, [5, 5], 2]],
}


def get_filter_config(shape: Any) -> list:
    """RLlib's default ``conv_filters`` for an image observation shape (``[H, W(, C)]`` or
    ``[C, H, W]``) of 480x640, 240x320, 96x96, 84x84, 42x42 or 10x10.

    Raises:
        ValueError: another shape (set ``conv_filters`` yourself).
    """
    shape = list(shape)
    if len(shape) in (2, 3):
        for size, filters in _FILTERS.items():
            if tuple(shape[:2]) == size or tuple(shape[1:]) == size:
                return [list(f) for f in filters]
    raise ValueError(
        f"No default configuration for obs shape {shape}, you must specify `conv_filters` "
        "manually as a model option. Default configurations are only available for inputs "
        "of shape [42, 42, K] and [84, 84, K]. You may alternatively want to use a custom "
        "model or preprocessor."
    )


def get_initializer(name: Any, framework: str = "tf") -> Any:
    """The torch initializer for `name` (None/"default"/"xavier_uniform", "xavier_normal");
    a callable `name` is returned as is.

    Raises:
        ValueError: an unknown name.
        TensorFlowOnlyError: a TF/JAX `framework`.
    """
    if callable(name):
        return name
    if framework != "torch":
        _tf_only("get_initializer", framework)
    from torch import nn

    if name in (None, "default", "xavier_uniform"):
        return nn.init.xavier_uniform_
    if name == "xavier_normal":
        return nn.init.xavier_normal_
    raise ValueError(f"Unknown initializer ({name}) for framework={framework}!")
