"""The numpy optimisers of evolution strategies: they step a policy's flat weights.

ES estimates a gradient from returns, not from a loss, so no torch optimiser is
involved: `update(g)` returns the new flat weights `theta + step(g)` (the caller sets
them) and the ratio `|step| / |theta|` that RLlib 1.13 reports as `update_ratio`.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class Optimizer:
    """Base class: a step rule on the flat weights of `policy`.

    Args:
        policy: has `num_params` and `get_flat_weights()`.
    """

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.dim = int(policy.num_params)
        # Steps taken (Adam's bias correction reads it).
        self.t = 0

    def update(self, globalg: np.ndarray) -> tuple[np.ndarray, float]:
        """One step along `-globalg` (a gradient to descend).

        Returns:
            (new flat weights, |step| / |current weights|).
        """
        self.t += 1
        step = self._compute_step(globalg)
        theta = self.policy.get_flat_weights()
        norm = float(np.linalg.norm(theta))
        ratio = float(np.linalg.norm(step)) / norm if norm > 0 else float("inf")
        return (theta + step).astype(np.float32), ratio

    def _compute_step(self, globalg: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def get_state(self) -> dict[str, Any]:
        """The step count and moment arrays (for checkpoints)."""
        return {"t": self.t}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores `get_state`'s dict."""
        self.t = int(state["t"])


class SGD(Optimizer):
    """Gradient descent with momentum: `v = m v + (1 - m) g`, `step = -stepsize v`.

    Args:
        policy: the policy whose flat weights are stepped.
        stepsize: the step size.
        momentum: the momentum `m` (0: plain SGD, ARS's).
    """

    def __init__(self, policy: Any, stepsize: float, momentum: float = 0.0) -> None:
        super().__init__(policy)
        self.v = np.zeros(self.dim, dtype=np.float32)
        self.stepsize, self.momentum = stepsize, momentum

    def _compute_step(self, globalg: np.ndarray) -> np.ndarray:
        self.v = (self.momentum * self.v + (1.0 - self.momentum) * globalg).astype(np.float32)
        return -self.stepsize * self.v

    def get_state(self) -> dict[str, Any]:
        return {**super().get_state(), "v": self.v}

    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state(state)
        self.v = _vector(state["v"], self.dim)


class Adam(Optimizer):
    """Adam (Kingma & Ba, 2015, arXiv:1412.6980) on the flat weights: ES's optimiser.

    Args:
        policy: the policy whose flat weights are stepped.
        stepsize: the step size (alpha).
        beta1: decay of the first moment.
        beta2: decay of the second moment.
        epsilon: added to the second moment's root.
    """

    def __init__(
        self,
        policy: Any,
        stepsize: float,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-08,
    ) -> None:
        super().__init__(policy)
        self.stepsize = stepsize
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.m = np.zeros(self.dim, dtype=np.float32)
        self.v = np.zeros(self.dim, dtype=np.float32)

    def _compute_step(self, globalg: np.ndarray) -> np.ndarray:
        # The bias corrections of both moments folded into the step size (Algorithm 1,
        # last lines, of the paper).
        a = self.stepsize * np.sqrt(1 - self.beta2**self.t) / (1 - self.beta1**self.t)
        self.m = (self.beta1 * self.m + (1 - self.beta1) * globalg).astype(np.float32)
        self.v = (self.beta2 * self.v + (1 - self.beta2) * globalg * globalg).astype(np.float32)
        return -a * self.m / (np.sqrt(self.v) + self.epsilon)

    def get_state(self) -> dict[str, Any]:
        return {**super().get_state(), "m": self.m, "v": self.v}

    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state(state)
        self.m = _vector(state["m"], self.dim)
        self.v = _vector(state["v"], self.dim)


def _vector(value: Any, dim: int) -> np.ndarray:
    out = np.asarray(value, dtype=np.float32)
    if out.shape != (dim,):
        raise ValueError(f"Optimizer state of shape {out.shape} for {dim} parameters.")
    return out.copy()


__all__ = ["SGD", "Adam", "Optimizer"]
