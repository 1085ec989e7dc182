"""DeepMind's Atari frame processing (Mnih et al. 2015), built from Gymnasium's wrappers.

``wrap_deepmind`` is used for ``ALE/...`` env ids when ``preprocessor_pref`` is
``"deepmind"`` (the default), as RLlib 1.x wrapped Atari envs in its ``wrap_deepmind``.
RLlib 1.13's single wrappers (``NoopResetEnv``, ``MaxAndSkipEnv``, ``WarpFrame``,
``FrameStack``, ...) are here too, on Gymnasium's API, for code that builds its own
pipeline from them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

from corral.env.utils import is_atari  # noqa: F401 - RLlib 1.13's name here too
from corral.utils.keyword_aliases import keyword_aliases


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


def wrap_deepmind(
    env: gym.Env, dim: int = 84, framestack: int | bool = 4, frame_skip: int = 4
) -> gym.Env:
    """Up to 30 no-op starts, 4 frames per action (max-pooled over the last two), grey
    frames resized to ``dim`` x ``dim``, the last ``framestack`` frames stacked.

    Observations are ``uint8 [dim, dim, framestack]`` (``[dim, dim, 1]`` without stacking).
    The env must be made with ``frameskip=1``: the wrapper does the skipping
    (``frame_skip=1``: none, for an env that skips frames itself).
    ``framestack`` may be RLlib 1.x's bool: True stacks 4 frames, False none.
    """
    if isinstance(framestack, bool):
        framestack = 4 if framestack else 1
    env = AtariPreprocessing(
        env,
        noop_max=30,
        frame_skip=frame_skip,
        screen_size=dim,
        grayscale_obs=True,
        grayscale_newaxis=framestack <= 1,
    )
    if framestack > 1:
        env = ChannelsLast(FrameStackObservation(env, framestack))
    return env


# -- RLlib 1.13's single Atari wrappers, on Gymnasium's API ---------------------------


def get_wrapper_by_cls(env: Any, cls: type) -> Any:
    """The first wrapper of class `cls` around `env` (following `.env`), or None."""
    current = env
    while current is not None:
        if isinstance(current, cls):
            return current
        current = getattr(current, "env", None)
    return None


class MonitorEnv(gym.Wrapper):
    """Records every episode's return and length (`get_episode_rewards`, ...)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self._current_reward = 0.0
        self._num_steps = 0
        self._total_steps = 0
        self._episode_rewards: list[float] = []
        self._episode_lengths: list[int] = []
        self._num_returned = 0

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        self._current_reward = 0.0
        self._num_steps = 0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._current_reward += float(reward)
        self._num_steps += 1
        self._total_steps += 1
        if terminated or truncated:
            self._episode_rewards.append(self._current_reward)
            self._episode_lengths.append(self._num_steps)
        return obs, reward, terminated, truncated, info

    def get_episode_rewards(self) -> list[float]:
        return self._episode_rewards

    def get_episode_lengths(self) -> list[int]:
        return self._episode_lengths

    def get_total_steps(self) -> int:
        return self._total_steps

    def next_episode_results(self) -> Iterator[tuple[float, int]]:
        """(return, length) of each episode ended since the last call."""
        for i in range(self._num_returned, len(self._episode_rewards)):
            yield self._episode_rewards[i], self._episode_lengths[i]
        self._num_returned = len(self._episode_rewards)


class NoopResetEnv(gym.Wrapper):
    """Starts each episode with 1 to `noop_max` no-op actions (action 0)."""

    def __init__(self, env: gym.Env, noop_max: int = 30) -> None:
        super().__init__(env)
        self.noop_max = noop_max
        self.override_num_noops: int | None = None
        self.noop_action = 0

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        noops = self.override_num_noops
        if noops is None:
            noops = int(self.unwrapped.np_random.integers(1, self.noop_max + 1))
        for _ in range(noops):
            obs, _, terminated, truncated, info = self.env.step(self.noop_action)
            if terminated or truncated:
                obs, info = self.env.reset()
        return obs, info

    @keyword_aliases(ac="action")
    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict]:
        """The wrapped env's step (`ac`: RLlib 1.13's name of `action`)."""
        return self.env.step(action)


class ClipRewardEnv(gym.RewardWrapper):
    """Rewards clipped to their sign (-1, 0 or 1)."""

    def reward(self, reward: SupportsFloat) -> float:
        return float(np.sign(float(reward)))


