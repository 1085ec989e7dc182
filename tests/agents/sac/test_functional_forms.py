"""RLlib 1.13's function forms of SAC's, RNNSAC's and CQL's policies: each computes what
corral's class does, and custom policies composed from them train."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.cql import cql_torch_policy as cql_fns
from corral.agents.cql.cql import CQL_DEFAULT_CONFIG
from corral.agents.dqn.dqn_torch_policy import ComputeTDErrorMixin
from corral.agents.sac import DEFAULT_CONFIG, SACTorchPolicy
from corral.agents.sac import rnnsac_torch_policy as rnnsac_fns
from corral.agents.sac import sac_torch_policy as sac_fns
from corral.agents.sac.rnnsac import RNNSACTrainer
from corral.models.torch.torch_action_dist import TorchCategorical, TorchSquashedGaussian
from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_mixins import TargetNetworkMixin

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
BOX = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
SMALL = {"fcnet_hiddens": [16]}


def sac_policy(action_space=BOX, cls=SACTorchPolicy, defaults=DEFAULT_CONFIG, **overrides):
    torch.manual_seed(0)
    config = {
        **defaults,
        "Q_model": {**defaults["Q_model"], **SMALL},
        "policy_model": {**defaults["policy_model"], **SMALL},
        **overrides,
    }
    return cls(OBS, action_space, config)


def transitions(action_space=BOX, n: int = 32, seed: int = 0) -> SampleBatch:
    rng = np.random.default_rng(seed)
    if isinstance(action_space, gym.spaces.Discrete):
        actions = rng.integers(0, action_space.n, n)
    else:
        actions = rng.uniform(-1, 1, (n, 1)).astype(np.float32)
    return SampleBatch(
        {
            SampleBatch.OBS: rng.uniform(-1, 1, (n, 3)).astype(np.float32),
            SampleBatch.ACTIONS: actions,
            SampleBatch.REWARDS: rng.normal(size=n).astype(np.float32),
            SampleBatch.NEXT_OBS: rng.uniform(-1, 1, (n, 3)).astype(np.float32),
            SampleBatch.TERMINATEDS: (rng.uniform(size=n) < 0.2).astype(np.float32),
        }
    )


def tensors(batch: SampleBatch) -> dict:
    return {k: torch.as_tensor(v) for k, v in batch.items()}


@pytest.mark.parametrize("action_space", [BOX, gym.spaces.Discrete(3)], ids=["box", "discrete"])
def test_actor_critic_loss_is_the_class_loss(action_space):
    policy = sac_policy(action_space)
    batch = tensors(transitions(action_space))
    torch.manual_seed(1)
    expected, expected_stats = policy.loss(policy.model, policy.dist_class, batch)
    torch.manual_seed(1)
    losses = sac_fns.actor_critic_loss(policy, policy.model, policy.dist_class, batch)
    # RLlib's order: the actor's, one per (twin) critic, the temperature's.
    assert len(losses) == 4 and all(loss.requires_grad for loss in losses)
    assert float(sum(losses).detach()) == pytest.approx(float(expected.detach()), rel=1e-6)
    assert float(sac_fns.stats(policy, batch)["actor_loss"]) == pytest.approx(
        float(losses[0].detach())
    )
    assert float(losses[0].detach()) == pytest.approx(
        float(expected_stats["actor_loss"].detach()), rel=1e-6
    )
    assert float((losses[1] + losses[2]).detach()) == pytest.approx(
        float(expected_stats["critic_loss"]), rel=1e-6
    )
    stats = sac_fns.stats(policy, batch)
    assert set(stats) == set(expected_stats)
    for name in ("actor_loss", "critic_loss", "alpha_loss", "alpha_value", "mean_q"):
        assert float(stats[name]) == pytest.approx(float(expected_stats[name]), rel=1e-6)


def test_doubled_loss_trains_through_with_updates():
    policy_cls = SACTorchPolicy.with_updates(
        name="DoubledSAC",
        loss_fn=lambda p, m, d, b: tuple(2 * x for x in sac_fns.actor_critic_loss(p, m, d, b)),
        stats_fn=sac_fns.stats,
        optimizer_fn=sac_fns.optimizer_fn,
    )
    policy = sac_policy(cls=policy_cls)
    before = {k: v.copy() for k, v in policy.get_weights().items()}
    stats = policy.learn_on_batch(transitions())["learner_stats"]
    assert {"actor_loss", "critic_loss", "alpha_loss", "mean_q"} <= set(stats)
    changed = [k for k, v in policy.get_weights().items() if not np.array_equal(before[k], v)]
    assert any("action_model" in k for k in changed) and any("q_net" in k for k in changed)


def test_model_distribution_optimizer_and_mixins():
    policy = sac_policy()
    model, dist_class = sac_fns.build_sac_model_and_action_dist(policy, OBS, BOX, policy.config)
    assert type(model) is type(policy.model) and model is not policy.model
    assert dist_class is TorchSquashedGaussian
    discrete = sac_policy(gym.spaces.Discrete(3))
    assert discrete.action_dist_class() is TorchCategorical

    obs = torch.as_tensor(transitions(n=5)[SampleBatch.OBS])
    inputs, cls, state = sac_fns.action_distribution_fn(
        policy, policy.model, {SampleBatch.OBS: obs}, explore=False
    )
    torch.testing.assert_close(inputs, policy.model.get_policy_output(obs))
    assert cls is TorchSquashedGaussian and state == []

    optimizer = sac_fns.optimizer_fn(policy, policy.config)
    assert [g["name"] for g in optimizer.param_groups] == ["actor", "critic", "alpha"]
    assert isinstance(policy, ComputeTDErrorMixin) and isinstance(policy, TargetNetworkMixin)
    assert sac_fns.ComputeTDErrorMixin is ComputeTDErrorMixin

    with torch.no_grad():
        for p in policy.model.q_net.parameters():
            p.add_(1.0)
    sac_fns.setup_late_mixins(policy, OBS, BOX, policy.config)
    for a, b in zip(policy.model.q_net.parameters(), policy.target_model.parameters()):
        torch.testing.assert_close(a, b)

    batch = transitions()
    torch.manual_seed(2)
    expected = policy.compute_td_error(batch)
    torch.manual_seed(2)
    got = policy.compute_td_error(
        batch[SampleBatch.OBS],
        batch[SampleBatch.ACTIONS],
        batch[SampleBatch.REWARDS],
        batch[SampleBatch.NEXT_OBS],
        batch[SampleBatch.TERMINATEDS],
        np.ones(32, np.float32),
    )
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_rnnsac_doubled_loss_trains_in_a_trainer():
    calls = []

    def loss(policy, model, dist_class, batch):
        calls.append(1)
        return tuple(2 * x for x in rnnsac_fns.actor_critic_loss(policy, model, dist_class, batch))

    policy_cls = rnnsac_fns.RNNSACTorchPolicy.with_updates(
        name="MyRNNSAC", loss_fn=loss, stats_fn=sac_fns.stats
    )

    class MyRNNSAC(RNNSACTrainer):
        def get_default_policy_class(self, config):
            return policy_cls

    net = {"use_lstm": True, "lstm_cell_size": 8, "fcnet_hiddens": [8]}
    trainer = MyRNNSAC(
        config={
            "num_workers": 0,
            "min_time_s_per_reporting": 0,
            "min_sample_timesteps_per_reporting": 64,
            "learning_starts": 32,
            "train_batch_size": 24,
            "burn_in": 2,
            "model": {"max_seq_len": 4},
            "policy_model": net,
            "Q_model": net,
            "seed": 0,
        },
        env="corral.env.stateless_cartpole.StatelessCartPole",
    )
    try:
        result = trainer.train()
        policy = trainer.get_policy()
        model = rnnsac_fns.build_rnnsac_model(
            policy, policy.observation_space, policy.action_space, policy.config
        )
        obs = np.zeros((3, 2), np.float32)
        inputs, cls, state_out = rnnsac_fns.action_distribution_fn(
            policy, policy.model, {SampleBatch.OBS: obs}
        )
        _, extra = policy.compute_actions_from_obs(obs, explore=False)
    finally:
        trainer.stop()
    assert calls
    stats = result["info"]["learner"]["default_policy"]["learner_stats"]
    assert np.isfinite(stats["critic_loss"]) and np.isfinite(stats["actor_loss"])
    assert type(model) is type(policy.model)
    assert cls is TorchCategorical and inputs.shape == (3, 2)
    np.testing.assert_allclose(
        inputs.detach().numpy(), extra[SampleBatch.ACTION_DIST_INPUTS], rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(state_out[0].detach().numpy(), extra["state_out_0"], atol=1e-6)


def test_cql_functions():
    policy = sac_policy(
        cls=cql_fns.CQLTorchPolicy,
        defaults=CQL_DEFAULT_CONFIG,
        lagrangian=True,
        num_actions=2,
        train_batch_size=32,
    )
    batch = tensors(transitions())
    torch.manual_seed(3)
    expected, _ = policy.loss(policy.model, policy.dist_class, batch)
    torch.manual_seed(3)
    losses = sac_fns.actor_critic_loss(policy, policy.model, policy.dist_class, batch)
    # With `lagrangian`, RLlib's fifth loss is alpha''s.
    assert len(losses) == 5
    assert float(sum(losses).detach()) == pytest.approx(float(expected.detach()), rel=1e-6)

    optimizer = cql_fns.cql_optimizer_fn(policy, policy.config)
    assert [g["name"] for g in optimizer.param_groups][-1] == "alpha_prime"
    cql_fns.cql_setup_late_mixins(policy, OBS, BOX, policy.config)

    before = {k: v.copy() for k, v in policy.get_weights().items()}
    grads, info = cql_fns.compute_gradients_fn(policy, transitions())
    assert grads is None and np.isfinite(info["learner_stats"]["cql_loss"])
    assert policy.cur_iter == 1
    assert any(not np.array_equal(before[k], v) for k, v in policy.get_weights().items())
    assert cql_fns.apply_gradients_fn(policy, grads) is None
    assert cql_fns.cql_stats(policy, batch)["cql_loss"] == pytest.approx(
        info["learner_stats"]["cql_loss"]
    )

    doubled = cql_fns.CQLTorchPolicy.with_updates(
        name="DoubledCQL",
        loss_fn=lambda p, m, d, b: tuple(2 * x for x in sac_fns.actor_critic_loss(p, m, d, b)),
        optimizer_fn=cql_fns.cql_optimizer_fn,
    )
    trained = sac_policy(cls=doubled, defaults=CQL_DEFAULT_CONFIG, num_actions=2)
    stats = trained.learn_on_batch(transitions())["learner_stats"]
    assert np.isfinite(stats["critic_loss"]) and trained.cur_iter == 1
