"""`TargetNetworkMixin.set_weights`: as RLlib 1.13's, loading a policy's weights moves its
target network to them (a copy for DQN, one soft step of `tau` for SAC / TD3), except on a
remote rollout worker, whose target is the driver's (sent on its own) or unused."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.ddpg import TD3_DEFAULT_CONFIG, DDPGTorchPolicy
from corral.agents.dqn import DEFAULT_CONFIG as DQN_CONFIG
from corral.agents.dqn import DQNTorchPolicy, DQNTrainer
from corral.agents.sac import DEFAULT_CONFIG as SAC_CONFIG
from corral.agents.sac import SACTorchPolicy
from corral.agents.trainer import Trainer

BOX = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACTION_BOX = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)


def dqn_policy(worker_index: int = 0) -> DQNTorchPolicy:
    config = Trainer.merge_trainer_configs(
        DQN_CONFIG, {"model": {"fcnet_hiddens": [8]}, "hiddens": [8]}
    )
    # A rollout worker tells its policies its index (0: the driver's worker).
    return DQNTorchPolicy(BOX, gym.spaces.Discrete(2), {**config, "worker_index": worker_index})


def sac_policy(**overrides) -> SACTorchPolicy:
    small = {"fcnet_hiddens": [8]}
    config = Trainer.merge_trainer_configs(
        SAC_CONFIG, {"policy_model": small, "Q_model": small, "tau": 0.1, **overrides}
    )
    return SACTorchPolicy(BOX, ACTION_BOX, config)


def td3_policy(**overrides) -> DDPGTorchPolicy:
    config = Trainer.merge_trainer_configs(
        TD3_DEFAULT_CONFIG,
        {"actor_hiddens": [8], "critic_hiddens": [8], "tau": 0.2, **overrides},
    )
    return DDPGTorchPolicy(BOX, ACTION_BOX, config)


def other_weights(policy) -> dict[str, np.ndarray]:
    """The policy's weights with every float array shifted."""
    rng = np.random.default_rng(0)
    return {
        k: v + rng.normal(size=v.shape).astype(v.dtype) if v.dtype.kind == "f" else v
        for k, v in policy.get_weights().items()
    }


def target_state(policy) -> dict[str, np.ndarray]:
    return {k: v.numpy().copy() for k, v in policy.target_network().state_dict().items()}


def test_dqn_set_weights_copies_them_into_the_target():
    policy = dqn_policy()
    weights = other_weights(policy)
    policy.set_weights(weights)
    target = target_state(policy)
    assert target.keys() == weights.keys()
    for k, v in target.items():
        np.testing.assert_array_equal(v, weights[k])


@pytest.mark.parametrize("make", [sac_policy, td3_policy], ids=["sac", "td3"])
def test_soft_target_policies_move_the_target_by_tau(make):
    policy = make()

    def parameters(module) -> dict[str, np.ndarray]:
        return {k: v.detach().numpy().copy() for k, v in module.named_parameters()}

    before = parameters(policy.target_network())
    policy.set_weights(other_weights(policy))
    source = parameters(policy.target_source())
    after = parameters(policy.target_network())
    tau = policy.config["tau"]
    assert before and after.keys() == before.keys()
    for k, old in before.items():
        np.testing.assert_allclose(after[k], tau * source[k] + (1 - tau) * old, rtol=1e-5)
        assert not np.allclose(after[k], old)  # the new weights differ: it moved


def test_a_remote_workers_policy_keeps_its_target():
    policy = dqn_policy(worker_index=2)
    before = target_state(policy)
    weights = other_weights(policy)
    policy.set_weights(weights)
    for k, v in target_state(policy).items():
        np.testing.assert_array_equal(v, before[k])
    # Its model did get the weights.
    np.testing.assert_array_equal(policy.get_weights()[k], weights[k])


def test_trainer_set_weights_syncs_the_learners_target_and_restore_keeps_the_saved_one():
    trainer = DQNTrainer(
        env="CartPole-v1",
        config={"num_workers": 0, "model": {"fcnet_hiddens": [8]}, "hiddens": [8]},
    )
    try:
        policy = trainer.get_policy()
        weights = other_weights(policy)
        trainer.set_weights({"default_policy": weights})
        for k, v in target_state(policy).items():
            np.testing.assert_array_equal(v, weights[k])
        # A policy state carries its own target network, which `set_state` restores.
        state = policy.get_state()
        policy.set_weights(other_weights(policy))
        policy.set_state(state)
        for k, v in target_state(policy).items():
            np.testing.assert_array_equal(v, weights[k])
    finally:
        trainer.stop()


def test_target_updates_still_follow_target_network_update_freq():
    """Training never loads the learner's weights through `set_weights`: its target stays
    where the last target update put it while the model trains."""
    trainer = DQNTrainer(
        env="CartPole-v1",
        config={
            "num_workers": 1,
            "model": {"fcnet_hiddens": [8]},
            "hiddens": [8],
            "learning_starts": 32,
            "rollout_fragment_length": 16,
            "train_batch_size": 16,
            "timesteps_per_iteration": 64,
            "target_network_update_freq": 10_000,
            "min_time_s_per_reporting": 0,
        },
    )
    try:
        policy = trainer.get_policy()
        torch.manual_seed(0)
        first_target = target_state(policy)
        for _ in range(2):
            trainer.train()
        online = policy.get_weights()
        target = target_state(policy)
        assert any(not np.array_equal(online[k], target[k]) for k in target)
        assert all(np.array_equal(first_target[k], target[k]) for k in target)
    finally:
        trainer.stop()
