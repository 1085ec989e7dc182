"""ParameterNoise (RLlib 1.13's parameter-space noise): weights perturbed only while
exploring, the noise re-drawn per episode, the adaptive scale, state, and DQN training."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.dqn import DEFAULT_CONFIG, DQNTorchPolicy, DQNTrainer
from corral.policy.sample_batch import SampleBatch
from corral.utils.exploration import ParameterNoise, make_exploration

OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
DISCRETE = gym.spaces.Discrete(2)


def _policy(**exploration):
    config = {
        **DEFAULT_CONFIG,
        "exploration_config": {"type": "ParameterNoise", **exploration},
    }
    return DQNTorchPolicy(OBS_SPACE, DISCRETE, config)


def _weights(policy):
    return {k: v.clone() for k, v in policy.model.state_dict().items()}


def _same(a, b):
    return all(torch.equal(a[k], b[k]) for k in a)


def test_built_from_the_config_with_rllib_defaults():
    policy = _policy()
    exploration = policy.exploration
    assert isinstance(exploration, ParameterNoise)
    assert exploration.stddev == 1.0
    assert exploration.random_timesteps == 10000
    # The default sub-exploration: random actions for random_timesteps, then 0.01.
    sub = exploration.sub_exploration
    assert sub.epsilon(0) == 1.0 and sub.epsilon(10001) == 1.0
    assert sub.epsilon(10002) == pytest.approx(0.01)
    with pytest.raises(ValueError, match="noisy layers"):
        DQNTorchPolicy(
            OBS_SPACE,
            DISCRETE,
            {**DEFAULT_CONFIG, "noisy": True, "exploration_config": {"type": "ParameterNoise"}},
        )
    with pytest.raises(ValueError, match="no model"):
        make_exploration({"type": "ParameterNoise"}, DISCRETE, DEFAULT_CONFIG, None, num_workers=0)


def test_weights_perturbed_only_inside_an_exploring_forward_pass():
    torch.manual_seed(0)
    policy = _policy(random_timesteps=0)
    clean = _weights(policy)
    obs = np.random.default_rng(0).uniform(-1, 1, (64, 4)).astype(np.float32)
    policy.exploration.on_episode_start(policy=policy)
    assert any(n.abs().sum() > 0 for n in policy.exploration.noise)

    seen = []
    hook = policy.model.register_forward_hook(lambda m, i, o: seen.append(_weights(policy)))
    try:
        # The built-in DQN model's fast path does not run the module call: record
        # the weights in the exploration's hook instead.
        original = policy.exploration.get_exploration_action

        def spy(dist, timestep=None, explore=True):
            seen.append(_weights(policy))
            return original(dist, timestep, explore)

        policy.exploration.get_exploration_action = spy
        _, noisy_fetch = policy.compute_actions_from_obs(obs, explore=True)
        _, clean_fetch = policy.compute_actions_from_obs(obs, explore=False)
    finally:
        hook.remove()
    # Exploring: the forward pass saw perturbed weights, by exactly the stored noise.
    during_explore, during_exploit = seen
    assert not _same(during_explore, clean)
    # (The perturbed ones: not the LayerNorms that DQN's heads get with ParameterNoise.)
    perturbed = {id(p) for p in policy.exploration.model_variables}
    names = [k for k, p in policy.model.named_parameters() if id(p) in perturbed]
    assert any("LayerNorm" in type(m).__name__ for m in policy.model.modules())
    noise = dict(zip(names, policy.exploration.noise, strict=True))
    for k, n in noise.items():
        assert torch.allclose(during_explore[k], clean[k] + n)
    layer_norms = [k for k in clean if k not in noise and k.endswith(".weight")]
    assert layer_norms and all(torch.equal(during_explore[k], clean[k]) for k in layer_norms)
    # explore=False: the unperturbed weights.
    assert _same(during_exploit, clean)
    # And afterwards (learning, get_weights, syncs) the weights are the clean ones.
    assert _same(_weights(policy), clean)
    assert not policy.exploration.weights_are_currently_noisy
    q_noisy = noisy_fetch[SampleBatch.ACTION_DIST_INPUTS]
    q_clean = clean_fetch[SampleBatch.ACTION_DIST_INPUTS]
    assert not np.allclose(q_noisy, q_clean)
    # Learning sees the clean weights: the clean Q-values come out of the loss's model.
    with torch.no_grad():
        q_train, _ = policy.model({SampleBatch.OBS: torch.from_numpy(obs)}, [], None)
    np.testing.assert_allclose(q_train.numpy(), q_clean, rtol=1e-5, atol=1e-6)


def test_noise_redrawn_at_each_episode_start_scaled_by_stddev():
    torch.manual_seed(1)
    exploration = _policy().exploration
    exploration.on_episode_start()
    first = [n.clone() for n in exploration.noise]
    exploration.on_episode_start()
    assert not all(torch.equal(a, b) for a, b in zip(first, exploration.noise))
    exploration.stddev = 0.01
    exploration.on_episode_start()
    flat = torch.cat([n.reshape(-1) for n in exploration.noise])
    assert float(flat.std()) == pytest.approx(0.01, rel=0.1)


def test_adaptive_stddev_moves_towards_the_target_distance():
    policy = _policy(random_timesteps=0)
    exploration = policy.exploration
    obs = np.random.default_rng(2).uniform(-1, 1, (128, 4)).astype(np.float32)
    batch = SampleBatch({SampleBatch.OBS: obs})

    # Almost no noise: the perturbed policy is too close to the clean one -> grow.
    exploration.stddev = 1e-6
    exploration.on_episode_start()
    before = exploration.stddev
    exploration.postprocess_trajectory(policy, batch)
    assert exploration.stddev == pytest.approx(before * 1.01)

    # Huge noise: far from the clean policy -> shrink.
    exploration.stddev = 50.0
    exploration.on_episode_start()
    before = exploration.stddev
    exploration.postprocess_trajectory(policy, batch)
    assert exploration.stddev == pytest.approx(before / 1.01)
    # The measurement left the weights clean.
    assert not exploration.weights_are_currently_noisy


def test_a_policy_without_action_dist_inputs_gets_a_clear_error():
    policy = _policy()

    class NoDistInputs:
        def compute_actions_from_input_dict(self, input_dict, explore=None):
            return np.zeros(2), [], {SampleBatch.ACTION_LOGP: np.zeros(2)}

    batch = SampleBatch({SampleBatch.OBS: np.zeros((2, 4), np.float32)})
    with pytest.raises(ValueError, match="returns no 'action_dist_inputs'"):
        policy.exploration.postprocess_trajectory(NoDistInputs(), batch)


def test_action_distance_matches_hand_computed_kl():
    exploration = _policy(random_timesteps=0).exploration
    exploration.sub_exploration.last_timestep = 10**6  # epsilon 0.01
    clean = np.array([[1.0, 0.0], [0.0, 2.0]])
    noisy = np.array([[0.0, 1.0], [0.0, 2.0]])
    distance, delta = exploration.action_distance(noisy, clean)
    p = np.exp(clean) / np.exp(clean).sum(1, keepdims=True)
    q = np.exp(noisy) / np.exp(noisy).sum(1, keepdims=True)
    kl = np.mean(np.sum(p * np.log(p / (q + 1e-6)), axis=1))
    assert distance == pytest.approx(kl)
    assert delta == pytest.approx(-np.log(1 - 0.01 + 0.01 / 2))


def test_state_checkpointed_with_the_policy():
    policy = _policy()
    policy.exploration.stddev = 0.37
    policy.global_timestep = 123
    policy.compute_actions_from_obs(np.zeros((2, 4), np.float32), explore=True)
    state = policy.get_state()
    assert state["exploration"]["cur_stddev"] == 0.37
    fresh = _policy()
    fresh.set_state(state)
    assert fresh.exploration.stddev == 0.37
    assert fresh.exploration.last_timestep == 123
    assert fresh.exploration.sub_exploration.last_timestep == 123
    flat = torch.cat([n.reshape(-1) for n in fresh.exploration.noise])
    assert float(flat.std()) == pytest.approx(0.37, rel=0.1)


def test_dqn_cartpole_trains_with_parameter_noise():
    trainer = DQNTrainer(
        config={
            "num_workers": 0,
            "seed": 0,
            "exploration_config": {"type": "ParameterNoise", "random_timesteps": 200},
            "learning_starts": 200,
            "rollout_fragment_length": 50,
            "train_batch_size": 32,
            "timesteps_per_iteration": 400,
            "model": {"fcnet_hiddens": [32]},
        },
        env="CartPole-v1",
    )
    try:
        policy = trainer.get_policy()
        exploration = policy.exploration
        assert isinstance(exploration, ParameterNoise)
        stddevs = []
        for _ in range(3):
            result = trainer.train()
            stddevs.append(exploration.stddev)
            assert not exploration.weights_are_currently_noisy
        assert result["timesteps_total"] >= 1200
        assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["loss"])
        # The scale adapted (1.01 steps, one per sampled trajectory).
        assert stddevs[-1] != 1.0
        # Checkpoints carry it.
        assert policy.get_state()["exploration"]["cur_stddev"] == exploration.stddev
    finally:
        trainer.stop()
