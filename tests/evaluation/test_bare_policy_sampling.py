"""RLlib 1.13's sampling behaviour for a `Policy` of one's own (not a `TorchPolicy`) in a
hand-built `RolloutWorker`: its observation filter, `prev_actions` / `prev_rewards`, the id
columns of its input dict, a state read through its view requirements, its Box actions
unsquashed or clipped for the env; and every sampled batch's `unroll_id` column."""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import pytest

from corral.env.multi_agent_env import MultiAgentEnv
from corral.evaluation.rollout_worker import RolloutWorker
from corral.policy.policy import Policy
from corral.policy.sample_batch import DEFAULT_POLICY_ID, SampleBatch
from corral.policy.view_requirement import ViewRequirement


class Chain(gym.Env):
    """Observation = the step in the episode; reward = 1 + step; `length` steps."""

    def __init__(self, length: int = 5, action_space: gym.Space | None = None) -> None:
        self.length = length
        self.observation_space = gym.spaces.Box(0.0, 100.0, (1,), np.float32)
        self.action_space = action_space or gym.spaces.Discrete(2)
        self.received: list = []
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.received.append(np.array(action))
        self.t += 1
        obs = np.array([float(self.t)], np.float32)
        return obs, float(self.t), self.t >= self.length, False, {}


class Counting(Policy):
    """Acts 0, 1, 2, ... (modulo the action count); records what `compute_actions` got."""

    def __init__(self, observation_space, action_space, config) -> None:
        super().__init__(observation_space, action_space, config)
        self.calls: list[dict] = []
        self.n = 0

    def compute_actions(self, obs_batch, state_batches=None, prev_action_batch=None,
                        prev_reward_batch=None, **kwargs):  # fmt: skip
        self.calls.append({"prev_actions": prev_action_batch, "prev_rewards": prev_reward_batch})
        actions = (np.arange(len(obs_batch)) + self.n) % self.action_space.n
        self.n += len(obs_batch)
        return actions, [], {}


def worker(policy=Counting, env=None, **kwargs) -> RolloutWorker:
    env = env or Chain()
    return RolloutWorker(env_creator=lambda ctx: env, policy_spec=policy, **kwargs)


def test_observation_filter_runs_for_a_policy_of_ones_own():
    w = worker(observation_filter="MeanStdFilter", rollout_fragment_length=12)
    batch = w.sample()
    obs_filter = w.get_filters(flush_after=True)[DEFAULT_POLICY_ID]
    # Every observation went through it: 12 steps' and the 3 episode starts' (5-step episodes).
    assert obs_filter.rs.n == 15
    # The batch holds the filtered observations (standardised: not the raw steps 0..4).
    assert not np.allclose(batch[SampleBatch.OBS][:, 0], [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1])


def test_extra_python_environs_are_set_by_a_hand_built_worker(monkeypatch):
    monkeypatch.delenv("CORRAL_TEST_ENVIRON", raising=False)
    worker(extra_python_environs={"CORRAL_TEST_ENVIRON": 7})
    assert os.environ["CORRAL_TEST_ENVIRON"] == "7"
    monkeypatch.delenv("CORRAL_TEST_ENVIRON")


def test_policy_of_ones_own_gets_and_keeps_previous_actions_and_rewards():
    w = worker(rollout_fragment_length=12)
    batch = w.sample()
    actions, rewards, t = batch["actions"], batch["rewards"], batch["t"]
    first = t == 0
    expected_prev_a = np.where(first, 0, np.roll(actions, 1))
    expected_prev_r = np.where(first, 0.0, np.roll(rewards, 1))
    np.testing.assert_array_equal(batch[SampleBatch.PREV_ACTIONS], expected_prev_a)
    np.testing.assert_array_equal(batch[SampleBatch.PREV_REWARDS], expected_prev_r)
    # What the policy acted on is what the batch keeps.
    calls = w.get_policy().calls
    np.testing.assert_array_equal([c["prev_actions"][0] for c in calls], expected_prev_a)
    np.testing.assert_array_equal([c["prev_rewards"][0] for c in calls], expected_prev_r)


def test_policy_without_the_default_views_gets_no_previous_actions():
    class NoPrev(Counting):
        def __init__(self, *args) -> None:
            super().__init__(*args)
            del self.view_requirements[SampleBatch.PREV_ACTIONS]
            del self.view_requirements[SampleBatch.PREV_REWARDS]

    batch = worker(NoPrev, rollout_fragment_length=6).sample()
    assert SampleBatch.PREV_ACTIONS not in batch and SampleBatch.PREV_REWARDS not in batch


