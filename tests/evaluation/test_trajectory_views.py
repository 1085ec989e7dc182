"""The trajectory view API in the samplers (RLlib 1.13's `ViewRequirement`s).

A custom model declares shifted views of the observations, actions and rewards; the
values its forward pass sees when acting and the values in the train batches must
equal hand-computed ones (zeros before an episode's first step), across episode
boundaries and fragment cuts, with several sub-envs per worker, single- and
multi-agent.
"""

from __future__ import annotations

import itertools

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from corral.agents.ppo import PPOTrainer
from corral.env.multi_agent_env import MultiAgentEnv
from corral.models import ModelCatalog
from corral.models.torch.torch_modelv2 import TorchModelV2
from corral.policy.policy import Policy
from corral.policy.view_requirement import (
    ViewColumn,
    ViewRequirement,
    future_values,
    next_step_inputs,
)

# Every acting-time input dict the model saw: [{column: [B, ...] numpy}, ...].
ACTING_CALLS: list[dict[str, np.ndarray]] = []
_INSTANCES = itertools.count()

VIEWS = ("prev_n_obs", "prev_a", "prev_2_r", "acting_only")


class ViewModel(TorchModelV2, nn.Module):
    """Reads its declared views (so a missing one fails) and records what it saw."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        self.view_requirements["prev_n_obs"] = ViewRequirement(
            data_col="obs", shift="-2:0", space=obs_space
        )
        self.view_requirements["prev_a"] = ViewRequirement(
            data_col="actions", shift=-1, space=action_space
        )
        self.view_requirements["prev_2_r"] = ViewRequirement(data_col="rewards", shift="-2:-1")
        self.view_requirements["next_o"] = ViewRequirement(
            data_col="obs", shift=1, used_for_compute_actions=False
        )
        self.view_requirements["next_a"] = ViewRequirement(
            data_col="actions", shift=1, space=action_space, used_for_compute_actions=False
        )
        self.view_requirements["acting_only"] = ViewRequirement(
            data_col="obs", shift=-1, used_for_training=False
        )
        obs_dim = obs_space.shape[0]
        self.net = nn.Linear(3 * obs_dim + 1 + 2, num_outputs)
        self.v = nn.Linear(3 * obs_dim + 1 + 2, 1)

    def forward(self, input_dict, state, seq_lens):
        n = len(input_dict["obs"])
        if not input_dict.get("is_training"):
            ACTING_CALLS.append(
                {k: input_dict[k].numpy().copy() for k in ("obs", *VIEWS) if k in input_dict}
            )
        x = torch.cat(
            [
                input_dict["prev_n_obs"].float().reshape(n, -1),
                input_dict["prev_a"].float().reshape(n, 1),
                input_dict["prev_2_r"].float().reshape(n, 2),
            ],
            -1,
        )
        self._value = self.v(x * 1e-3).reshape(-1)
        return self.net(x * 1e-3), state

    def value_function(self):
        return self._value


class Episodes(gym.Env):
    """Episodes of 3 to 6 steps; the observation [t, code] is unique per (episode, t),
    the reward too."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gym.spaces.Discrete(3)

    def __init__(self, config=None):
        self.instance = next(_INSTANCES)
        self.episodes = 0

    def reset(self, *, seed=None, options=None):
        self.episodes += 1
        self.t = 0
        self.code = 1000.0 * self.instance + self.episodes
        self.length = 3 + (self.instance + self.episodes) % 4
        return self._obs(), {}

    def _obs(self):
        return np.array([self.t + 1, self.code], np.float32)

    def step(self, action):
        self.t += 1
        reward = self.code + 0.5 * self.t
        return self._obs(), reward, self.t >= self.length, False, {}


def _config(**extra):
    return {
        "num_workers": 0,
        "num_envs_per_worker": 3,
        "rollout_fragment_length": 5,
        "train_batch_size": 30,
        "sgd_minibatch_size": 15,
        "num_sgd_iter": 1,
        "model": {"custom_model": "view_model"},
        **extra,
    }


@pytest.fixture(autouse=True)
def _register():
    ModelCatalog.register_custom_model("view_model", ViewModel)
    ACTING_CALLS.clear()


