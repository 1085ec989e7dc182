"""`ViewRequirement`: which data a policy wants to see of a trajectory (RLlib 1.13's
trajectory view API)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from corral.env.gym_compat import convert_space


class ViewRequirement:
    """One column a policy reads, and from where in the trajectory.

    Args:
        data_col: the column to read (None: the key this requirement is stored under).
        space: the space of one value of the column (old gym spaces are converted).
        shift: time offset(s) relative to the current step: an int (-1: the previous
            step's value), a list of ints, or a range string such as "-50:-1".
        index: an absolute index instead of a shift (rarely used).
        batch_repeat_value: with `shift` ranges, how often the value repeats in a batch
            (e.g. `max_seq_len` for RNN states: one state per sequence).
        used_for_compute_actions: whether `compute_actions` reads it.
        used_for_training: whether the loss reads it.
    """

    def __init__(
        self,
        data_col: str | None = None,
        space: gym.Space | None = None,
        shift: int | str | list[int] = 0,
        index: int | None = None,
        batch_repeat_value: int = 1,
        used_for_compute_actions: bool = True,
        used_for_training: bool = True,
    ) -> None:
        self.data_col = data_col
        self.space = (
            convert_space(space)
            if space is not None
            else gym.spaces.Box(float("-inf"), float("inf"), shape=())
        )
        self.shift = shift
        if isinstance(shift, (list, tuple)):
            self.shift_arr = np.array(shift)
        elif isinstance(shift, str):
            lo, hi = (int(p) for p in shift.split(":"))
            self.shift_arr = np.arange(lo, hi + 1)
        else:
            self.shift_arr = np.array([shift])
        self.shift_from = int(self.shift_arr[0])
        self.shift_to = int(self.shift_arr[-1])
        self.index = index
        self.batch_repeat_value = batch_repeat_value
        self.used_for_compute_actions = used_for_compute_actions
        self.used_for_training = used_for_training

    def __repr__(self) -> str:
        return (
            f"ViewRequirement(data_col={self.data_col!r}, space={self.space}, "
            f"shift={self.shift!r}, used_for_compute_actions={self.used_for_compute_actions}, "
            f"used_for_training={self.used_for_training})"
        )

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, ViewRequirement):
            return NotImplemented
        return (
            self.data_col == other.data_col
            and self.space == other.space
            and self.shift == other.shift
            and self.index == other.index
            and self.used_for_compute_actions == other.used_for_compute_actions
            and self.used_for_training == other.used_for_training
        )


def default_view_requirements(obs_space: Any, action_space: Any) -> dict[str, ViewRequirement]:
    """The columns every policy sees (RLlib 1.13's `Policy._get_default_view_requirements`)."""
    from corral.policy.sample_batch import SampleBatch

    return {
        SampleBatch.OBS: ViewRequirement(space=obs_space),
        SampleBatch.NEXT_OBS: ViewRequirement(
            data_col=SampleBatch.OBS, shift=1, space=obs_space, used_for_compute_actions=False
        ),
        SampleBatch.ACTIONS: ViewRequirement(space=action_space, used_for_compute_actions=False),
        SampleBatch.PREV_ACTIONS: ViewRequirement(
            data_col=SampleBatch.ACTIONS, shift=-1, space=action_space
        ),
        SampleBatch.REWARDS: ViewRequirement(),
        SampleBatch.PREV_REWARDS: ViewRequirement(data_col=SampleBatch.REWARDS, shift=-1),
        SampleBatch.DONES: ViewRequirement(),
        SampleBatch.INFOS: ViewRequirement(),
        SampleBatch.EPS_ID: ViewRequirement(),
        SampleBatch.UNROLL_ID: ViewRequirement(),
        SampleBatch.AGENT_INDEX: ViewRequirement(),
        SampleBatch.T: ViewRequirement(),
    }


__all__ = ["ViewRequirement"]
