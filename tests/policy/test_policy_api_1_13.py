"""RLlib 1.13's `Policy` methods that user code calls on any policy."""

import logging
import platform

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.dqn import DQNTrainer


@pytest.fixture(scope="module")
def dqn():
    trainer = DQNTrainer(
        env="CartPole-v1",
        config={
            "num_workers": 0,
            "seed": 0,
            "learning_starts": 0,
            "min_sample_timesteps_per_reporting": 100,
            "min_time_s_per_reporting": 0,
            "exploration_config": {"epsilon_timesteps": 1000, "final_epsilon": 0.1},
        },
    )
    trainer.train()
    yield trainer
    trainer.stop()


def test_exploration_state_has_the_current_values(dqn, caplog):
    policy = dqn.get_policy()
    state = policy.get_exploration_state()
    # About 100 of 1,000 steps from 1.0 down to 0.1.
    assert 90 <= state["last_timestep"] <= 100
    assert state["cur_epsilon"] == pytest.approx(1.0 - 0.9 * state["last_timestep"] / 1000)
    with caplog.at_level(logging.WARNING):
        assert policy.get_exploration_info() == state
    assert "get_exploration_info" in caplog.text


def test_apply_session_host_and_framework(dqn):
    policy = dqn.get_policy()
    assert policy.apply(lambda p, k, scale=1: (p is policy, k * scale), 2, scale=3) == (True, 6)
    assert policy.get_session() is None
    assert policy.get_host() == platform.node()
    assert policy.framework == "torch"
    # Through the workers, as RLlib 1.x code reaches its policies.
    assert dqn.workers.foreach_policy(lambda p, pid: p.framework) == ["torch"]


def test_ppo_and_appo_adapt_their_kl_coefficient_with_rllib_s_update_kl():
    from corral.agents.ppo import PPOTrainer
    from corral.agents.ppo.appo_torch_policy import APPOTorchPolicy
    from corral.policy.torch_mixins import KLCoeffMixin

    trainer = PPOTrainer(
        env="CartPole-v1",
        config={"num_workers": 0, "kl_coeff": 0.2, "kl_target": 0.01, "train_batch_size": 128},
    )
    try:
        policy = trainer.get_policy()
        assert isinstance(policy, KLCoeffMixin) and issubclass(APPOTorchPolicy, KLCoeffMixin)
        assert policy.update_kl(0.05) == pytest.approx(0.3)  # above 2 x target: x 1.5
        assert policy.update_kl(0.001) == pytest.approx(0.15)  # below target / 2: halved
        assert policy.update_kl(0.01) == pytest.approx(0.15) == policy.kl_coeff_val
        # The learner's update adapts it the same way, from the update's mean KL.
        assert policy.after_update({"kl": 0.05}) == {"cur_kl_coeff": pytest.approx(0.225)}
    finally:
        trainer.stop()


def test_policy_base_declares_rllib_1_13_s_methods():
    # RLlib 1.13's example policies decorate their overrides with @override(Policy).
    from corral.policy.policy import Policy
    from corral.utils.annotations import override

    class Mine(Policy):
        @override(Policy)
        def compute_log_likelihoods(self, actions, obs_batch, *args, **kwargs):
            return np.zeros(len(obs_batch))

        @override(Policy)
        def load_batch_into_buffer(self, batch, buffer_index=0):
            return batch.count

        @override(Policy)
        def loss(self, model, dist_class, train_batch):
            return 0.0

    space = gym.spaces.Box(-1.0, 1.0, (2,))
    policy = Mine(space, gym.spaces.Discrete(2), {})
    assert policy.compute_log_likelihoods([0], [[0.0, 0.0]]).shape == (1,)
    with pytest.raises(NotImplementedError, match="Mine does not load"):
        policy.learn_on_loaded_batch()


def test_learn_on_batch_from_replay_buffer(dqn):
    from corral.execution.buffers.multi_agent_replay_buffer import MultiAgentReplayBuffer

    buffer = MultiAgentReplayBuffer(learning_starts=0, capacity=100, replay_batch_size=8)
    policy = dqn.get_policy()
    assert policy.learn_on_batch_from_replay_buffer(buffer, "default_policy") == {}
    buffer.add_batch(dqn.workers.local_worker().sample())
    stats = policy.learn_on_batch_from_replay_buffer(buffer, "default_policy")
    assert "mean_q" in stats["learner_stats"]