def _expected_views(batches, key_cols):
    """Hand-computed views of every row of `batches` (one sample() each), from the
    rows of all of them: {column: [expected per row of each batch]}."""
    history = {}
    for b in batches:
        for r in range(b.count):
            key = (*(int(b[c][r]) for c in key_cols), int(b["t"][r]))
            history[key] = (b["obs"][r], int(b["actions"][r]), float(b["rewards"][r]))
    out = []
    for b in batches:
        in_batch = {(*(int(b[c][r]) for c in key_cols), int(b["t"][r])): r for r in range(b.count)}
        rows = []
        for r in range(b.count):
            ep = tuple(int(b[c][r]) for c in key_cols)
            t = int(b["t"][r])

            def at(k, what, ep=ep):
                value = history.get((*ep, k))
                zero = {0: np.zeros(2, np.float32), 1: 0, 2: 0.0}[what]
                return zero if k < 0 or value is None else value[what]

            # The history must hold every earlier step of the episode.
            for k in range(t):
                assert (*ep, k) in history
            nxt = in_batch.get((*ep, t + 1))
            rows.append(
                {
                    "prev_n_obs": np.stack([at(t - 2, 0), at(t - 1, 0), at(t, 0)]),
                    "prev_a": at(t - 1, 1),
                    "prev_2_r": np.array([at(t - 2, 2), at(t - 1, 2)], np.float32),
                    "acting_only": at(t - 1, 0),
                    "next_o": b["new_obs"][r],
                    "next_a": 0 if nxt is None else int(b["actions"][nxt]),
                }
            )
        out.append(rows)
    return out


def _own_steps(batches):
    """Copies of one policy's `batches` (one sample() each) whose `t` numbers each
    agent's own steps in its episode (a multi-agent row's `t` counts the env's)."""
    key = ("eps_id", "agent_index")
    rows = sorted(
        {(*(int(b[c][r]) for c in key), int(b["t"][r])) for b in batches for r in range(b.count)}
    )
    own, last, n = {}, None, 0
    for k in rows:
        n = n + 1 if k[:-1] == last else 0
        own[k], last = n, k[:-1]
    out = []
    for b in batches:
        c = b.copy()
        c["t"] = np.array(
            [own[(*(int(b[k][r]) for k in key), int(b["t"][r]))] for r in range(b.count)]
        )
        out.append(c)
    return out


def _acting_by_obs():
    seen = {}
    for call in ACTING_CALLS:
        for i in range(len(call["obs"])):
            seen[tuple(call["obs"][i].tolist())] = {k: v[i] for k, v in call.items()}
    return seen


def _check(batch, rows, acting):
    assert "acting_only" not in batch  # used_for_training=False
    for r, exp in enumerate(rows):
        np.testing.assert_array_equal(batch["prev_n_obs"][r], exp["prev_n_obs"])
        assert batch["prev_a"][r] == exp["prev_a"]
        np.testing.assert_allclose(batch["prev_2_r"][r], exp["prev_2_r"])
        np.testing.assert_array_equal(batch["next_o"][r], exp["next_o"])
        assert batch["next_a"][r] == exp["next_a"]
        # What the model saw when it acted on this row's observation.
        seen = acting[tuple(batch["obs"][r].tolist())]
        np.testing.assert_array_equal(seen["prev_n_obs"], exp["prev_n_obs"])
        assert seen["prev_a"] == exp["prev_a"]
        np.testing.assert_allclose(seen["prev_2_r"], exp["prev_2_r"])
        np.testing.assert_array_equal(seen["acting_only"], exp["acting_only"])


def test_single_agent_views_at_acting_time_and_in_train_batches():
    trainer = PPOTrainer(env=Episodes, config=_config())
    try:
        worker = trainer.workers.local_worker()
        batches = [worker.sample() for _ in range(4)]
        acting = _acting_by_obs()
        expected = _expected_views(batches, ("eps_id",))
        starts = 0
        for batch, rows in zip(batches, expected):
            assert batch["prev_n_obs"].shape == (15, 3, 2)
            assert batch["prev_a"].shape == (15,) and batch["prev_a"].dtype == np.int64
            assert batch["prev_2_r"].shape == (15, 2)
            _check(batch, rows, acting)
            starts += int((batch["t"] == 0).sum())
        # Episode boundaries inside fragments and episodes across fragment cuts.
        assert starts >= 6
        assert any(b["t"][0] > 0 for b in batches[1:])
        # Where a fragment cuts an episode, V(s') is bootstrapped with the views the
        # model sees when it acts on s' in the next fragment.
        policy = trainer.get_policy()
        cuts = 0
        for batch in batches[:-1]:
            last = np.flatnonzero(np.diff(np.append(batch["env_id"], -1)) != 0)
            rows = last[~batch["dones"][last]]
            nxt = next_step_inputs(policy.view_requirements, batch, rows)
            assert set(nxt) == {"prev_n_obs", "prev_a", "prev_2_r", "acting_only"}
            for k, r in enumerate(rows):
                seen = acting[tuple(batch["new_obs"][r].tolist())]
                for name, values in nxt.items():
                    np.testing.assert_array_equal(values[k], seen[name])
                cuts += 1
        assert cuts >= 3
        # The views reach the loss: training runs on them.
        result = trainer.train()
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert np.isfinite(stats["total_loss"])
        assert "prev_n_obs" in trainer.get_policy().train_columns
    finally:
        trainer.stop()


