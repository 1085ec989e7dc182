"""CQL on SAC and on DQN: the conservative terms by hand and what they do to Q."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.cql import (
    CQL_DEFAULT_CONFIG,
    CQL_DQN_DEFAULT_CONFIG,
    CQLDQNTorchPolicy,
    CQLTorchPolicy,
    CQLTrainer,
)
from corral.agents.cql.cql_dqn_torch_policy import cql_dqn_term
from corral.agents.cql.cql_torch_policy import (
    policy_actions_repeat,
    q_values_repeat,
    squashed_gaussian_logp,
)
from corral.agents.sac.sac_torch_policy import squashed_gaussian_sample
from corral.policy.sample_batch import SampleBatch
from corral.utils.error import UnsupportedSpaceException

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Small nets train faster on one thread (and do not fight other processes for cores)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def offline_batch(n: int, action: float, seed: int = 0) -> SampleBatch:
    """Transitions whose logged action is always `action`; reward 1 - |a - action|."""
    rng = np.random.default_rng(seed)
    obs = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
    return SampleBatch(
        {
            SampleBatch.OBS: obs,
            SampleBatch.NEXT_OBS: rng.uniform(-1, 1, (n, 3)).astype(np.float32),
            SampleBatch.ACTIONS: np.full((n, 1), action, np.float32),
            SampleBatch.REWARDS: np.ones(n, np.float32),
            SampleBatch.TERMINATEDS: np.ones(n, bool),
        }
    )


def cql_policy(**overrides) -> CQLTorchPolicy:
    torch.manual_seed(0)
    small = {"fcnet_hiddens": [32, 32], "fcnet_activation": "relu"}
    config = {
        **CQL_DEFAULT_CONFIG,
        "num_actions": 4,
        "train_batch_size": 64,
        "Q_model": {**CQL_DEFAULT_CONFIG["Q_model"], **small},
        "policy_model": {**CQL_DEFAULT_CONFIG["policy_model"], **small},
        **overrides,
    }
    return CQLTorchPolicy(OBS, ACT, config)


def test_dqn_term_by_hand():
    q = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    actions = torch.tensor([2, 0])
    t = 0.5
    expected = np.mean(
        [t * np.log(np.exp(2.0) + np.exp(4.0) + np.exp(6.0)) - 3.0, t * np.log(3.0) - 0.0]
    )
    assert float(cql_dqn_term(q, actions, t)) == pytest.approx(expected, rel=1e-6)


def test_dqn_loss_is_td_loss_plus_weighted_term():
    torch.manual_seed(0)
    config = {**CQL_DQN_DEFAULT_CONFIG, "min_q_weight": 2.0, "temperature": 1.0}
    policy = CQLDQNTorchPolicy(OBS, gym.spaces.Discrete(3), config)
    rng = np.random.default_rng(0)
    batch = {
        SampleBatch.OBS: torch.from_numpy(rng.uniform(-1, 1, (8, 3)).astype(np.float32)),
        SampleBatch.NEXT_OBS: torch.from_numpy(rng.uniform(-1, 1, (8, 3)).astype(np.float32)),
        SampleBatch.ACTIONS: torch.from_numpy(rng.integers(0, 3, 8)),
        SampleBatch.REWARDS: torch.ones(8),
        SampleBatch.TERMINATEDS: torch.zeros(8, dtype=torch.bool),
    }
    total, stats = policy.loss(policy.model, policy.dist_class, batch)
    with torch.no_grad():
        q = policy.model.q_values(policy.model.q_logits(batch[SampleBatch.OBS]))
        term = cql_dqn_term(q, batch[SampleBatch.ACTIONS], 1.0)
    assert float(stats["cql_loss"]) == pytest.approx(float(term), rel=1e-5)
    assert float(total.detach()) == pytest.approx(float(stats["td_loss"]) + 2.0 * float(term))


def test_logp_of_given_actions_matches_the_sampler():
    torch.manual_seed(1)
    dist_inputs = torch.randn(16, 4)
    actions, logp = squashed_gaussian_sample(dist_inputs)
    torch.testing.assert_close(
        squashed_gaussian_logp(dist_inputs, actions), logp, rtol=1e-4, atol=1e-4
    )


def test_repeat_helpers_group_actions_per_observation():
    policy = cql_policy()
    obs = torch.randn(5, 3)
    actions, logp = policy_actions_repeat(policy.model, None, obs, 4)
    assert actions.shape == (20, 1) and logp.shape == (5, 4)
    q = q_values_repeat(policy.model, obs, actions)
    assert q.shape == (2, 5, 4)
    # Row i*N + k is observation i's k-th action.
    direct = policy.model.q_ensemble(obs[1:2].expand(4, 3), actions[4:8])
    torch.testing.assert_close(q[:, 1, :], direct)


def test_conservative_critics_rank_the_data_action_above_unseen_ones():
    batch = offline_batch(128, 0.5)
    gaps = {}
    for weight in (0.0, 5.0):
        policy = cql_policy(
            min_q_weight=weight,
            bc_iters=0,
            optimization={
                "actor_learning_rate": 3e-4,
                "critic_learning_rate": 3e-3,
                "entropy_learning_rate": 3e-4,
            },
        )
        for _ in range(40):
            policy.learn_on_batch(batch)
        obs = torch.from_numpy(batch[SampleBatch.OBS][:64])
        with torch.no_grad():
            q_data = policy.model.q_ensemble(obs, torch.full((64, 1), 0.5)).mean()
            q_other = policy.model.q_ensemble(obs, torch.full((64, 1), -0.9)).mean()
        gaps[weight] = float(q_data - q_other)
    # Without the term Q is never told about a = -0.9; with it, -0.9 is pushed down.
    assert gaps[5.0] > 1.0
    assert gaps[5.0] > gaps[0.0] + 1.0


def test_bc_phase_then_q_phase():
    batch = offline_batch(64, 0.5)
    policy = cql_policy(bc_iters=3)
    for _ in range(3):
        policy.learn_on_batch(batch)
    assert policy.cur_iter == 3
    state = policy.extra_state()
    assert state["cur_iter"] == 3
    # During BC the actor's loss is -log pi(data action) + alpha log pi: it moves the mean
    # towards atanh(0.5) ~ 0.55. (At an actor learning rate of 3e-2 for 40 steps one seed
    # in 24 ended at 0.26; at 1e-2 for 60 steps the 24 seeds end between 0.472 and 0.501.)
    policy = cql_policy(
        bc_iters=1000,
        optimization={
            "actor_learning_rate": 1e-2,
            "critic_learning_rate": 3e-4,
            "entropy_learning_rate": 0.0,
        },
    )
    for _ in range(60):
        policy.learn_on_batch(batch)
    with torch.no_grad():
        mean = policy.model.get_policy_output(torch.from_numpy(batch[SampleBatch.OBS]))[:, 0]
    assert float(torch.tanh(mean).mean()) == pytest.approx(0.5, abs=0.1)


def test_lagrangian_alpha_prime_grows_while_the_gap_is_above_the_threshold():
    batch = offline_batch(128, 0.5)
    policy = cql_policy(lagrangian=True, lagrangian_thresh=-100.0, bc_iters=0)
    before = float(policy.model.log_alpha_prime.detach())
    stats = policy.learn_on_batch(batch)
    assert float(policy.model.log_alpha_prime.detach()) > before
    assert "alpha_prime_value" in stats["learner_stats"]


def test_discrete_actions_are_refused_with_a_pointer_to_cql_dqn():
    with pytest.raises(UnsupportedSpaceException, match="CQL_DQN"):
        CQLTorchPolicy(OBS, gym.spaces.Discrete(2), dict(CQL_DEFAULT_CONFIG))


def test_trainer_keys_are_rllibs():
    for key, value in {
        "bc_iters": 20000,
        "temperature": 1.0,
        "num_actions": 10,
        "lagrangian": False,
        "lagrangian_thresh": 5.0,
        "min_q_weight": 5.0,
    }.items():
        assert CQLTrainer.get_default_config()[key] == value
