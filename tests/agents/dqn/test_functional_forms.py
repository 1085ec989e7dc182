"""RLlib 1.13's function forms of the DQN family's policies (DQN, Simple Q, R2D2) and
`calculate_rr_weights` / `GenericOffPolicyTrainer`: each computes what corral's class does,
and custom policies composed from them train."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.dqn import DEFAULT_CONFIG, DQNTorchModel, DQNTorchPolicy, DQNTrainer
from corral.agents.dqn import dqn_torch_policy as dqn_fns
from corral.agents.dqn import r2d2_torch_policy as r2d2_fns
from corral.agents.dqn import simple_q_torch_policy as simple_q_fns
from corral.agents.dqn.dqn import GenericOffPolicyTrainer, calculate_rr_weights
from corral.agents.dqn.r2d2 import R2D2Trainer
from corral.agents.dqn.simple_q import SimpleQTrainer
from corral.models.torch.torch_action_dist import TorchCategorical
from corral.policy.sample_batch import SampleBatch
from corral.utils.replay_buffers import WEIGHTS

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACT = gym.spaces.Discrete(3)


def dqn_policy(**overrides) -> DQNTorchPolicy:
    torch.manual_seed(0)
    config = {**DEFAULT_CONFIG, "model": {"fcnet_hiddens": [16]}, "hiddens": [16], **overrides}
    return DQNTorchPolicy(OBS, ACT, config)


def transitions(n: int = 32, seed: int = 0) -> SampleBatch:
    rng = np.random.default_rng(seed)
    return SampleBatch(
        {
            SampleBatch.OBS: rng.uniform(-1, 1, (n, 4)).astype(np.float32),
            SampleBatch.ACTIONS: rng.integers(0, 3, n),
            SampleBatch.REWARDS: rng.normal(size=n).astype(np.float32),
            SampleBatch.NEXT_OBS: rng.uniform(-1, 1, (n, 4)).astype(np.float32),
            SampleBatch.TERMINATEDS: (rng.uniform(size=n) < 0.2).astype(np.float32),
            WEIGHTS: rng.uniform(0.5, 1.5, n).astype(np.float32),
        }
    )


def tensors(batch: SampleBatch) -> dict:
    return {k: torch.as_tensor(v) for k, v in batch.items()}


@pytest.mark.parametrize("num_atoms", [1, 5])
def test_build_q_losses_and_stats_are_the_class_loss(num_atoms):
    policy = dqn_policy(num_atoms=num_atoms)
    batch = tensors(transitions())
    expected, expected_stats = policy.loss(policy.model, policy.dist_class, batch)
    loss = dqn_fns.build_q_losses(policy, policy.model, policy.dist_class, batch)
    assert torch.is_tensor(loss) and loss.requires_grad
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), rel=1e-6)
    stats = dqn_fns.build_q_stats(policy, batch)
    assert stats["cur_lr"] == pytest.approx(DEFAULT_CONFIG["lr"])
    for name in ("loss", "mean_q", "min_q", "max_q", "mean_td_error"):
        assert float(stats[name]) == pytest.approx(float(expected_stats[name]), rel=1e-6)
    assert float(simple_q_fns.stats_fn(policy, batch)["loss"]) == pytest.approx(
        float(expected.detach())
    )


@pytest.mark.parametrize("num_atoms", [1, 5])
def test_qloss_on_precomputed_q_values_is_the_class_loss(num_atoms):
    # Plain targets (no double Q), so RLlib's QLoss inputs are easy to form by hand.
    policy = dqn_policy(num_atoms=num_atoms, double_q=False, dueling=False)
    batch = tensors(transitions(seed=1))
    expected, _ = policy.loss(policy.model, policy.dist_class, batch)
    rows = torch.arange(32)
    actions = batch[SampleBatch.ACTIONS].long()
    with torch.no_grad():
        logits_tp1 = policy.target_model.q_logits(batch[SampleBatch.NEXT_OBS])
        q_tp1 = policy.target_model.q_values(logits_tp1)
    best = q_tp1.argmax(-1)
    q_t, logits_t, _, state = dqn_fns.compute_q_values(
        policy, policy.model, {SampleBatch.OBS: batch[SampleBatch.OBS]}
    )
    assert state == []
    q_loss = dqn_fns.QLoss(
        q_t[rows, actions],
        logits_t[rows, actions] if num_atoms > 1 else q_t[rows, actions],
        q_tp1[rows, best],
        torch.softmax(logits_tp1[rows, best], -1) if num_atoms > 1 else q_tp1[rows, best],
        batch[WEIGHTS],
        batch[SampleBatch.REWARDS],
        batch[SampleBatch.TERMINATEDS],
        gamma=DEFAULT_CONFIG["gamma"],
        n_step=1,
        num_atoms=num_atoms,
        v_min=DEFAULT_CONFIG["v_min"],
        v_max=DEFAULT_CONFIG["v_max"],
    )
    assert float(q_loss.loss) == pytest.approx(float(expected), rel=1e-5)
    assert q_loss.td_error.shape == (32,) and "mean_td_error" in q_loss.stats


def test_doubled_loss_trains_through_with_updates():
    policy_cls = DQNTorchPolicy.with_updates(
        name="DoubledDQN",
        loss_fn=lambda p, m, d, b: dqn_fns.build_q_losses(p, m, d, b) * 2,
        stats_fn=dqn_fns.build_q_stats,
        optimizer_fn=dqn_fns.adam_optimizer,
    )
    torch.manual_seed(0)
    policy = policy_cls(OBS, ACT, {**DEFAULT_CONFIG, "model": {"fcnet_hiddens": [16]}})
    batch = transitions()
    before = {k: v.copy() for k, v in policy.get_weights().items()}
    stats = policy.learn_on_batch(batch)["learner_stats"]
    assert {"loss", "mean_q", "mean_td_error", "cur_lr"} <= set(stats)
    assert any(not np.array_equal(before[k], v) for k, v in policy.get_weights().items())


def test_simple_q_with_updates_trains_in_a_trainer():
    calls = []

    def loss(policy, model, dist_class, batch):
        calls.append(1)
        return simple_q_fns.build_q_losses(policy, model, dist_class, batch) * 2

    policy_cls = DQNTorchPolicy.with_updates(
        name="MySimpleQ", loss_fn=loss, stats_fn=simple_q_fns.stats_fn
    )

    class MySimpleQ(SimpleQTrainer):
        def get_default_policy_class(self, config):
            return policy_cls

    trainer = MySimpleQ(
        config={
            "num_workers": 0,
            "learning_starts": 8,
            "timesteps_per_iteration": 32,
            "min_time_s_per_reporting": 0,
            "model": {"fcnet_hiddens": [8]},
            "seed": 0,
        },
        env="CartPole-v1",
    )
    try:
        result = trainer.train()
    finally:
        trainer.stop()
    assert calls
    stats = result["info"]["learner"]["default_policy"]["learner_stats"]
    assert np.isfinite(stats["loss"])


def test_compute_td_error_takes_rllibs_arrays():
    policy = dqn_policy()
    batch = transitions()
    expected = policy.compute_td_error(batch)
    got = policy.compute_td_error(
        batch[SampleBatch.OBS],
        batch[SampleBatch.ACTIONS],
        batch[SampleBatch.REWARDS],
        batch[SampleBatch.NEXT_OBS],
        batch[SampleBatch.TERMINATEDS],
        batch[WEIGHTS],
    )
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert isinstance(policy, dqn_fns.ComputeTDErrorMixin)
    assert r2d2_fns.ComputeTDErrorMixin is dqn_fns.ComputeTDErrorMixin


def test_model_distribution_acting_and_mixin_functions():
    policy = dqn_policy()
    model, dist_class = dqn_fns.build_q_model_and_distribution(policy, OBS, ACT, policy.config)
    assert isinstance(model, DQNTorchModel) and model is not policy.model
    assert dist_class is TorchCategorical
    assert [p.shape for p in model.parameters()] == [p.shape for p in policy.model.parameters()]
    with pytest.raises(Exception, match="not supported for DQN"):
        dqn_fns.build_q_model_and_distribution(policy, OBS, gym.spaces.Box(-1, 1, (2,)), {})

    obs = torch.as_tensor(transitions(5)[SampleBatch.OBS])
    q = policy.model.q_values(policy.model.q_logits(obs))
    inputs, cls, state = dqn_fns.get_distribution_inputs_and_class(
        policy, policy.model, {SampleBatch.OBS: obs}, explore=False
    )
    torch.testing.assert_close(inputs, q)
    assert cls is TorchCategorical and state == []
    out = dqn_fns.extra_action_out_fn(policy, {SampleBatch.OBS: obs}, [], policy.model, None)
    torch.testing.assert_close(out["q_values"], q)

    # before_loss_init / setup_late_mixins: the target is a copy of the online network.
    with torch.no_grad():
        for p in policy.model.parameters():
            p.add_(1.0)
    simple_q_fns.setup_late_mixins(policy, OBS, ACT, policy.config)
    for a, b in zip(policy.model.parameters(), policy.target_model.parameters()):
        torch.testing.assert_close(a, b)
    assert simple_q_fns.TargetNetworkMixin in type(policy).__mro__

    dqn_fns.setup_early_mixins(policy, OBS, ACT, {**policy.config, "lr": 0.25})
    assert policy.cur_lr == 0.25
    opt = dqn_fns.adam_optimizer(policy, policy.config)
    assert isinstance(opt, torch.optim.Adam)
    loss = dqn_fns.build_q_losses(policy, policy.model, None, tensors(transitions()))
    loss.backward()
    info = dqn_fns.grad_process_and_td_error_fn(policy, opt, loss)
    assert info["grad_gnorm"] > 0  # DQN's default grad_clip is 40


def test_r2d2_loss_doubled_trains_in_a_trainer():
    calls = []

    def loss(policy, model, dist_class, batch):
        calls.append(1)
        return r2d2_fns.r2d2_loss(policy, model, dist_class, batch) * 2

    policy_cls = r2d2_fns.R2D2TorchPolicy.with_updates(
        name="MyR2D2", loss_fn=loss, stats_fn=r2d2_fns.build_q_stats
    )

    class MyR2D2(R2D2Trainer):
        def get_default_policy_class(self, config):
            return policy_cls

    model = {"use_lstm": True, "lstm_cell_size": 8, "max_seq_len": 4, "fcnet_hiddens": [8]}
    trainer = MyR2D2(
        config={
            "num_workers": 0,
            "min_time_s_per_reporting": 0,
            "min_sample_timesteps_per_reporting": 64,
            "learning_starts": 32,
            "train_batch_size": 24,
            "hiddens": [8],
            "burn_in": 2,
            "model": model,
            "seed": 0,
        },
        env="corral.env.stateless_cartpole.StatelessCartPole",
    )
    try:
        result = trainer.train()
        policy = trainer.get_policy()
        built, dist_class = r2d2_fns.build_r2d2_model_and_distribution(
            policy, policy.observation_space, policy.action_space, policy.config
        )
        obs = np.zeros((3, 2), np.float32)
        q = r2d2_fns.extra_action_out_fn(policy, {SampleBatch.OBS: obs}, None, policy.model)
    finally:
        trainer.stop()
    assert calls
    stats = result["info"]["learner"]["default_policy"]["learner_stats"]
    assert np.isfinite(stats["loss"]) and "cur_lr" in stats
    assert type(built) is type(policy.model) and dist_class is TorchCategorical
    assert q["q_values"].shape == (3, 2)


def test_calculate_rr_weights():
    config = {
        "training_intensity": None,
        "train_batch_size": 32,
        "rollout_fragment_length": 4,
        "num_envs_per_worker": 1,
        "num_workers": 0,
    }
    assert calculate_rr_weights(config) == [1, 1]
    # One round samples 4 steps and trains 32 rows: a native ratio of 8.
    assert calculate_rr_weights({**config, "training_intensity": 16}) == [1, 2]
    assert calculate_rr_weights({**config, "training_intensity": 2}) == [4, 1]
    # Three workers (plus the local one) sample 16 steps a round: native ratio 2.
    assert calculate_rr_weights({**config, "num_workers": 3, "training_intensity": 8}) == [1, 4]


def test_generic_off_policy_trainer_is_the_deprecated_dqn_trainer(caplog):
    assert issubclass(GenericOffPolicyTrainer, DQNTrainer)
    with caplog.at_level("WARNING", logger="corral.utils.deprecation"):
        trainer = GenericOffPolicyTrainer(config={"num_workers": 0}, env="CartPole-v1")
    assert "`GenericOffPolicyTrainer` has been deprecated. Use `DQNTrainer`" in caplog.text
    try:
        assert isinstance(trainer.get_policy(), DQNTorchPolicy)
    finally:
        trainer.stop()
