"""`DMCEnv`: a DeepMind Control Suite task as a Gymnasium env (RLlib's `DMCEnv`).

Needs the `dm-control` extra (`pip install corral[dm-control]`, which brings `dm_env`
and MuJoCo). The task (`dm_control.suite.load(domain_name, task_name, ...)`) is observed
either as its state, the suite's observation dict flattened into one float32 vector, or
as camera pixels (`from_pixels=True`). Actions are normalized to `[-1, 1]` and rescaled
to the task's action bounds. Each `step` repeats the action `frame_skip` times and sums
the rewards. Episodes end as in `DMEnv` (`corral.env.wrappers.dm_env_wrapper`): the
suite's time limit truncates, a task's own termination (discount 0) terminates.

Pixels need a headless OpenGL renderer: set the `MUJOCO_GL` environment variable to
`egl` (a GPU or Mesa's EGL) or `osmesa` (software) before dm_control is first imported.
Without one, a pixel `DMCEnv` refuses to be built, naming `MUJOCO_GL`.
"""

from __future__ import annotations

import os
from typing import Any

import gymnasium as gym
import numpy as np

from corral.env.wrappers.dm_env_wrapper import (
    INSTALL_HINT,
    import_dm_env_specs,
    reseed_dm_env,
    timestep_flags,
)


def import_suite() -> Any:
    """`dm_control.suite`, or an ImportError saying how to install it."""
    try:
        import absl.logging

        # dm_control logs MuJoCo's notices through absl; keep the errors only.
        absl.logging.set_verbosity("error")
        from dm_control import suite
    except (ImportError, OSError) as e:
        raise ImportError(
            f"DMCEnv needs dm_control and MuJoCo ({INSTALL_HINT}); importing it failed: {e}"
        ) from e
    return suite


def _bounds(specs_seq: Any) -> tuple[np.ndarray, np.ndarray]:
    """The flat lower and upper bounds of the concatenated arrays of `specs_seq`."""
    specs = import_dm_env_specs()
    lows, highs = [], []
    for spec in specs_seq:
        size = int(np.prod(spec.shape))
        if isinstance(spec, specs.BoundedArray):
            lows.append(np.broadcast_to(spec.minimum, spec.shape).reshape(size))
            highs.append(np.broadcast_to(spec.maximum, spec.shape).reshape(size))
        else:
            lows.append(np.full(size, -np.inf))
            highs.append(np.full(size, np.inf))
    return (
        np.concatenate(lows).astype(np.float32),
        np.concatenate(highs).astype(np.float32),
    )


def flatten_observation(observation: Any) -> np.ndarray:
    """A dm_control observation dict as one float32 vector (the dict's order)."""
    return np.concatenate(
        [np.asarray(v, dtype=np.float32).reshape(-1) for v in observation.values()]
    )


