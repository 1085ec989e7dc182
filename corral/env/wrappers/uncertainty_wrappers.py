"""Reward noise for env classes (RLlib's `uncertainty_wrappers`, from the Center on
Long-Term Risk's marltoolbox)."""

from __future__ import annotations

from typing import Any

import numpy as np


def add_RewardUncertaintyEnvClassWrapper(  # noqa: N802 - RLlib's name
    EnvClass: type,  # noqa: N803 - RLlib's argument name
    reward_uncertainty_std: float,
    reward_uncertainty_mean: float = 0.0,
) -> type:
    """A subclass of `EnvClass` whose rewards get Gaussian noise added.

    Each step, every reward (each agent's in a `MultiAgentEnv`'s reward dict, or a
    single-agent env's scalar reward) gets an independent draw of
    `Normal(reward_uncertainty_mean, reward_uncertainty_std)`. The draws come from a
    generator that `reset(seed=...)` seeds, so a seeded episode is reproducible.

    Args:
        EnvClass: a Gymnasium env class or a corral `MultiAgentEnv` class.
        reward_uncertainty_std: the noise's standard deviation (>= 0).
        reward_uncertainty_mean: the noise's mean.

    Raises:
        ValueError: `reward_uncertainty_std` is negative.
    """
    if not reward_uncertainty_std >= 0:
        raise ValueError(f"reward_uncertainty_std must be >= 0, got {reward_uncertainty_std!r}.")

    class RewardUncertaintyEnvClassWrapper(EnvClass):  # type: ignore[valid-type,misc]
        _reward_noise_rng: np.random.Generator | None = None

        def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
            if seed is not None or self._reward_noise_rng is None:
                self._reward_noise_rng = np.random.default_rng(seed)
            return super().reset(seed=seed, options=options)

        def step(self, action: Any) -> Any:
            obs, rewards, terminated, truncated, info = super().step(action)
            return obs, self.reward_wrapper(rewards), terminated, truncated, info

        def reward_wrapper(self, reward: Any) -> Any:
            """`reward` (a scalar or a dict of them) with noise added."""
            if self._reward_noise_rng is None:
                self._reward_noise_rng = np.random.default_rng()
            rng = self._reward_noise_rng
            if isinstance(reward, dict):
                return {
                    k: r + rng.normal(reward_uncertainty_mean, reward_uncertainty_std)
                    for k, r in reward.items()
                }
            return reward + rng.normal(reward_uncertainty_mean, reward_uncertainty_std)

    return RewardUncertaintyEnvClassWrapper