def test_unroll_ids_one_per_trajectory_piece_and_new_in_every_sample():
    w = worker(rollout_fragment_length=12, num_envs=2)
    first, second = w.sample(), w.sample()
    for batch in (first, second):
        ids, eps, env = batch[SampleBatch.UNROLL_ID], batch["eps_id"], batch["env_id"]
        piece_starts = np.flatnonzero(np.diff(eps) != 0) + 1
        pieces = np.split(ids, piece_starts)
        assert all(len(set(p.tolist())) == 1 for p in pieces)  # constant within a piece
        assert len({int(p[0]) for p in pieces}) == len(pieces)  # and unique per piece
        assert len(set(env.tolist())) == 2
    assert not set(first[SampleBatch.UNROLL_ID].tolist()) & set(
        second[SampleBatch.UNROLL_ID].tolist()
    )


class Wide(Policy):
    """Box actions far outside the space's bounds (both signs)."""

    def compute_actions(self, obs_batch, *args, **kwargs):
        n = len(obs_batch)
        return np.tile(np.array([[-5.0, 0.0, 5.0]], np.float32), (n, 1)), [], {}


@pytest.mark.parametrize(
    ("normalize", "clip", "sent"),
    [
        (False, True, [-2.0, 0.0, 1.0]),  # clipped into [-2, 1]
        (True, False, [-2.0, -0.5, 1.0]),  # unsquashed from [-1, 1] (then clipped)
        (False, False, [-5.0, 0.0, 5.0]),  # as the policy returned them
    ],
)
def test_box_actions_of_a_policy_of_ones_own_reach_the_env_unsquashed_or_clipped(
    normalize, clip, sent
):
    env = Chain(action_space=gym.spaces.Box(-2.0, 1.0, (3,), np.float32))
    w = worker(Wide, env=env, normalize_actions=normalize, clip_actions=clip,
               rollout_fragment_length=3)  # fmt: skip
    batch = w.sample()
    np.testing.assert_allclose(env.received[-1], sent)
    # The batch keeps the policy's own actions.
    np.testing.assert_allclose(batch["actions"][0], [-5.0, 0.0, 5.0])


class IdAware(Policy):
    """Acts through its input dict; records the id columns it was given."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.seen: list[dict] = []

    def compute_actions_from_input_dict(self, input_dict, explore=None, **kwargs):
        self.seen.append({k: np.array(input_dict[k]) for k in ("eps_id", "agent_index", "t")})
        return np.zeros(len(input_dict["obs"]), np.int64), [], {}


def test_input_dict_of_a_policy_of_ones_own_has_each_steps_ids():
    w = worker(IdAware, rollout_fragment_length=7)
    batch = w.sample()
    seen = w.get_policy().seen
    np.testing.assert_array_equal([s["t"][0] for s in seen], batch["t"])
    np.testing.assert_array_equal([s["eps_id"][0] for s in seen], batch["eps_id"])
    assert all(s["agent_index"][0] == 0 for s in seen)


class TwoAgents(MultiAgentEnv):
    def __init__(self) -> None:
        super().__init__()
        self.observation_space = gym.spaces.Box(0.0, 100.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._agent_ids = {"a", "b"}
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return {a: np.array([0.0], np.float32) for a in ("a", "b")}, {}

    def step(self, actions):
        self.t += 1
        obs = {a: np.array([float(self.t)], np.float32) for a in actions}
        rewards = {a: 1.0 for a in actions}
        done = self.t >= 4
        return obs, rewards, {"__all__": done}, {"__all__": False}, {}


def test_multi_agent_input_dict_of_a_policy_of_ones_own_has_each_agents_ids():
    w = worker(IdAware, env=TwoAgents(), rollout_fragment_length=4)
    batch = w.sample()  # (only `default_policy`: a SampleBatch of both agents' rows)
    seen = w.get_policy().seen
    assert len(seen) == 4  # both agents act in one call per step
    np.testing.assert_array_equal([s["t"].tolist() for s in seen], [[t, t] for t in range(4)])
    assert all(sorted(s["agent_index"].tolist()) == [0, 1] for s in seen)
    assert len(set(batch["unroll_id"].tolist())) == 2  # one trajectory piece per agent


class StateViaViews(Policy):
    """Recurrent through its view requirements only: `get_initial_state()` is empty;
    its state output is the step's `t` + 1."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.view_requirements["state_in_0"] = ViewRequirement("state_out_0", shift=-1, space=space)
        self.view_requirements["state_out_0"] = ViewRequirement(space=space)
        self.states_in: list[np.ndarray] = []

    def is_recurrent(self) -> bool:
        return True

    def compute_actions_from_input_dict(self, input_dict, explore=None, **kwargs):
        self.states_in.append(np.array(input_dict["state_in_0"]))
        t = np.asarray(input_dict["t"], np.float32)
        return np.zeros(len(t), np.int64), [(t + 1.0)[:, None]], {}


def test_state_read_through_view_requirements_starts_at_zeros():
    w = worker(StateViaViews, rollout_fragment_length=7)
    batch = w.sample()
    t = batch["t"]
    # state_in at step t is the state_out of step t - 1 (= t), zeros at an episode's start.
    np.testing.assert_array_equal(batch["state_in_0"][:, 0], t.astype(np.float32))
    np.testing.assert_array_equal(np.concatenate(w.get_policy().states_in)[:, 0], t)
