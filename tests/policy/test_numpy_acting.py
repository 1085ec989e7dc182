"""Acting wholly in numpy (`TorchPolicy._numpy_acting`): a built-in model's
`forward_inference_numpy` and EpsilonGreedy's `get_exploration_action_numpy` give the
actions and fetches the torch path gives, and the policy takes that path only where both
are its own."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.dqn import DEFAULT_CONFIG, DQNTorchPolicy
from corral.agents.dqn.dqn_torch_model import DQNTorchModel
from corral.agents.pg import DEFAULT_CONFIG as PG_CONFIG
from corral.agents.pg import PGTorchPolicy
from corral.agents.trainer import Trainer
from corral.models.torch.numpy_inference import MAX_LAYER_WORK
from corral.policy.sample_batch import SampleBatch
from corral.utils.exploration import EpsilonGreedy

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACT = gym.spaces.Discrete(3)
FETCHES = (SampleBatch.ACTION_LOGP, SampleBatch.ACTION_DIST_INPUTS, SampleBatch.VF_PREDS)


def dqn_policy(**overrides) -> DQNTorchPolicy:
    config = Trainer.merge_trainer_configs(
        DEFAULT_CONFIG,
        {
            "model": {"fcnet_hiddens": [32, 32], "fcnet_activation": "relu"},
            "hiddens": [16],
            "exploration_config": {
                "type": "EpsilonGreedy",
                "initial_epsilon": 0.5,
                "final_epsilon": 0.5,
            },
            **overrides,
        },
    )
    torch.manual_seed(0)
    return DQNTorchPolicy(OBS, ACT, config)


def obs(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, (n, 4)).astype(np.float32)


def act(policy, x: np.ndarray, explore: bool, numpy: bool, seed: int = 1):
    """`compute_actions_from_obs` with the numpy path on or off, from one torch seed."""
    kept = policy._numpy_acting
    policy._numpy_acting = kept if numpy else None
    try:
        torch.manual_seed(seed)
        return policy.compute_actions_from_obs(x, explore)
    finally:
        policy._numpy_acting = kept


def assert_same_acting(policy, x: np.ndarray, explore: bool) -> None:
    for seed in range(5):
        fast_actions, fast = act(policy, x, explore, numpy=True, seed=seed)
        slow_actions, slow = act(policy, x, explore, numpy=False, seed=seed)
        np.testing.assert_array_equal(fast_actions, slow_actions)
        assert fast_actions.dtype == slow_actions.dtype
        for key in FETCHES:
            assert fast[key].dtype == slow[key].dtype and fast[key].shape == slow[key].shape
            np.testing.assert_allclose(fast[key], slow[key], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dueling", [False, True])
@pytest.mark.parametrize("explore", [False, True])
def test_numpy_acting_matches_the_torch_path(dueling, explore):
    policy = dqn_policy(dueling=dueling)
    assert policy._numpy_acting is not None
    for n in (1, 8, 20):  # 20 rows: epsilon-greedy's vectorised branch
        assert_same_acting(policy, obs(n, seed=n), explore)


def test_exploring_rows_draw_uniform_actions_and_greedy_ones_the_argmax():
    policy = dqn_policy()
    x = obs(1)
    greedy = int(policy.compute_actions_from_obs(x, explore=False)[0][0])
    torch.manual_seed(0)
    drawn = [int(policy.compute_actions_from_obs(x, explore=True)[0][0]) for _ in range(3000)]
    counts = np.bincount(drawn, minlength=3) / len(drawn)
    # epsilon 0.5: the greedy action 0.5 + 0.5 / 3, each other one 0.5 / 3.
    expected = np.full(3, 0.5 / 3)
    expected[greedy] += 0.5
    np.testing.assert_allclose(counts, expected, atol=0.03)


def test_the_path_runs_in_numpy_and_hands_large_batches_to_torch(monkeypatch):
    """Small batches never reach the model's torch pass; a batch above numpy's size limit
    (`MAX_LAYER_WORK`) does, with the same results."""
    policy = dqn_policy()
    calls = []
    torch_pass = policy._fast_forward
    monkeypatch.setattr(policy, "_fast_forward", lambda o: calls.append(len(o)) or torch_pass(o))
    policy.compute_actions_from_obs(obs(8), explore=True)
    assert calls == []
    many = MAX_LAYER_WORK // (32 * 32) + 1
    policy.compute_actions_from_obs(obs(many), explore=True)
    assert calls == [many]
    assert_same_acting(policy, obs(many), explore=True)


def test_acting_follows_replaced_and_reloaded_weights():
    """The numpy pass reads the parameters as they are at each call: after
    `set_weights` and after a `load_state_dict(assign=True)` that replaces the tensors."""
    policy, other = dqn_policy(), dqn_policy(seed=3)
    torch.manual_seed(3)
    for p in other.model.parameters():
        torch.nn.init.normal_(p.data)
    x = obs(4)
    policy.set_weights(other.get_weights())
    assert_same_acting(policy, x, explore=False)
    np.testing.assert_allclose(
        act(policy, x, False, numpy=True)[1][SampleBatch.ACTION_DIST_INPUTS],
        act(other, x, False, numpy=False)[1][SampleBatch.ACTION_DIST_INPUTS],
        rtol=1e-5,
        atol=1e-6,
    )
    state = {k: v.clone() * 2 for k, v in other.model.state_dict().items()}
    policy.model.load_state_dict(state, assign=True)
    assert_same_acting(policy, x, explore=False)
    doubled = act(policy, x, False, numpy=True)[1][SampleBatch.ACTION_DIST_INPUTS]
    assert not np.allclose(
        doubled, act(other, x, False, numpy=False)[1][SampleBatch.ACTION_DIST_INPUTS]
    )


class CoinFlipGreedy(EpsilonGreedy):
    """A user's exploration: its own `get_exploration_action` must be the one called."""

    def get_exploration_action(self, action_distribution, timestep=None, explore=True):
        actions = torch.zeros(action_distribution.inputs.shape[0], dtype=torch.int64)
        return actions, torch.zeros(len(actions))


