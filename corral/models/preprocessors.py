"""Turning env observations into the flat float32 arrays models consume."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from corral.utils.error import UnsupportedSpaceException


class Preprocessor:
    """Maps one observation of `original_space` to a float32 array of `shape`."""

    def __init__(self, original_space: gym.Space) -> None:
        self.original_space = original_space
        self.shape = (int(gym.spaces.flatdim(original_space)),)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, self.shape, np.float32)
        # As in RLlib: models can restore the structure of flattened Dict/Tuple
        # observations (`restore_original_dimensions`).
        self.observation_space.original_space = original_space

    def transform(self, observation: Any) -> np.ndarray:
        return np.asarray(gym.spaces.flatten(self.original_space, observation), dtype=np.float32)

    def transform_batch(self, observations: Any) -> np.ndarray:
        return np.stack([self.transform(o) for o in observations])


class NoPreprocessor(Preprocessor):
    """For Box observations: only a cast to float32 (no copy when already so)."""

    def __init__(self, original_space: gym.spaces.Box) -> None:
        self.original_space = original_space
        self.shape = original_space.shape
        self.observation_space = original_space

    def transform(self, observation: Any) -> np.ndarray:
        return np.asarray(observation, dtype=np.float32)

    def transform_batch(self, observations: Any) -> np.ndarray:
        return np.asarray(observations, dtype=np.float32)


class OneHotPreprocessor(Preprocessor):
    """Discrete observations become one-hot vectors."""

    def transform(self, observation: Any) -> np.ndarray:
        out = np.zeros(self.shape, np.float32)
        out[int(observation)] = 1.0
        return out

    def transform_batch(self, observations: Any) -> np.ndarray:
        idx = np.asarray(observations, dtype=np.int64)
        out = np.zeros((len(idx), self.shape[0]), np.float32)
        out[np.arange(len(idx)), idx] = 1.0
        return out


def get_preprocessor(space: gym.Space) -> Preprocessor:
    """The preprocessor for an observation space."""
    if isinstance(space, gym.spaces.Box):
        return NoPreprocessor(space)
    if isinstance(space, gym.spaces.Discrete):
        return OneHotPreprocessor(space)
    if isinstance(space, (gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        return Preprocessor(space)
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        return Preprocessor(space)
    raise UnsupportedSpaceException(
        f"Observation space {space} is not supported: expected Box, Discrete, "
        "MultiDiscrete, MultiBinary, Dict or Tuple."
    )


def restore_original_dimensions(obs: Any, obs_space: gym.Space) -> Any:
    """Flat observation rows [B, n] -> the structure of `obs_space.original_space`.

    Dict and Tuple observations travel flattened (gymnasium's order, discrete
    parts one-hot); a model gets them back as dicts/tuples of [B, ...]
    tensors. Other spaces pass through unchanged.
    """
    original = getattr(obs_space, "original_space", None)
    if not isinstance(original, (gym.spaces.Dict, gym.spaces.Tuple)):
        return obs
    restored, _ = _unflatten(obs, original, 0)
    return restored


def _unflatten(obs: Any, space: gym.Space, start: int) -> tuple[Any, int]:
    if isinstance(space, gym.spaces.Dict):
        out = {}
        for key, sub in space.spaces.items():
            out[key], start = _unflatten(obs, sub, start)
        return out, start
    if isinstance(space, gym.spaces.Tuple):
        parts = []
        for sub in space.spaces:
            part, start = _unflatten(obs, sub, start)
            parts.append(part)
        return tuple(parts), start
    size = int(gym.spaces.flatdim(space))
    leaf = obs[:, start : start + size]
    if isinstance(space, gym.spaces.Box):
        leaf = leaf.reshape(obs.shape[0], *space.shape)
    return leaf, start + size
