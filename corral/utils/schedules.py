"""Values that change with the number of env steps (learning rates, coefficients).

The classes take RLlib 1.13's arguments (``framework`` is accepted and unused: schedules
compute plain floats).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any


class Schedule:
    """A value as a function of the timestep: ``schedule.value(t)`` (or ``schedule(t)``).

    Subclasses implement :meth:`_value`.
    """

    def __init__(self, framework: str | None = None) -> None:
        self.framework = framework

    def value(self, t: Any) -> Any:
        """The value at timestep `t`."""
        return self._value(t)

    def _value(self, t: Any) -> Any:
        raise NotImplementedError

    def __call__(self, t: Any) -> Any:
        return self.value(t)


class PiecewiseSchedule(Schedule):
    """Interpolation between `(timestep, value)` endpoints (linear by default).

    This is the format of RLlib's `lr_schedule` and `entropy_coeff_schedule`:
    `[[0, 1e-3], [100_000, 1e-4]]`. Before the first endpoint the first value
    holds; after the last, `outside_value` (default: the last value).

    Args:
        endpoints: sorted `(timestep, value)` pairs.
        framework: unused (RLlib's signature).
        interpolation: ``f(left, right, alpha)`` between two endpoints' values (default
            linear).
        outside_value: the value after the last endpoint.
    """

    def __init__(
        self,
        endpoints: Sequence[Sequence[float]],
        framework: str | None = None,
        interpolation: Callable[[float, float, float], float] | None = None,
        outside_value: float | None = None,
    ) -> None:
        super().__init__(framework)
        self.interpolation = interpolation
        points = [(int(t), float(v)) for t, v in endpoints]
        if not points:
            raise ValueError("A schedule needs at least one [timestep, value] endpoint.")
        if any(b[0] < a[0] for a, b in zip(points, points[1:])):
            raise ValueError(f"Schedule endpoints must be sorted by timestep, got {points}.")
        self.endpoints = points
        self.outside_value = points[-1][1] if outside_value is None else outside_value

    def value(self, t: int) -> float:
        if t <= self.endpoints[0][0]:
            return self.endpoints[0][1]
        for (t0, v0), (t1, v1) in zip(self.endpoints, self.endpoints[1:]):
            if t0 <= t < t1:
                alpha = (t - t0) / (t1 - t0)
                if self.interpolation is not None:
                    return self.interpolation(v0, v1, alpha)
                return v0 + alpha * (v1 - v0)
        return self.outside_value

    _value = value
    __call__ = value


def make_schedule(schedule: Sequence[Sequence[float]] | None, constant: float) -> PiecewiseSchedule:
    """The schedule given in a config, or a constant one when it is None."""
    if schedule is None:
        return PiecewiseSchedule([[0, constant]])
    return PiecewiseSchedule(schedule)


class ConstantSchedule(Schedule):
    """The same value at every timestep."""

    def __init__(self, value: float, framework: str | None = None) -> None:
        super().__init__(framework)
        self.constant = float(value)

    def value(self, t: int) -> float:
        return self.constant

    _value = value
    __call__ = value


class LinearSchedule(PiecewiseSchedule):
    """`initial_p` at timestep 0, linearly to `final_p` at `schedule_timesteps`, then constant.

    Args:
        schedule_timesteps: steps to go from `initial_p` to `final_p`.
        final_p: the final value.
        framework: unused (RLlib's third argument; corral also takes `initial_p` here
            when a number is given, its older signature).
        initial_p: the value at timestep 0.
    """

    def __init__(
        self,
        schedule_timesteps: int,
        final_p: float,
        framework: Any = None,
        initial_p: float = 1.0,
    ) -> None:
        if isinstance(framework, (int, float)) and not isinstance(framework, bool):
            framework, initial_p = None, float(framework)
        super().__init__(
            [[0, initial_p], [max(int(schedule_timesteps), 1), final_p]], framework=framework
        )
        self.schedule_timesteps = int(schedule_timesteps)
        self.final_p = final_p
        self.initial_p = initial_p


class PolynomialSchedule(Schedule):
    """``final_p + (initial_p - final_p) * (1 - t / schedule_timesteps) ** power``, then
    `final_p` once `schedule_timesteps` have passed."""

    def __init__(
        self,
        schedule_timesteps: int,
        final_p: float,
        framework: str | None = None,
        initial_p: float = 1.0,
        power: float = 2.0,
    ) -> None:
        super().__init__(framework)
        if schedule_timesteps <= 0:
            raise ValueError(f"schedule_timesteps must be > 0, got {schedule_timesteps}")
        self.schedule_timesteps = schedule_timesteps
        self.final_p = final_p
        self.initial_p = initial_p
        self.power = power

    def _value(self, t: Any) -> float:
        t = min(float(t), self.schedule_timesteps)
        fraction = 1.0 - t / self.schedule_timesteps
        return self.final_p + (self.initial_p - self.final_p) * fraction**self.power


class ExponentialSchedule(Schedule):
    """``initial_p * decay_rate ** (t / schedule_timesteps)``."""

    def __init__(
        self,
        schedule_timesteps: int,
        framework: str | None = None,
        initial_p: float = 1.0,
        decay_rate: float = 0.1,
    ) -> None:
        super().__init__(framework)
        if schedule_timesteps <= 0:
            raise ValueError(f"schedule_timesteps must be > 0, got {schedule_timesteps}")
        self.schedule_timesteps = schedule_timesteps
        self.initial_p = initial_p
        self.decay_rate = decay_rate

    def _value(self, t: Any) -> float:
        return self.initial_p * math.pow(self.decay_rate, float(t) / self.schedule_timesteps)
