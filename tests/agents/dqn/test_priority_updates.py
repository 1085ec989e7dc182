"""Prioritized replay's new priorities: from the update's own TD errors, or, where those
are missing, of the wrong length or not finite (a skipped minibatch), from a second pass
(`compute_td_error`)."""

from __future__ import annotations

import numpy as np
import pytest

from corral.agents.dqn import DQNTrainer


def _trainer():
    return DQNTrainer(
        env="CartPole-v1",
        config={
            "num_workers": 0,
            "rollout_fragment_length": 4,
            "train_batch_size": 8,
            "learning_starts": 16,
            "prioritized_replay": True,
            "min_sample_timesteps_per_reporting": 40,
            "model": {"fcnet_hiddens": [8]},
            "seed": 0,
        },
    )


@pytest.mark.parametrize(
    ("logged", "recomputed"),
    [
        ("own", False),
        ("none", True),
        ("short", True),
        ("nan", True),
        ("inf", True),
    ],
)
def test_priorities_come_from_the_losses_unless_those_are_unusable(logged, recomputed):
    trainer = _trainer()
    try:
        policy = trainer.get_policy()
        own_pop, own_compute = policy.pop_td_errors, policy.compute_td_error
        calls = []

        def pop():
            td = own_pop()
            if logged == "none":
                return None
            if logged == "short":
                return td[:-1]
            if logged in ("nan", "inf"):
                td = td.copy()
                td[len(td) // 2] = np.nan if logged == "nan" else -np.inf
            return td

        def compute(batch):
            calls.append(batch.count)
            return own_compute(batch)

        policy.pop_td_errors, policy.compute_td_error = pop, compute
        trainer.train()
        assert bool(calls) is recomputed
        buffer = trainer.local_replay_buffer.replay_buffers["default_policy"]
        priorities = buffer.get_state()["priorities"]
        assert len(priorities) and np.isfinite(priorities).all() and (priorities > 0).all()
    finally:
        trainer.stop()
