"""Env creators of DeepMind Control Suite tasks (RLlib 1.13's example module
`ray.rllib.examples.env.dm_control_suite`, which Dreamer's examples train on).

Each function builds a `corral.env.wrappers.dm_control_wrapper.DMCEnv`; by default from
pixels (64 x 64, channels first) with each action repeated twice, as RLlib's are. Register
one under a name to train on it::

    from corral.tune.registry import register_env
    from corral.env.dm_control_suite import cheetah_run

    register_env("cheetah_run", lambda env_config: cheetah_run(**env_config))

Needs the `dm-control` extra; pixels need `MUJOCO_GL=egl` or `osmesa` on a machine with
no display.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from corral.env.wrappers.dm_control_wrapper import DMCEnv


def _suite_task(domain_name: str, task_name: str, what: str) -> Callable[..., DMCEnv]:
    """The creator of one suite task: `DMCEnv(domain_name, task_name, ...)` with RLlib's
    example defaults (pixels 64 x 64, channels first, each action repeated twice)."""

    def create(
        from_pixels: bool = True,
        height: int = 64,
        width: int = 64,
        frame_skip: int = 2,
        channels_first: bool = True,
        **kwargs: Any,
    ) -> DMCEnv:
        return DMCEnv(
            domain_name,
            task_name,
            from_pixels=from_pixels,
            height=height,
            width=width,
            frame_skip=frame_skip,
            channels_first=channels_first,
            **kwargs,
        )

    create.__name__ = create.__qualname__ = f"{domain_name}_{task_name}"
    create.__doc__ = f"{what} (further `DMCEnv` arguments in `kwargs`)."
    return create


acrobot_swingup = _suite_task("acrobot", "swingup", "The acrobot swing-up task")
walker_walk = _suite_task("walker", "walk", "The planar walker's walking task")
hopper_hop = _suite_task("hopper", "hop", "The hopper's hopping task")
hopper_stand = _suite_task("hopper", "stand", "The hopper's standing task")
cheetah_run = _suite_task("cheetah", "run", "The half-cheetah's running task")
walker_run = _suite_task("walker", "run", "The planar walker's running task")
pendulum_swingup = _suite_task("pendulum", "swingup", "The pendulum swing-up task")
cartpole_swingup = _suite_task("cartpole", "swingup", "The cart-pole swing-up task")
humanoid_walk = _suite_task("humanoid", "walk", "The humanoid's walking task")