def test_complete_episodes_batches_carry_the_views():
    trainer = PPOTrainer(env=Episodes, config=_config(batch_mode="complete_episodes"))
    try:
        worker = trainer.workers.local_worker()
        batches = [worker.sample() for _ in range(3)]
        acting = _acting_by_obs()
        for batch, rows in zip(batches, _expected_views(batches, ("eps_id",))):
            assert (batch["t"][batch["dones"]] >= 2).all()
            _check(batch, rows, acting)
    finally:
        trainer.stop()


def test_no_declared_views_leave_the_sampler_as_it_was():
    trainer = PPOTrainer(env=Episodes, config={**_config(), "model": {"fcnet_hiddens": [8]}})
    try:
        sampler = trainer.workers.local_worker().sampler
        assert sampler.views is None and sampler.view_windows is None
        batch = trainer.workers.local_worker().sample()
        assert "prev_actions" not in batch and "prev_n_obs" not in batch
    finally:
        trainer.stop()


def test_a_view_of_later_steps_cannot_be_used_for_acting():
    with pytest.raises(ValueError, match="used_for_compute_actions=False"):
        ViewColumn("next", ViewRequirement(data_col="obs", shift=1))
    with pytest.raises(ValueError, match="only up to shift -1"):
        ViewColumn("a", ViewRequirement(data_col="actions", shift=0))


def test_shift_forms():
    assert ViewRequirement(shift="-3:0").shift_arr.tolist() == [-3, -2, -1, 0]
    assert ViewRequirement(shift=[-4, -1]).shift_arr.tolist() == [-4, -1]
    assert ViewColumn("x", ViewRequirement(data_col="obs", shift=-1)).stacked is False
    assert ViewColumn("x", ViewRequirement(data_col="obs", shift=[-1])).stacked is True
    with pytest.raises(ValueError, match="'from:to'"):
        ViewRequirement(shift="-3")
    with pytest.raises(ValueError, match="empty"):
        ViewRequirement(shift="0:-2")


def test_future_values_stop_at_episode_ends_and_dropped_rows():
    data = np.arange(6, dtype=np.float32).reshape(6, 1)
    eps = np.array([[1], [1], [1], [2], [2], [2]])
    ep_t = np.array([[0], [1], [2], [0], [1], [2]])
    out = future_values(data, eps, ep_t, 1)
    np.testing.assert_array_equal(out[:, 0], [1, 2, 0, 4, 5, 0])
    valid = np.ones((6, 1), bool)
    valid[4] = False
    out = future_values(data, eps, ep_t, 1, valid)
    np.testing.assert_array_equal(out[:, 0], [1, 2, 0, 0, 5, 0])


class TwoAgents(MultiAgentEnv):
    """Agent "a" acts every step, agent "b" every other step; episodes of 4-7 steps."""

    def __init__(self, config=None):
        super().__init__()
        self.instance = next(_INSTANCES)
        self.episodes = 0
        space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.observation_space = space
        self.action_space = gym.spaces.Discrete(3)
        self._agent_ids = {"a", "b"}
        self.possible_agents = ["a", "b"]

    def _obs(self, agents):
        return {
            ag: np.array([self.t + 1, self.code + (0.25 if ag == "b" else 0.0)], np.float32)
            for ag in agents
        }

    def _acting(self):
        return ["a", "b"] if self.t % 2 == 0 else ["a"]

    def reset(self, *, seed=None, options=None):
        self.episodes += 1
        self.t = 0
        self.code = 1000.0 * self.instance + self.episodes
        self.length = 4 + (self.instance + self.episodes) % 4
        return self._obs(self._acting()), {}

    def step(self, actions):
        self.t += 1
        done = self.t >= self.length
        agents = ["a", "b"] if done else self._acting()
        obs = self._obs(agents)
        rewards = {ag: self.code + 0.5 * self.t + (0.25 if ag == "b" else 0.0) for ag in actions}
        flags = {"__all__": done}
        return obs, rewards, flags, {"__all__": False}, {}


