"""DDPG/TD3: defaults, target policy smoothing, delayed actor updates, training."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.config import merge_trainer_configs
from corral.agents.ddpg import DEFAULT_CONFIG, TD3_DEFAULT_CONFIG, DDPGTrainer, TD3Trainer
from corral.agents.ddpg.ddpg_torch_policy import DDPGTorchPolicy
from corral.agents.registry import get_trainer_class

SPACE_OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
SPACE_ACT = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)

FAST = {
    "learning_starts": 32,
    "rollout_fragment_length": 16,
    "train_batch_size": 32,
    "training_intensity": 64,
    "min_iter_time_s": 0,
    "timesteps_per_iteration": 64,
    "actor_hiddens": [16, 16],
    "critic_hiddens": [16, 16],
}


def _policy(**overrides) -> DDPGTorchPolicy:
    config = merge_trainer_configs(TD3_DEFAULT_CONFIG, {**FAST, **overrides})
    return DDPGTorchPolicy(SPACE_OBS, SPACE_ACT, config)


def _batch(n: int = 32) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "obs": torch.rand(n, 3, generator=g) * 2 - 1,
        "new_obs": torch.rand(n, 3, generator=g) * 2 - 1,
        "actions": torch.rand(n, 1, generator=g) * 2 - 1,
        "rewards": torch.randn(n, generator=g),
        "terminateds": torch.zeros(n, dtype=torch.bool),
    }


def test_registry_and_rllib_defaults():
    assert get_trainer_class("DDPG") is DDPGTrainer
    assert get_trainer_class("TD3") is TD3Trainer
    assert DEFAULT_CONFIG["exploration_config"]["type"] == "OrnsteinUhlenbeckNoise"
    assert DEFAULT_CONFIG["actor_hiddens"] == [400, 300] and DEFAULT_CONFIG["tau"] == 0.002
    assert DEFAULT_CONFIG["twin_q"] is False and DEFAULT_CONFIG["policy_delay"] == 1
    assert TD3_DEFAULT_CONFIG["exploration_config"]["type"] == "GaussianNoise"
    assert "ou_theta" not in TD3_DEFAULT_CONFIG["exploration_config"]
    assert TD3_DEFAULT_CONFIG["twin_q"] and TD3_DEFAULT_CONFIG["smooth_target_policy"]
    assert TD3_DEFAULT_CONFIG["policy_delay"] == 2 and TD3_DEFAULT_CONFIG["tau"] == 5e-3


def test_actor_updated_every_policy_delay_critic_steps():
    policy = _policy(policy_delay=3)
    optimizer = policy.make_optimizer()
    batch = _batch()
    actor_changes, critic_changes = [], []
    for _ in range(6):
        actor = [p.detach().clone() for p in policy.model.policy_variables()]
        critic = [p.detach().clone() for p in policy.model.q_variables()]
        target = [p.detach().clone() for p in policy.target_model.parameters()]
        policy.learn_step(batch, optimizer)
        actor_changes.append(
            any(not torch.equal(a, p) for a, p in zip(actor, policy.model.policy_variables()))
        )
        critic_changes.append(
            all(not torch.equal(c, p) for c, p in zip(critic, policy.model.q_variables()))
        )
        target_moved = any(
            not torch.equal(t, p) for t, p in zip(target, policy.target_model.parameters())
        )
        # Targets move with the actor (Fujimoto et al. 2018, Algorithm 1).
        assert target_moved == actor_changes[-1]
    assert actor_changes == [False, False, True, False, False, True]
    assert all(critic_changes)


def test_actor_loss_evaluates_the_first_critic_alone(monkeypatch):
    from corral.models.torch.mlp import EnsembleMLP

    policy = _policy(policy_delay=1)
    optimizer = policy.make_optimizer()
    batch = _batch()
    calls = []
    forward = EnsembleMLP.forward

    def spy(self, x, detach_params=False, members=None):
        out = forward(self, x, detach_params, members)
        calls.append((detach_params, out.shape[0]))
        return out

    monkeypatch.setattr(EnsembleMLP, "forward", spy)
    before = {k: v.clone() for k, v in policy.model.state_dict().items()}
    stats = policy.learn_step(batch, optimizer)
    # Target critics, critics (both members), then the actor's loss through the first
    # critic only, with the critics' weights detached (as RLlib, SB3 and TD3's paper).
    assert calls == [(False, 2), (False, 2), (True, 1)]
    policy.model.load_state_dict(before)
    with torch.no_grad():  # the reported actor loss is -Q_1(s, mu(s)) before the step
        m = policy.model
        x = torch.cat([batch["obs"], m.get_policy_output(batch["obs"])], -1)
        expected = -forward(m.q_net, x)[0].mean()
    assert float(stats["actor_loss"]) == pytest.approx(float(expected), rel=1e-5)


def test_q_value_accessors_read_each_critic():
    policy = _policy()
    obs, actions = _batch()["obs"], _batch()["actions"]
    both = policy.model.q_ensemble(obs, actions)
    torch.testing.assert_close(policy.model.get_q_values(obs, actions), both[0])
    torch.testing.assert_close(policy.model.get_twin_q_values(obs, actions), both[1])


def test_target_policy_smoothing_noise_is_clipped(monkeypatch):
    policy = _policy(target_noise=10.0, target_noise_clip=0.25)
    batch = _batch(256)
    seen = {}
    original = policy.target_model.q_ensemble

    def spy(obs, actions, detach_params=False):
        seen["actions"] = actions.clone()
        return original(obs, actions, detach_params)

    monkeypatch.setattr(policy.target_model, "q_ensemble", spy)
    policy.learn_step(batch, policy.make_optimizer())
    with torch.no_grad():
        mu = policy.target_model.get_policy_output(batch["new_obs"])
    noise = seen["actions"] - mu
    in_bounds = (seen["actions"].abs() < 1.0).squeeze(-1)
    assert noise.abs().max() <= 0.25 + 1e-6
    # Noise of std 10 clipped at 0.25 is almost always at the clip value.
    assert torch.isclose(noise[in_bounds].abs(), torch.tensor(0.25)).float().mean() > 0.9


def test_no_smoothing_uses_target_actor_exactly(monkeypatch):
    policy = _policy(smooth_target_policy=False)
    batch = _batch()
    seen = {}
    original = policy.target_model.q_ensemble

    def spy(obs, actions, detach_params=False):
        seen["actions"] = actions.clone()
        return original(obs, actions, detach_params)

    monkeypatch.setattr(policy.target_model, "q_ensemble", spy)
    policy.learn_step(batch, policy.make_optimizer())
    with torch.no_grad():
        mu = policy.target_model.get_policy_output(batch["new_obs"])
    torch.testing.assert_close(seen["actions"], mu)


@pytest.mark.parametrize("trainer_cls", [DDPGTrainer, TD3Trainer])
def test_trains_one_iteration_on_pendulum(trainer_cls, tmp_path):
    config = {**FAST, "seed": 0, "exploration_config": {"random_timesteps": 16}}
    if trainer_cls is TD3Trainer:
        config["exploration_config"]["type"] = "GaussianNoise"
    trainer = trainer_cls(config=config, env="Pendulum-v1")
    obs = np.zeros(3, np.float32)
    try:
        result = trainer.train()
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert np.isfinite(stats["critic_loss"]) and np.isfinite(stats["actor_loss"])
        action = trainer.compute_single_action(obs, explore=False)
        assert SPACE_ACT.contains(np.asarray(action, np.float32))
        path = trainer.save(str(tmp_path))
    finally:
        trainer.stop()
    restored = trainer_cls(config=config, env="Pendulum-v1")
    try:
        restored.restore(path)
        np.testing.assert_array_equal(restored.compute_single_action(obs, explore=False), action)
    finally:
        restored.stop()


def test_model_variables_as_dicts_as_rllib_1_13():
    model = _policy().model
    actor = model.policy_variables(as_dict=True)
    critics = model.q_variables(as_dict=True)
    assert sum(v.numel() for v in actor.values()) == sum(
        p.numel() for p in model.policy_variables()
    )
    assert sum(v.numel() for v in critics.values()) == sum(p.numel() for p in model.q_variables())
    first = next(iter(actor))
    assert torch.equal(actor[first], model.actor.state_dict()[first])
