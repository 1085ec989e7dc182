"""Tuple/Dict actions in RLlib's forms: a torch policy's `compute_actions` returns them
nested (each leaf a batch), its `compute_single_action` one nested env action, and the
samplers take whatever form a policy of one's own returns (nested leaves, a list of
nested actions, flat rows) and keep flat rows."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.pg import PGTrainer
from corral.env.multi_agent_env import make_multi_agent
from corral.policy.policy import Policy, PolicySpec
from corral.policy.random_policy import RandomPolicy
from corral.policy.sample_batch import SampleBatch
from corral.tune.registry import register_env
from corral.utils.spaces import as_flat_action_rows

ACTIONS = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1.0, 1.0, (2,), np.float32)))


class TupleActionEnv(gym.Env):
    """Refuses any action outside its Tuple action space."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = ACTIONS

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.zeros(3, np.float32), {}

    def step(self, action):
        assert self.action_space.contains(action), action
        self.t += 1
        return np.zeros(3, np.float32), float(action[0]), self.t >= 5, False, {}


register_env("corral_test_tuple_actions", lambda _: TupleActionEnv())
MultiTupleActionEnv = make_multi_agent(lambda _: TupleActionEnv())
register_env("corral_test_multi_tuple_actions", lambda c: MultiTupleActionEnv(c))

SMALL = {
    "num_workers": 0,
    "rollout_fragment_length": 20,
    "train_batch_size": 20,
    "model": {"fcnet_hiddens": [8]},
    "seed": 0,
}


def test_a_torch_policy_returns_rllib_s_nested_batches():
    trainer = PGTrainer(config=SMALL, env="corral_test_tuple_actions")
    try:
        policy = trainer.get_policy()
        obs = np.zeros((4, 3), np.float32)
        actions, state, _ = policy.compute_actions(obs)
        assert isinstance(actions, tuple) and state == []
        assert actions[0].shape == (4,) and actions[0].dtype == np.int64
        assert actions[1].shape == (4, 2) and actions[1].dtype == np.float32
        from_dict, _, _ = policy.compute_actions_from_input_dict({SampleBatch.OBS: obs})
        assert isinstance(from_dict, tuple) and from_dict[1].shape == (4, 2)
        # Back to flat rows, as the samplers keep them.
        assert as_flat_action_rows(ACTIONS, actions).shape == (4, 3)
        # One observation: one action the env takes.
        action, _, _ = policy.compute_single_action(obs[0])
        assert ACTIONS.contains(action)
        assert ACTIONS.contains(trainer.compute_single_action(obs[0]))
        assert trainer.train()["timesteps_total"] == 20
    finally:
        trainer.stop()


class NestedLeavesPolicy(Policy):
    """A policy of one's own in RLlib's torch form: nested, each leaf a batch."""

    def compute_actions(self, obs_batch, state_batches=None, **kwargs):
        n = len(obs_batch)
        return (np.full(n, 2), np.full((n, 2), 0.5, np.float32)), [], {}


@pytest.mark.parametrize("policy_class", [NestedLeavesPolicy, RandomPolicy])
def test_samplers_take_each_of_rllib_s_forms(policy_class):
    config = {
        **SMALL,
        "multiagent": {
            "policies": {"own": PolicySpec(policy_class=policy_class)},
            "policy_mapping_fn": lambda agent_id, *args, **kwargs: "own",
            "policies_to_train": [],
        },
        "env_config": {"num_agents": 2},
    }
    trainer = PGTrainer(config=config, env="corral_test_multi_tuple_actions")
    try:
        batch = trainer.workers.local_worker().sample().policy_batches["own"]
        actions = batch[SampleBatch.ACTIONS]
        assert actions.shape == (batch.count, 3)  # flat rows: the choice, then the box
        if policy_class is NestedLeavesPolicy:
            assert np.all(actions == [2.0, 0.5, 0.5])
            assert np.all(batch[SampleBatch.REWARDS] == 2.0)
    finally:
        trainer.stop()
