"""View requirements added to (or removed from) a policy's `view_requirements` after its
worker was built are sampled from the next `sample()` on, as RLlib 1.13's collectors
read them whenever they built a batch."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from corral.agents.pg.pg_torch_policy import PGTorchPolicy
from corral.evaluation.rollout_worker import RolloutWorker
from corral.policy.sample_batch import SampleBatch
from corral.policy.view_requirement import ViewRequirement


def _worker(**kwargs) -> RolloutWorker:
    return RolloutWorker(
        env_creator=lambda ctx: gym.make("CartPole-v1"),
        policy_spec=PGTorchPolicy,
        policy_config={"model": {"fcnet_hiddens": [8]}},
        seed=0,
        **kwargs,
    )


def _add_views(worker: RolloutWorker) -> None:
    reqs = worker.get_policy().view_requirements
    reqs["next_actions"] = ViewRequirement(
        SampleBatch.ACTIONS, shift=1, space=gym.spaces.Discrete(2), used_for_compute_actions=False
    )
    reqs["rewards_2_ago"] = ViewRequirement(SampleBatch.REWARDS, shift=-2)


def _check_next_actions(batch: SampleBatch) -> None:
    for episode in batch.split_by_episode():
        actions, nxt = episode[SampleBatch.ACTIONS], episode["next_actions"]
        np.testing.assert_array_equal(nxt[:-1], actions[1:])
        if episode[SampleBatch.DONES][-1]:
            assert nxt[-1] == 0  # nothing after an episode's end


def test_views_added_after_the_worker_was_built_are_sampled():
    worker = _worker(num_envs=2, rollout_fragment_length=50)
    try:
        _add_views(worker)
        batch = worker.sample()
        assert batch.count == 100
        _check_next_actions(batch)
        for episode in batch.split_by_episode():
            t, rewards, ago = (
                episode[SampleBatch.T],
                episode[SampleBatch.REWARDS],
                episode["rewards_2_ago"],
            )
            # Every episode started after the change: zeros before its start only.
            np.testing.assert_array_equal(ago[t >= 2], rewards[:-2][t[2:] >= 2])
            np.testing.assert_array_equal(ago[t < 2], 0)
        # Removed again: the columns are gone from the next batch.
        reqs = worker.get_policy().view_requirements
        del reqs["next_actions"], reqs["rewards_2_ago"]
        batch = worker.sample()
        assert "next_actions" not in batch and "rewards_2_ago" not in batch
        assert batch.count == 100
    finally:
        worker.stop()


def test_views_added_while_an_unfinished_episode_waits_complete_episodes():
    # Fragments of 5 steps: CartPole's episodes run longer, so each batch leaves
    # the rows of an unfinished episode waiting for the next call.
    worker = _worker(rollout_fragment_length=5, batch_mode="complete_episodes")
    try:
        worker.sample()
        assert any(worker.sampler._pending)  # an episode's rows wait for the next call
        _add_views(worker)
        batch = worker.sample()
        for column in ("next_actions", "rewards_2_ago"):
            assert len(batch[column]) == batch.count
        _check_next_actions(batch)
    finally:
        worker.stop()