class FireResetEnv(gym.Wrapper):
    """Presses FIRE (action 1, then 2) after a reset, for games that wait for it."""

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        self.env.reset(**kwargs)
        for action in (1, 2):
            obs, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                obs, info = self.env.reset()
        return obs, info

    @keyword_aliases(ac="action")
    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict]:
        """The wrapped env's step (`ac`: RLlib 1.13's name of `action`)."""
        return self.env.step(action)


class EpisodicLifeEnv(gym.Wrapper):
    """A lost life ends the episode (terminated); the game itself is reset only when it
    is over, so the next episode starts from where the life was lost."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.lives = 0
        self.was_real_done = True

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.was_real_done = terminated or truncated
        lives = self.unwrapped.ale.lives()
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        if self.was_real_done:
            obs, info = self.env.reset(**kwargs)
        else:  # a no-op step from the lost-life state
            obs, _, _, _, info = self.env.step(0)
        self.lives = self.unwrapped.ale.lives()
        return obs, info


class MaxAndSkipEnv(gym.Wrapper):
    """Repeats each action `skip` times; returns the summed reward and the pixel-wise
    maximum of the last two frames."""

    def __init__(self, env: gym.Env, skip: int = 4) -> None:
        super().__init__(env)
        shape = env.observation_space.shape
        self._obs_buffer = np.zeros((2, *shape), dtype=env.observation_space.dtype)
        self._skip = skip

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict]:
        total = 0.0
        terminated = truncated = False
        info: dict = {}
        for i in range(self._skip):
            obs, reward, terminated, truncated, info = self.env.step(action)
            if i >= self._skip - 2:
                self._obs_buffer[i - (self._skip - 2)] = obs
            total += float(reward)
            if terminated or truncated:
                break
        return self._obs_buffer.max(axis=0), total, terminated, truncated, info


class WarpFrame(gym.ObservationWrapper):
    """Grey frames resized to `dim` x `dim` (OpenCV, area interpolation): `uint8 [dim,
    dim, 1]`."""

    def __init__(self, env: gym.Env, dim: int) -> None:
        super().__init__(env)
        self.width = self.height = dim
        self.observation_space = gym.spaces.Box(0, 255, (dim, dim, 1), dtype=np.uint8)

    @keyword_aliases(frame="observation")
    def observation(self, observation: Any) -> np.ndarray:
        """The frame grey and resized (`frame`: RLlib 1.13's name of `observation`)."""
        from corral.utils.images import resize, rgb2gray

        return resize(rgb2gray(np.asarray(observation)), self.height, self.width)[:, :, None]


class FrameStack(gym.Wrapper):
    """The last `k` frames stacked on the last axis (`[H, W, k * C]`)."""

    def __init__(self, env: gym.Env, k: int) -> None:
        super().__init__(env)
        self.k = k
        self.frames: deque = deque(maxlen=k)
        space = env.observation_space
        shape = space.shape
        self.observation_space = gym.spaces.Box(
            0, 255, (*shape[:-1], shape[-1] * k), dtype=space.dtype
        )

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        obs, info = self.env.reset(**kwargs)
        for _ in range(self.k):
            self.frames.append(obs)
        return self._stacked(), info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.frames.append(obs)
        return self._stacked(), reward, terminated, truncated, info

    def _stacked(self) -> np.ndarray:
        return np.concatenate(list(self.frames), axis=-1)


class FrameStackTrajectoryView(gym.ObservationWrapper):
    """One grey frame without its channel axis (`[H, W]`): the stacking is left to the
    model's trajectory view (a `shift` range of observations)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        space = env.observation_space
        if space.shape[-1] != 1:
            raise ValueError(
                f"FrameStackTrajectoryView takes one-channel frames [H, W, 1], got {space.shape}"
            )
        self.observation_space = gym.spaces.Box(0, 255, space.shape[:-1], dtype=space.dtype)

    def observation(self, observation: Any) -> np.ndarray:
        return np.squeeze(observation, axis=-1)


class ScaledFloatFrame(gym.ObservationWrapper):
    """Frames as float32 in [0, 1] (divided by 255)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.observation_space = gym.spaces.Box(0.0, 1.0, env.observation_space.shape, np.float32)

    def observation(self, observation: Any) -> np.ndarray:
        return np.asarray(observation, np.float32) / 255.0
