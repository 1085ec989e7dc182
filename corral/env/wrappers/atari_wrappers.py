"""DeepMind's Atari frame processing (Mnih et al. 2015), built from Gymnasium's wrappers.

Used for ``ALE/...`` env ids when ``preprocessor_pref`` is ``"deepmind"`` (the default),
as RLlib 1.x wrapped Atari envs in its ``wrap_deepmind``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation


class ChannelsLast(gym.ObservationWrapper):
    """Moves a frame stack's leading stack axis to the end: ``[k, H, W] -> [H, W, k]``.

    Gymnasium stacks frames on a new first axis; corral's conv net (like RLlib's) reads
    images channels last.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        space = env.observation_space
        self.observation_space = gym.spaces.Box(
            np.moveaxis(space.low, 0, -1), np.moveaxis(space.high, 0, -1), dtype=space.dtype
        )

    def observation(self, observation: Any) -> np.ndarray:
        return np.ascontiguousarray(np.moveaxis(np.asarray(observation), 0, -1))


def wrap_deepmind(env: gym.Env, dim: int = 84, framestack: int = 4) -> gym.Env:
    """Up to 30 no-op starts, 4 frames per action (max-pooled over the last two), grey
    frames resized to ``dim`` x ``dim``, the last ``framestack`` frames stacked.

    Observations are ``uint8 [dim, dim, framestack]`` (``[dim, dim, 1]`` without stacking).
    The env must be made with ``frameskip=1``: the wrapper does the skipping.
    """
    env = AtariPreprocessing(
        env,
        noop_max=30,
        frame_skip=4,
        screen_size=dim,
        grayscale_obs=True,
        grayscale_newaxis=framestack <= 1,
    )
    if framestack > 1:
        env = ChannelsLast(FrameStackObservation(env, framestack))
    return env