class ShiftedQ(DQNTorchModel):
    """A user's model with its own `forward`: acting must go through it."""

    def forward(self, input_dict, state, seq_lens):
        q, state = super().forward(input_dict, state, seq_lens)
        return q + 100.0, state


def test_only_the_built_in_pieces_act_in_numpy():
    from corral.models import ModelCatalog

    assert (
        dqn_policy(exploration_config={"type": "PerWorkerEpsilonGreedy"})._numpy_acting is not None
    )
    assert dqn_policy(exploration_config={"type": CoinFlipGreedy})._numpy_acting is None
    assert dqn_policy(num_atoms=5)._numpy_acting[0](obs(2)) is None  # C51 heads: torch
    ModelCatalog.register_custom_model("shifted_q_for_numpy_acting", ShiftedQ)
    custom = dqn_policy(model={"custom_model": "shifted_q_for_numpy_acting"})
    assert custom._numpy_acting is None
    _, fetches = custom.compute_actions_from_obs(obs(2), explore=False)
    assert (fetches[SampleBatch.ACTION_DIST_INPUTS] > 50).all()
    pg = PGTorchPolicy(OBS, ACT, Trainer.merge_trainer_configs(PG_CONFIG, {}))
    assert pg._numpy_acting is None  # StochasticSampling: torch's sampling


def test_a_user_exploration_subclass_is_called():
    policy = dqn_policy(exploration_config={"type": CoinFlipGreedy})
    actions, _ = policy.compute_actions_from_obs(obs(6), explore=True)
    np.testing.assert_array_equal(actions, np.zeros(6))


def test_a_custom_action_distribution_keeps_its_greedy_choice():
    """Greedy acting is the distribution's `deterministic_sample`: only TorchCategorical's
    is numpy's argmax."""
    from corral.models import ModelCatalog
    from corral.models.torch.torch_action_dist import TorchCategorical

    class LeastLikely(TorchCategorical):
        def deterministic_sample(self):
            self.last_sample = torch.argmin(self.inputs, dim=-1)
            return self.last_sample

    ModelCatalog.register_custom_action_dist("least_likely_for_numpy_acting", LeastLikely)
    policy = dqn_policy(
        model={"fcnet_hiddens": [32], "custom_action_dist": "least_likely_for_numpy_acting"}
    )
    assert policy._numpy_acting is None
    actions, fetches = policy.compute_actions_from_obs(obs(6), explore=False)
    np.testing.assert_array_equal(actions, fetches[SampleBatch.ACTION_DIST_INPUTS].argmin(1))


def test_a_fully_connected_network_acts_in_numpy_too():
    """EpsilonGreedy over a policy-gradient model's logits (a user's choice): the same
    actions and fetches, the values from the value branch included."""
    config = Trainer.merge_trainer_configs(
        PG_CONFIG,
        {
            "model": {"fcnet_hiddens": [16, 16], "vf_share_layers": False},
            "exploration_config": {"type": "EpsilonGreedy", "epsilon_timesteps": 10},
        },
    )
    torch.manual_seed(0)
    policy = PGTorchPolicy(OBS, ACT, config)
    assert policy._numpy_acting is not None
    for explore in (False, True):
        assert_same_acting(policy, obs(8), explore)
    assert np.abs(policy.compute_actions_from_obs(obs(8))[1][SampleBatch.VF_PREDS]).sum() > 0
