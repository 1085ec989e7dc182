"""Values that change with the number of env steps (learning rates, coefficients)."""

from __future__ import annotations

from collections.abc import Sequence


class PiecewiseSchedule:
    """Linear interpolation between `(timestep, value)` endpoints.

    This is the format of RLlib's `lr_schedule` and `entropy_coeff_schedule`:
    `[[0, 1e-3], [100_000, 1e-4]]`. Before the first endpoint the first value
    holds; after the last, `outside_value` (default: the last value).
    """

    def __init__(
        self, endpoints: Sequence[Sequence[float]], outside_value: float | None = None
    ) -> None:
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
                return v0 + (t - t0) / (t1 - t0) * (v1 - v0)
        return self.outside_value

    __call__ = value


def make_schedule(schedule: Sequence[Sequence[float]] | None, constant: float) -> PiecewiseSchedule:
    """The schedule given in a config, or a constant one when it is None."""
    if schedule is None:
        return PiecewiseSchedule([[0, constant]])
    return PiecewiseSchedule(schedule)


class ConstantSchedule:
    """The same value at every timestep."""

    def __init__(self, value: float) -> None:
        self.constant = float(value)

    def value(self, t: int) -> float:
        return self.constant

    __call__ = value


class LinearSchedule(PiecewiseSchedule):
    """`initial_p` at timestep 0, linearly to `final_p` at `schedule_timesteps`, then constant."""

    def __init__(self, schedule_timesteps: int, final_p: float, initial_p: float = 1.0) -> None:
        super().__init__([[0, initial_p], [max(int(schedule_timesteps), 1), final_p]])
