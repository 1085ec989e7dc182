"""View requirements added to (or removed from) a policy's `view_requirements` after its
worker was built are sampled from the next `sample()` on, as RLlib 1.13's collectors
read them whenever they built a batch."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from corral.agents.pg.pg_torch_policy import PGTorchPolicy
from corral.env.multi_agent_env import MultiAgentEnv
from corral.evaluation.rollout_worker import RolloutWorker
from corral.policy.policy import PolicySpec
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


# -- multi-agent ---------------------------------------------------------------

_OBS = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
_ACT = gym.spaces.Discrete(3)


class _TakeTurns(MultiAgentEnv):
    """Agent "a" acts every step, agent "b" at even steps only (so b's action often
    waits for its outcome across `sample()` calls); episodes of `length` steps. Each
    observation is [step, episode code], unique within a run."""

    def __init__(self, length: int, code: int) -> None:
        super().__init__()
        self.observation_space, self.action_space = _OBS, _ACT
        self._agent_ids = {"a", "b"}
        self.possible_agents = ["a", "b"]
        self.length, self.code = length, float(code)

    def _obs(self, agents):
        return {ag: np.array([self.t + 1, self.code], np.float32) for ag in agents}

    def reset(self, *, seed=None, options=None):
        self.t, self.code = 0, self.code + 100.0
        return self._obs(["a", "b"]), {}

    def step(self, actions):
        self.t += 1
        done = self.t >= self.length
        obs = self._obs(["a", "b"] if done or self.t % 2 == 0 else ["a"])
        return obs, dict.fromkeys(actions, 1.0), {"__all__": done}, {"__all__": False}, {}


def _multi_agent_worker(**kwargs) -> RolloutWorker:
    return RolloutWorker(
        env_creator=lambda ctx: _TakeTurns(7 + 4 * ctx.vector_index, ctx.vector_index),
        policy_spec={p: PolicySpec(PGTorchPolicy, _OBS, _ACT, {}) for p in ("pa", "pb")},
        policy_mapping_fn=lambda agent_id, *args, **kw: "p" + agent_id,
        policy_config={"model": {"fcnet_hiddens": [8]}},
        seed=0,
        **kwargs,
    )


def _add_multi_agent_views(reqs: dict) -> None:
    reqs["prev_obs"] = ViewRequirement(SampleBatch.OBS, shift=-1, space=_OBS)
    reqs["next_actions"] = ViewRequirement(
        SampleBatch.ACTIONS, shift=1, space=_ACT, used_for_compute_actions=False
    )


def _check_multi_agent_views(batch: SampleBatch, waiting: dict) -> None:
    """b's views; `waiting`: b's rows (and pending action) in each episode running at
    the change. Those rows, and the first after them (its previous observation came
    before the change), read zeros for the obs view, as rows at an episode's start."""
    for column in ("prev_obs", "next_actions"):
        assert len(batch[column]) == batch.count
    for episode in batch.split_by_episode():
        obs, prev = episode[SampleBatch.OBS], episode["prev_obs"]
        actions, nxt = episode[SampleBatch.ACTIONS], episode["next_actions"]
        np.testing.assert_array_equal(nxt[:-1], actions[1:])
        if episode[SampleBatch.DONES][-1]:
            assert nxt[-1] == 0  # nothing after an episode's end
        before = waiting.get(episode[SampleBatch.EPS_ID][0], 0)
        np.testing.assert_array_equal(prev[: before + 1], 0)
        np.testing.assert_array_equal(prev[before + 1 :], obs[before:-1])


def _episodes(batch: SampleBatch) -> set:
    return set(batch[SampleBatch.EPS_ID].tolist())


def _waiting(worker: RolloutWorker) -> dict:
    """{episode id: b's rows so far in it, its pending action included} per sub-env."""
    out = {}
    for slot in worker.sampler.slots:
        b = slot.trajectories.get("b")
        if b is not None:
            rows = len(b.rows.get(SampleBatch.REWARDS, ()))
            out[slot.episode.episode_id] = rows + (b.pending is not None)
    return out


def test_multi_agent_views_added_after_the_worker_was_built_are_sampled():
    worker = _multi_agent_worker(rollout_fragment_length=5)
    try:
        worker.sample()
        # b acted at step 4 of the running episode; its outcome comes with the next call.
        assert worker.sampler.slots[0].trajectories["b"].pending is not None
        waiting = _waiting(worker)
        _add_multi_agent_views(worker.get_policy("pb").view_requirements)
        batch = worker.sample()
        pa, pb = batch.policy_batches["pa"], batch.policy_batches["pb"]
        assert "prev_obs" not in pa and "next_actions" not in pa  # only pb's views changed
        assert set(waiting) & _episodes(pb) and _episodes(pb) - set(waiting)  # running, new
        _check_multi_agent_views(pb, waiting)
        # Removed again: the columns are gone from the next batch.
        reqs = worker.get_policy("pb").view_requirements
        del reqs["prev_obs"], reqs["next_actions"]
        batch = worker.sample()
        pb = batch.policy_batches["pb"]
        assert "prev_obs" not in pb and "next_actions" not in pb
        assert len(pb[SampleBatch.OBS]) == pb.count
    finally:
        worker.stop()


def test_multi_agent_model_views_added_while_episodes_wait_complete_episodes():
    # Two sub-envs with episodes of 7 and 11 steps, 3-step fragments: the first batch
    # leaves the second sub-env's episode with rows waiting for the next call.
    worker = _multi_agent_worker(
        rollout_fragment_length=3, num_envs=2, batch_mode="complete_episodes"
    )
    try:
        worker.sample()
        assert worker.sampler.slots[1].trajectories["b"].rows  # b's rows wait
        waiting = _waiting(worker)
        _add_multi_agent_views(worker.get_policy("pb").model.view_requirements)
        batch = worker.sample()
        pb = batch.policy_batches["pb"]
        assert "prev_obs" not in batch.policy_batches["pa"]
        assert set(waiting) & _episodes(pb)  # the episode whose rows waited is in the batch
        _check_multi_agent_views(pb, waiting)
    finally:
        worker.stop()
