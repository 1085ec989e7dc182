"""MB-MPO's advantage estimate (a linear baseline fitted per batch) and its exploration.

MB-MPO does not take its advantages from the policy's value network: for each worker's batch
of imagined episodes it fits a linear baseline on hand-made features of the observation and
the time step (Duan et al. 2016, "Benchmarking Deep Reinforcement Learning for Continuous
Control", arXiv:1604.06778, whose baseline Clavera et al. 2018 use) and computes GAE
advantages on it, as RLlib 1.13 did.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from corral.evaluation.postprocessing import discount_cumsum
from corral.utils.exploration.stochastic_sampling import StochasticSampling

# A path: one episode's "observations" [T, obs_dim] and "rewards" [T] (plus what
# `calculate_gae_advantages` adds: "returns", "advantages").
Path = dict[str, np.ndarray]


class LinearFeatureBaseline:
    """A value baseline linear in features of the observation and the time step.

    The features of step ``t`` of an episode are ``o``, ``o**2`` (``o`` clipped to
    [-10, 10]), ``t/100``, its square and cube, and a constant; `fit` solves the ridge
    regression of the discounted returns on them.

    Args:
        reg_coeff: the ridge coefficient (multiplied by 10 until the solution is finite).
    """

    def __init__(self, reg_coeff: float = 1e-5) -> None:
        self._coeffs: np.ndarray | None = None
        self._reg_coeff = reg_coeff

    def get_param_values(self, **tags: Any) -> np.ndarray | None:
        """The fitted coefficients (None before `fit`)."""
        return self._coeffs

    def set_param_values(self, val: np.ndarray | None, **tags: Any) -> None:
        """Sets the coefficients."""
        self._coeffs = val

    def _features(self, path: Path) -> np.ndarray:
        obs = np.clip(np.asarray(path["observations"], np.float64), -10, 10)
        obs = obs.reshape(len(obs), -1)
        t = np.arange(len(path["rewards"])).reshape(-1, 1) / 100.0
        return np.concatenate([obs, obs**2, t, t**2, t**3, np.ones_like(t)], axis=1)

    def fit(self, paths: list[Path]) -> None:
        """Fits the coefficients to the paths' "returns"."""
        features = np.concatenate([self._features(p) for p in paths])
        returns = np.concatenate([p["returns"] for p in paths])
        gram, target = features.T @ features, features.T @ returns
        reg = self._reg_coeff
        for _ in range(5):
            coeffs = np.linalg.lstsq(gram + reg * np.identity(len(gram)), target, rcond=None)[0]
            self._coeffs = coeffs
            if np.all(np.isfinite(coeffs)):
                break
            reg *= 10

    def predict(self, path: Path) -> np.ndarray:
        """The baseline of each step of `path` (zeros before `fit`)."""
        if self._coeffs is None:
            return np.zeros(len(path["rewards"]))
        return self._features(path) @ self._coeffs


def calculate_gae_advantages(paths: list[Path], discount: float, gae_lambda: float) -> list[Path]:
    """Adds "returns" (discounted) and "advantages" (GAE on a `LinearFeatureBaseline` fitted
    to these paths, 0 after each path's last step) to each path; returns `paths`."""
    baseline = LinearFeatureBaseline()
    for path in paths:
        path["returns"] = discount_cumsum(np.asarray(path["rewards"], np.float64), discount)
    baseline.fit(paths)
    for path in paths:
        values = np.append(baseline.predict(path), 0.0)
        deltas = path["rewards"] + discount * values[1:] - values[:-1]
        path["advantages"] = discount_cumsum(deltas, discount * gae_lambda)
    return paths


class MBMPOExploration(StochasticSampling):
    """`StochasticSampling` whose `random_timesteps` apply to the driver's worker alone:
    MB-MPO's first real-env data is random; the workers sampling the learned models never
    act at random.

    Args:
        action_space: the env's action space.
        random_timesteps: the driver's worker acts uniformly at random while the real env
            steps sampled so far (its global timestep) are fewer than this.
    """

    def __init__(self, action_space: gym.Space, *, random_timesteps: int = 8000, **kwargs: Any):
        super().__init__(action_space, random_timesteps=random_timesteps, **kwargs)
        if self.worker_index > 0:
            self.random_timesteps = 0


__all__ = ["LinearFeatureBaseline", "MBMPOExploration", "calculate_gae_advantages"]
