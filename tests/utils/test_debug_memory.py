"""`corral.utils.debug.check_memory_leaks` (RLlib 1.13's memory-leak checker)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.pg import PGTrainer
from corral.utils.debug import check_memory_leaks
from corral.utils.debug.memory import CHECKABLE, Suspect, _linregress

# What the leaking env keeps: one more object each step, never freed.
_LEAKED: list[bytes] = []


class LeakyCartPole(gym.Wrapper):
    """CartPole whose every step appends 512 bytes to a module-level list."""

    def __init__(self, config: dict | None = None) -> None:
        super().__init__(gym.make("CartPole-v1"))

    def step(self, action):
        _LEAKED.append(bytes(512))
        return self.env.step(action)


def _trainer(env) -> PGTrainer:
    return PGTrainer(config={"env": env, "num_workers": 0, "seed": 0})


def test_a_leaking_env_is_reported_under_env():
    trainer = _trainer(LeakyCartPole)
    try:
        results = check_memory_leaks(trainer, to_check={"env"}, repeats=20)
    finally:
        trainer.stop()
        _LEAKED.clear()
    assert set(results) == {"env"}
    suspects = results["env"]
    assert suspects and all(isinstance(s, Suspect) for s in suspects)
    leak = [s for s in suspects if s.traceback[-1].filename == __file__]
    assert len(leak) == 1, [str(s.traceback[-1]) for s in suspects]
    (leak,) = leak
    # Over 512 B per call (an episode has several steps), along a straight line.
    assert leak.slope > 512 and leak.rvalue > 0.9
    assert leak.memory_increase == leak.hist[-1] - leak.hist[0] > 0
    # The last round made 3 * 20 calls (a snapshot each).
    assert len(leak.hist) == 60


def test_a_clean_env_has_no_suspects():
    trainer = _trainer("CartPole-v1")
    try:
        results = check_memory_leaks(trainer, to_check={"env"}, repeats=30)
        # The sampler still works on the env afterwards.
        assert trainer.workers.local_worker().sample().count > 0
    finally:
        trainer.stop()
    assert results["env"] == []


def test_every_part_runs():
    """Policy, model and worker checks run end to end (with so few calls, a one-off
    allocation can pass for growth: only the form is checked here)."""
    trainer = _trainer("CartPole-v1")
    try:
        results = check_memory_leaks(trainer, repeats=2, max_num_trials=1)
    finally:
        trainer.stop()
    assert set(results) <= set(CHECKABLE)
    assert all(isinstance(s, Suspect) for found in results.values() for s in found)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"to_check": {"env", "learner"}}, "unknown parts \\['learner'\\]"),
        ({"repeats": 0}, "repeats=0"),
        ({"max_num_trials": 0}, "max_num_trials=0"),
    ],
)
def test_bad_arguments_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        check_memory_leaks(object(), **kwargs)


def test_env_check_needs_a_local_env():
    trainer = PGTrainer(config={"env": "CartPole-v1", "num_workers": 1, "seed": 0})
    try:
        with pytest.raises(ValueError, match="create_env_on_driver=True"):
            check_memory_leaks(trainer, to_check={"env"}, repeats=1)
    finally:
        trainer.stop()


def test_linregress_matches_least_squares():
    hist = [10, 30, 20, 50, 60, 55]
    slope, rvalue = _linregress(hist)
    expected_slope = np.polyfit(np.arange(len(hist)), hist, 1)[0]
    assert slope == pytest.approx(expected_slope)
    assert rvalue == pytest.approx(np.corrcoef(np.arange(len(hist)), hist)[0, 1])
    assert _linregress([5, 5, 5]) == (0.0, 0.0)