@pytest.mark.parametrize("batch_mode", ["truncate_episodes", "complete_episodes"])
def test_multi_agent_views_per_agent_timeline(batch_mode):
    space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    act = gym.spaces.Discrete(3)
    config = _config(
        batch_mode=batch_mode,
        multiagent={
            "policies": {"pa": (None, space, act, {}), "pb": (None, space, act, {})},
            "policy_mapping_fn": lambda agent_id, *args, **kwargs: "p" + agent_id,
        },
    )
    trainer = PPOTrainer(env=TwoAgents, config=config)
    try:
        worker = trainer.workers.local_worker()
        samples = [worker.sample() for _ in range(4)]
        acting = _acting_by_obs()
        for pid in ("pa", "pb"):
            batches = _own_steps([s.policy_batches[pid] for s in samples])
            expected = _expected_views(batches, ("eps_id", "agent_index"))
            for batch, rows in zip(batches, expected):
                _check(batch, rows, acting)
        # Agent b's steps are every other env step: its t (the env's) has gaps.
        b_rows = samples[0].policy_batches["pb"]
        assert b_rows.count < samples[0].policy_batches["pa"].count
        assert (np.diff(b_rows["t"][b_rows["eps_id"] == b_rows["eps_id"][0]]) > 1).any()
        trainer.train()
    finally:
        trainer.stop()


class CountOn(Policy):
    """A custom (not torch) policy acting on a view: the action after its previous one
    (RLlib-style: the view arrives in `compute_actions_from_input_dict`)."""

    def __init__(self, observation_space, action_space, config):
        super().__init__(observation_space, action_space, config)
        self.view_requirements["last_action"] = ViewRequirement(
            data_col="actions", shift=-1, space=action_space
        )

    def compute_actions_from_input_dict(self, input_dict, explore=None, **kwargs):
        previous = np.asarray(input_dict["last_action"])
        return (previous + 1) % 3, [], {}

    def compute_actions(self, obs_batch, *args, **kwargs):
        raise AssertionError("the sampler must pass the input dict with the view")


def test_custom_policy_gets_its_views_in_the_input_dict():
    space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    act = gym.spaces.Discrete(3)
    config = _config(
        multiagent={
            "policies": {"pa": (None, space, act, {}), "pb": (CountOn, space, act, {})},
            "policy_mapping_fn": lambda agent_id, *args, **kwargs: "p" + agent_id,
            "policies_to_train": ["pa"],
        }
    )
    trainer = PPOTrainer(env=TwoAgents, config=config)
    try:
        (batch,) = _own_steps([trainer.workers.local_worker().sample().policy_batches["pb"]])
        # 1, 2, 0, 1, ... from each episode's start (the previous action reads 0 there).
        np.testing.assert_array_equal(batch["actions"], (batch["t"] + 1) % 3)
        np.testing.assert_array_equal(batch["last_action"], batch["t"] % 3)
        assert (batch["t"] == 0).sum() >= 2
    finally:
        trainer.stop()


def test_a_numpy_input_dict_of_float64_views_reaches_the_model_as_float32():
    # RLlib 1.13's trajectory_view_api example acts on `np.stack([1.0, ...])` rewards.
    trainer = PPOTrainer(env=Episodes, config=_config())
    try:
        ACTING_CALLS.clear()
        obs = np.zeros(2, np.float32)
        action = trainer.compute_single_action(
            input_dict={
                "obs": obs,
                "prev_n_obs": np.zeros((3, 2)),  # float64
                "prev_a": np.int64(0),
                "prev_2_r": np.array([1.0, 1.0]),  # float64
                "acting_only": np.zeros(2),
            },
            explore=False,
        )
        assert action in (0, 1, 2)
        assert ACTING_CALLS[-1]["prev_2_r"].dtype == np.float32
    finally:
        trainer.stop()
