"""Seeding Python, numpy and torch (RLlib's ``update_global_seed_if_necessary``)."""

from __future__ import annotations

import random

import numpy as np

__all__ = ["update_global_seed_if_necessary"]


def update_global_seed_if_necessary(framework: str | None = None, seed: int | None = None) -> None:
    """Seeds ``random``, numpy and (for framework "torch") torch, asking torch for
    deterministic algorithms as RLlib 1.13 does; nothing when `seed` is None.

    Raises:
        TensorFlowOnlyError: a TF framework (corral runs on PyTorch only).
    """
    if seed is None:
        return
    if framework in ("tf", "tf2", "tfe"):
        from corral._surface import TensorFlowOnlyError

        raise TensorFlowOnlyError(
            f"update_global_seed_if_necessary(framework={framework!r}): corral runs on "
            "PyTorch only (framework='torch')."
        )
    random.seed(seed)
    np.random.seed(seed)
    if framework == "torch":
        from corral.utils.torch_utils import set_torch_seed

        set_torch_seed(seed)