def test_dummy_batch_and_default_view_requirements_as_rllib_1_13():
    from corral.policy.policy import Policy
    from corral.policy.sample_batch import SampleBatch
    from corral.policy.view_requirement import ViewRequirement

    obs_space = gym.spaces.Dict(
        {"pos": gym.spaces.Box(-1.0, 1.0, (2,)), "mode": gym.spaces.Discrete(3)}
    )
    actions = gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.Box(-1.0, 1.0, (2,))])
    policy = Policy(obs_space, actions, {})
    assert set(policy._get_default_view_requirements()) >= {"obs", "actions", "rewards"}
    box = gym.spaces.Box(-1.0, 1.0, (2,))
    policy.view_requirements["last_3"] = ViewRequirement("pos", space=box, shift="-2:0")
    dummy = policy._get_dummy_batch_from_view_requirements(batch_size=4)
    assert dummy[SampleBatch.OBS].shape == (4, 5)  # 2 + one-hot 3
    assert dummy[SampleBatch.ACTIONS].shape == (4, 3)  # 1 + 2
    assert dummy[SampleBatch.REWARDS].shape == (4,) and not dummy[SampleBatch.REWARDS].any()
    assert dummy["last_3"].shape == (4, 3, 2)
    raw = Policy(obs_space, actions, {"_disable_preprocessor_api": True})
    nested_obs = raw._get_dummy_batch_from_view_requirements(2)[SampleBatch.OBS]
    assert nested_obs["pos"].shape == (2, 2) and nested_obs["mode"].shape == (2,)


def test_torch_policy_computes_log_likelihoods_as_rllib_1_13():
    import torch

    from corral.agents.ppo import PPOTrainer

    trainer = PPOTrainer(
        env="Pendulum-v1",
        config={"num_workers": 0, "train_batch_size": 128, "sgd_minibatch_size": 64},
    )
    try:
        policy = trainer.get_policy()
        batch = trainer.workers.local_worker().sample()
        logp = policy.compute_log_likelihoods(batch["actions"], batch["obs"])
        assert torch.is_tensor(logp) and logp.shape == (batch.count,)
        # The sampler recorded each action's log-likelihood when it drew it.
        np.testing.assert_allclose(logp.numpy(), batch["action_logp"], rtol=1e-4, atol=1e-4)
        # Actions in the env's bounds ([-2, 2]) are normalised first.
        env_actions = batch["actions"] * 2.0
        again = policy.compute_log_likelihoods(env_actions, batch["obs"], actions_normalized=False)
        np.testing.assert_allclose(again.numpy(), logp.numpy(), rtol=1e-5, atol=1e-5)
    finally:
        trainer.stop()
    lstm = PPOTrainer(
        env="CartPole-v1",
        config={
            "num_workers": 0,
            "train_batch_size": 128,
            "sgd_minibatch_size": 64,
            "model": {"use_lstm": True, "max_seq_len": 8},
        },
    )
    try:
        policy = lstm.get_policy()
        obs = np.zeros((3, 4), np.float32)
        logp = policy.compute_log_likelihoods(np.array([0, 1, 1]), obs)
        initial = [np.repeat(s[None], 3, axis=0) for s in policy.get_initial_state()]
        first = policy.compute_log_likelihoods(np.array([0, 1, 1]), obs, initial)
        assert logp.shape == (3,) and torch.allclose(logp, first)
        assert torch.allclose(torch.logsumexp(torch.stack([logp[0], logp[1]]), 0), torch.zeros(()))
    finally:
        lstm.stop()


def test_multi_device_api_loads_once_and_learns_on_slices(dqn):
    policy = dqn.get_policy()
    batch = dqn.workers.local_worker().sample()
    for _ in range(2):
        batch = batch.concat(dqn.workers.local_worker().sample())
    with pytest.raises(ValueError, match="load_batch_into_buffer"):
        policy.learn_on_loaded_batch(buffer_index=3)
    assert policy.load_batch_into_buffer(batch, buffer_index=0) == batch.count
    assert policy.get_num_samples_loaded_into_buffer(0) == batch.count
    assert policy.get_num_samples_loaded_into_buffer(1) == 0
    before = {k: v.copy() for k, v in policy.get_weights().items()}
    stats = policy.learn_on_loaded_batch(offset=0, buffer_index=0)
    assert "mean_q" in stats["learner_stats"]
    assert any(not np.array_equal(before[k], v) for k, v in policy.get_weights().items())


@pytest.mark.parametrize("algorithm", ["PG", "DQN"])
def test_a_subclass_s_optimizer_override_is_used_as_in_rllib_1_13(algorithm):
    # Also over a make_optimizer the subclass inherits (DQN's).
    import torch

    from corral.agents.dqn import DQNTorchPolicy
    from corral.agents.pg import PGTorchPolicy
    from corral.agents.registry import get_trainer_class
    from corral.policy.policy import PolicySpec

    base = {"PG": PGTorchPolicy, "DQN": DQNTorchPolicy}[algorithm]

    class WithSGD(base):
        def optimizer(self):
            return [torch.optim.SGD(self.model.parameters(), lr=0.01)]

    trainer = get_trainer_class(algorithm)(
        env="CartPole-v1",
        config={
            "num_workers": 0,
            "train_batch_size": 64,
            "multiagent": {"policies": {"default_policy": PolicySpec(policy_class=WithSGD)}},
        },
    )
    try:
        trainer.train()
        optimizer = trainer.learner_group.local_learner.optimizers["default_policy"]
        assert isinstance(optimizer, torch.optim.SGD)
    finally:
        trainer.stop()