class DMCEnv(gym.Env):
    """A DeepMind Control Suite task (`domain_name`, `task_name`) as a Gymnasium env.

    Args:
        domain_name: the suite's domain ("cartpole", "walker", "cheetah", ...).
        task_name: a task of that domain ("balance", "walk", "run", ...).
        task_kwargs: keyword arguments of the task, e.g. `{"time_limit": 5.0}` (seconds)
            or `{"random": 0}` (the task's seed).
        visualize_reward: colour the bodies by reward in rendered frames.
        from_pixels: observe camera frames instead of the state vector.
        height: the frames' height in pixels.
        width: the frames' width in pixels.
        camera_id: the camera that renders the frames.
        frame_skip: how many physics control steps one `step` repeats its action for.
        environment_kwargs: further keyword arguments of dm_control's
            `control.Environment` (e.g. `{"n_sub_steps": 4}`).
        channels_first: frames as `[3, H, W]` (True) or `[H, W, 3]` (False).
        preprocess: frames as float32 in `[-0.5, 0.5]` (True) or uint8 in `[0, 255]`.

    Raises:
        ImportError: dm_control is not installed.
        ValueError: `frame_skip`, `height` or `width` is below 1.
        RuntimeError: `from_pixels` and no OpenGL renderer works (set `MUJOCO_GL`).
    """

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(
        self,
        domain_name: str,
        task_name: str,
        task_kwargs: dict | None = None,
        visualize_reward: bool = False,
        from_pixels: bool = False,
        height: int = 64,
        width: int = 64,
        camera_id: int = 0,
        frame_skip: int = 2,
        environment_kwargs: dict | None = None,
        channels_first: bool = True,
        preprocess: bool = True,
    ) -> None:
        for key, value in (("frame_skip", frame_skip), ("height", height), ("width", width)):
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"DMCEnv: {key} must be an int >= 1, got {value!r}.")
        suite = import_suite()
        super().__init__()
        self._from_pixels = bool(from_pixels)
        self._height = int(height)
        self._width = int(width)
        self._camera_id = camera_id
        self._frame_skip = int(frame_skip)
        self._channels_first = bool(channels_first)
        self.preprocess = bool(preprocess)
        self.render_mode = "rgb_array"

        self._env = suite.load(
            domain_name=domain_name,
            task_name=task_name,
            task_kwargs=task_kwargs,
            visualize_reward=visualize_reward,
            environment_kwargs=environment_kwargs,
        )

        low, high = _bounds([self._env.action_spec()])
        self._true_action_space = gym.spaces.Box(low, high, dtype=np.float32)
        self._norm_action_space = gym.spaces.Box(-1.0, 1.0, shape=low.shape, dtype=np.float32)

        low, high = _bounds(self._env.observation_spec().values())
        self._state_space = gym.spaces.Box(low, high, dtype=np.float32)
        self._observation_space: gym.spaces.Box
        if self._from_pixels:
            shape = (3, height, width) if channels_first else (height, width, 3)
            if self.preprocess:
                self._observation_space = gym.spaces.Box(-0.5, 0.5, shape=shape, dtype=np.float32)
            else:
                self._observation_space = gym.spaces.Box(0, 255, shape=shape, dtype=np.uint8)
            self._check_renderer()
        else:
            self._observation_space = self._state_space
        # The flat state after the latest reset or step (RLlib's `current_state`).
        self.current_state: np.ndarray | None = None

    def __getattr__(self, name: str) -> Any:
        # Everything else is the dm_control env's (`physics`, `task`, `action_spec`, ...).
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._env, name)

    @property
    def dm_env(self) -> Any:
        """The wrapped dm_control `control.Environment`."""
        return self._env

    @property
    def observation_space(self) -> gym.spaces.Box:  # type: ignore[override]
        """What `reset` and `step` observe (RLlib 1.13's read-only property): the frames'
        Box with `from_pixels`, else `state_space`."""
        return self._observation_space

    @property
    def action_space(self) -> gym.spaces.Box:  # type: ignore[override]
        """The actions `step` takes (RLlib 1.13's read-only property): a Box in [-1, 1] per
        dimension, rescaled to the task's bounds."""
        return self._norm_action_space

    @property
    def state_space(self) -> gym.spaces.Box:
        """The space of the flat state vector (`current_state`), also with pixels."""
        return self._state_space

    def _check_renderer(self) -> None:
        try:
            self._env.physics.render(height=8, width=8, camera_id=self._camera_id)
        except Exception as e:
            raise RuntimeError(
                "DMCEnv(from_pixels=True) needs an OpenGL renderer and none works here "
                f"(MUJOCO_GL={os.environ.get('MUJOCO_GL', '<unset>')!s}): set MUJOCO_GL=egl "
                "(GPU or Mesa EGL) or MUJOCO_GL=osmesa (software) before dm_control is "
                f"first imported, or observe the state (from_pixels=False). Cause: "
                f"{type(e).__name__}: {e}"
            ) from e

    def _observe(self, time_step: Any) -> np.ndarray:
        self.current_state = flatten_observation(time_step.observation)
        if not self._from_pixels:
            return self.current_state
        frame = self.render(height=self._height, width=self._width, camera_id=self._camera_id)
        if self._channels_first:
            frame = np.ascontiguousarray(frame.transpose(2, 0, 1))
        if self.preprocess:
            return (frame.astype(np.float32) / 255.0 - 0.5).astype(np.float32)
        return frame.astype(np.uint8, copy=False)

    def _true_action(self, action: Any) -> np.ndarray:
        """A normalized action (clipped to [-1, 1]) rescaled to the task's bounds."""
        norm = np.asarray(action, dtype=np.float64).reshape(-1)
        if norm.shape != self._norm_action_space.shape:
            raise ValueError(
                f"DMCEnv: an action of shape {self._norm_action_space.shape} was expected, got "
                f"{np.shape(action)}."
            )
        norm = np.clip(norm, -1.0, 1.0)
        low = self._true_action_space.low.astype(np.float64)
        high = self._true_action_space.high.astype(np.float64)
        return low + (norm + 1.0) * 0.5 * (high - low)

    def reset(
        self, *, seed: int | None = None, options: dict | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            reseed_dm_env(self._env, seed, self)
        time_step = self._env.reset()
        return self._observe(time_step), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        true_action = self._true_action(action)
        # The physics state the action was taken in (RLlib's `internal_state`).
        info: dict[str, Any] = {"internal_state": self._env.physics.get_state().copy()}
        reward = 0.0
        for _ in range(self._frame_skip):
            time_step = self._env.step(true_action)
            reward += float(time_step.reward or 0.0)
            if time_step.last():
                break
        terminated, truncated = timestep_flags(time_step)
        info["discount"] = time_step.discount
        return self._observe(time_step), reward, terminated, truncated, info

    def render(
        self,
        mode: str = "rgb_array",
        height: int | None = None,
        width: int | None = None,
        camera_id: int | None = None,
    ) -> np.ndarray:
        """A `[H, W, 3]` uint8 frame of the scene (defaults: the env's size and camera).

        Raises:
            ValueError: a `mode` other than "rgb_array".
        """
        if mode != "rgb_array":
            raise ValueError(f"DMCEnv renders 'rgb_array' frames only, not {mode!r}.")
        return self._env.physics.render(
            height=height or self._height,
            width=width or self._width,
            camera_id=self._camera_id if camera_id is None else camera_id,
        )

    def close(self) -> None:
        self._env.close()
