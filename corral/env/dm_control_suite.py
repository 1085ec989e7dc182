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

from typing import Any

from corral.env.wrappers.dm_control_wrapper import DMCEnv


def _make(
    domain_name: str,
    task_name: str,
    from_pixels: bool,
    height: int,
    width: int,
    frame_skip: int,
    channels_first: bool,
    kwargs: dict[str, Any],
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


def acrobot_swingup(
    from_pixels: bool = True,
    height: int = 64,
    width: int = 64,
    frame_skip: int = 2,
    channels_first: bool = True,
    **kwargs: Any,
) -> DMCEnv:
    """The acrobot swing-up task (further `DMCEnv` arguments in `kwargs`)."""
    return _make(
        "acrobot", "swingup", from_pixels, height, width, frame_skip, channels_first, kwargs
    )


def walker_walk(
    from_pixels: bool = True,
    height: int = 64,
    width: int = 64,
    frame_skip: int = 2,
    channels_first: bool = True,
    **kwargs: Any,
) -> DMCEnv:
    """The planar walker's walking task (further `DMCEnv` arguments in `kwargs`)."""
    return _make("walker", "walk", from_pixels, height, width, frame_skip, channels_first, kwargs)


def hopper_hop(
    from_pixels: bool = True,
    height: int = 64,
    width: int = 64,
    frame_skip: int = 2,
    channels_first: bool = True,
    **kwargs: Any,
) -> DMCEnv:
    """The hopper's hopping task (further `DMCEnv` arguments in `kwargs`)."""
    return _make("hopper", "hop", from_pixels, height, width, frame_skip, channels_first, kwargs)


def hopper_stand(
    from_pixels: bool = True,
    height: int = 64,
    width: int = 64,
    frame_skip: int = 2,
    channels_first: bool = True,
    **kwargs: Any,
) -> DMCEnv:
    """The hopper's standing task (further `DMCEnv` arguments in `kwargs`)."""
    return _make("hopper", "stand", from_pixels, height, width, frame_skip, channels_first, kwargs)


def cheetah_run(
    from_pixels: bool = True,
    height: int = 64,
    width: int = 64,
    frame_skip: int = 2,
    channels_first: bool = True,
    **kwargs: Any,
) -> DMCEnv:
    """The half-cheetah's running task (further `DMCEnv` arguments in `kwargs`)."""
    return _make("cheetah", "run", from_pixels, height, width, frame_skip, channels_first, kwargs)


def walker_run(
    from_pixels: bool = True,
    height: int = 64,
    width: int = 64,
    frame_skip: int = 2,
    channels_first: bool = True,
    **kwargs: Any,
) -> DMCEnv:
    """The planar walker's running task (further `DMCEnv` arguments in `kwargs`)."""
    return _make("walker", "run", from_pixels, height, width, frame_skip, channels_first, kwargs)


def pendulum_swingup(
    from_pixels: bool = True,
    height: int = 64,
    width: int = 64,
    frame_skip: int = 2,
    channels_first: bool = True,
    **kwargs: Any,
) -> DMCEnv:
    """The pendulum swing-up task (further `DMCEnv` arguments in `kwargs`)."""
    return _make(
        "pendulum", "swingup", from_pixels, height, width, frame_skip, channels_first, kwargs
    )


def cartpole_swingup(
    from_pixels: bool = True,
    height: int = 64,
    width: int = 64,
    frame_skip: int = 2,
    channels_first: bool = True,
    **kwargs: Any,
) -> DMCEnv:
    """The cart-pole swing-up task (further `DMCEnv` arguments in `kwargs`)."""
    return _make(
        "cartpole", "swingup", from_pixels, height, width, frame_skip, channels_first, kwargs
    )


def humanoid_walk(
    from_pixels: bool = True,
    height: int = 64,
    width: int = 64,
    frame_skip: int = 2,
    channels_first: bool = True,
    **kwargs: Any,
) -> DMCEnv:
    """The humanoid's walking task (further `DMCEnv` arguments in `kwargs`)."""
    return _make("humanoid", "walk", from_pixels, height, width, frame_skip, channels_first, kwargs)
