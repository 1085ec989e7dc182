"""RLlib 1.13's `Episode` methods: `soft_reset`, `add_extra_batch`, `new_batch_builder`
and the `policy_mapping_fn` attribute."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.callbacks import DefaultCallbacks
from corral.agents.pg.pg_torch_policy import PGTorchPolicy
from corral.evaluation.episode import Episode
from corral.evaluation.rollout_worker import RolloutWorker
from corral.evaluation.sample_batch_builder import MultiAgentSampleBatchBuilder
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch


def test_soft_reset_starts_a_new_logical_episode_keeping_the_agent_state():
    episode = Episode(7, 0, {})
    episode.length, episode.total_reward = 12, 3.5
    episode.agent_rewards[("agent0", "default_policy")] = 3.5
    episode._set_last("agent0", obs=np.ones(2), rnn_state=[np.zeros(3)])
    episode.soft_reset()
    assert episode.episode_id != 7
    assert (episode.length, episode.total_reward, dict(episode.agent_rewards)) == (0, 0.0, {})
    np.testing.assert_array_equal(episode.last_observation_for("agent0"), np.ones(2))
    assert len(episode.rnn_state_for("agent0")) == 1


def test_policy_mapping_fn_attribute():
    default = Episode(1, 0, {})
    assert default.policy_mapping_fn("a", default, worker=None) == "default_policy"

    def fn(agent_id, episode, worker, **kwargs):
        return f"p_{agent_id}"

    episode = Episode(1, 0, {}, policy_mapping_fn=fn)
    assert episode.policy_mapping_fn is fn and episode.policy_for("x") == "p_x"
    episode.policy_mapping_fn = lambda agent_id, *args, **kwargs: "other"
    assert episode.policy_for("y") == "other"


def test_extra_batches_come_out_with_the_next_sample():
    builders = []

    class AddExtra(DefaultCallbacks):
        def on_episode_end(self, *, episode, **kwargs):
            builders.append(episode.new_batch_builder())
            episode.add_extra_batch(MultiAgentBatch({"side": SampleBatch({"x": np.arange(3)})}, 3))

    worker = RolloutWorker(
        env_creator=lambda ctx: gym.make("CartPole-v1"),
        policy_spec=PGTorchPolicy,
        rollout_fragment_length=10,
        batch_mode="complete_episodes",
        callbacks=AddExtra,
        seed=0,
    )
    try:
        batch = worker.sample()
        assert isinstance(batch, MultiAgentBatch)
        episodes = len(builders)
        assert episodes >= 1
        np.testing.assert_array_equal(
            batch.policy_batches["side"]["x"], np.tile(np.arange(3), episodes)
        )
        assert batch.policy_batches["default_policy"].count >= 10
        assert isinstance(builders[0], MultiAgentSampleBatchBuilder)
        assert set(builders[0].policy_builders) == {"default_policy"}
        assert builders[0] is not builders[-1] or episodes == 1
        # Handed out once: the next batch holds only its own episodes' extras.
        before = len(builders)
        again = worker.sample()
        assert again.policy_batches["side"].count == 3 * (len(builders) - before)
    finally:
        worker.stop()


def test_add_extra_batch_needs_a_worker():
    with pytest.raises(RuntimeError, match="belongs to no RolloutWorker"):
        Episode(1, 0, {}).add_extra_batch(SampleBatch({"x": np.arange(2)}))
