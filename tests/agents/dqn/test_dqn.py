"""DQN: targets and losses against hand computations; trainers run; buffers checkpoint."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.dqn import (
    APEX_DEFAULT_CONFIG,
    DEFAULT_CONFIG,
    ApexTrainer,
    DQNTorchPolicy,
    DQNTrainer,
    SimpleQTrainer,
)
from corral.agents.dqn.dqn_torch_model import DQNTorchModel
from corral.agents.dqn.dqn_torch_policy import project_distribution
from corral.agents.registry import get_trainer_class
from corral.agents.trainer import Trainer
from corral.policy.sample_batch import SampleBatch
from corral.utils.replay_buffers import N_STEP
from tests.fixtures.configs import SMALL_DQN


def linear_policy(**overrides):
    """A DQN policy whose Q-network is one linear layer: Q(s) = W s + b."""
    config = Trainer.merge_trainer_configs(
        DEFAULT_CONFIG,
        {
            "hiddens": [],
            "dueling": False,
            "model": {"fcnet_hiddens": []},
            "gamma": 0.9,
            **overrides,
        },
    )
    return DQNTorchPolicy(gym.spaces.Box(-10, 10, (2,)), gym.spaces.Discrete(3), config)


def set_linear(model, weight, bias):
    layer = model.advantage_out
    with torch.no_grad():
        layer.weight.copy_(torch.as_tensor(weight, dtype=torch.float32))
        layer.bias.copy_(torch.as_tensor(bias, dtype=torch.float32))


def transitions():
    return {
        SampleBatch.OBS: torch.tensor([[1.0, 0.0], [0.0, 1.0]]),
        SampleBatch.ACTIONS: torch.tensor([0, 2]),
        SampleBatch.REWARDS: torch.tensor([1.0, -1.0]),
        SampleBatch.NEXT_OBS: torch.tensor([[0.0, 2.0], [1.0, 1.0]]),
        SampleBatch.TERMINATEDS: torch.tensor([False, True]),
        N_STEP: torch.tensor([1, 2]),
    }


ONLINE_W = [[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]
TARGET_W = [[2.0, 0.0], [0.0, 3.0], [1.0, -1.0]]


@pytest.mark.parametrize("double_q", [True, False])
def test_td_target_matches_hand_computation(double_q):
    policy = linear_policy(double_q=double_q)
    set_linear(policy.model, ONLINE_W, [0.0, 0.0, 0.0])
    set_linear(policy.target_model, TARGET_W, [0.0, 0.0, 0.0])
    _, td_error, q_selected = policy._td_loss(policy.model, transitions())
    # Row 0: Q(s, a=0) = 1. s' = (0, 2): online Q = (0, 2, 1) -> a* = 1 (double Q);
    # target Q = (0, 6, -2) -> a* = 1 as well, Q_target(s', 1) = 6. Target 1 + 0.9 * 6.
    # Row 1: Q(s, a=2) = 0.5, terminated: target = -1.
    np.testing.assert_allclose(q_selected, [1.0, 0.5])
    np.testing.assert_allclose(td_error, [1.0 - (1.0 + 0.9 * 6.0), 0.5 - (-1.0)], rtol=1e-6)


def test_double_q_picks_the_online_argmax():
    # s' = (1, 1) (not terminated, 2-step return): online Q = (1, 1.5, 3) -> a* = 2,
    # target Q = (2, 1.5, -0.5); double Q bootstraps with -0.5, plain DQN with 2.
    batch = transitions()
    batch[SampleBatch.TERMINATEDS] = torch.tensor([False, False])
    results = {}
    for double_q in (True, False):
        policy = linear_policy(double_q=double_q)
        set_linear(policy.model, [[1.0, 0.0], [0.0, 1.5], [1.5, 1.5]], [0.0, 0.0, 0.0])
        set_linear(policy.target_model, [[1.0, 1.0], [0.0, 1.5], [0.5, -1.0]], [0.0, 0.0, 0.0])
        _, td_error, q_selected = policy._td_loss(policy.model, batch)
        results[double_q] = float(q_selected[1] - td_error[1])  # the target of row 1
    assert results[True] == pytest.approx(-1.0 + 0.81 * -0.5)
    assert results[False] == pytest.approx(-1.0 + 0.81 * 2.0)


def test_c51_projection_matches_hand_computation():
    support = torch.tensor([-1.0, 0.0, 1.0])
    probs = torch.tensor([[0.2, 0.3, 0.5]] * 3)
    rewards = torch.tensor([0.5, 0.5, 3.0])
    discount = torch.tensor([0.5, 0.0, 0.5])
    projected = project_distribution(probs, rewards, discount, support)
    # Row 0: Tz = (0, 0.5, 1): 0.2 -> atom 1; 0.3 split 0.15 / 0.15; 0.5 -> atom 2.
    # Row 1 (terminated): every atom moves to 0.5, halfway between atoms 1 and 2.
    # Row 2: everything is clipped to v_max.
    expected = [[0.0, 0.35, 0.65], [0.0, 0.5, 0.5], [0.0, 0.0, 1.0]]
    np.testing.assert_allclose(projected, expected, atol=1e-6)


def test_c51_noisy_dueling_loss_runs_and_learns():
    torch.manual_seed(0)
    policy = linear_policy(
        num_atoms=11, v_min=-5.0, v_max=5.0, noisy=True, dueling=True, hiddens=[8], lr=1e-2
    )
    batch = transitions()
    optimizer = policy.make_optimizer()
    losses = []
    for _ in range(100):
        loss, stats = policy.loss(policy.model, policy.dist_class, batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    assert np.mean(losses[-10:]) < np.mean(losses[:10])
    assert set(stats) >= {"loss", "mean_q", "mean_td_error"}


def test_target_update_copies_weights_and_is_checkpointed():
    policy = linear_policy()
    policy.update_target()
    for a, b in zip(policy.model.parameters(), policy.target_model.parameters()):
        assert torch.equal(a, b)
    state = policy.get_state()
    assert any(k.startswith("_target.") for k in state["weights"])
    other = linear_policy()
    other.set_state(state)
    for a, b in zip(policy.target_model.parameters(), other.target_model.parameters()):
        assert torch.equal(a, b)


@pytest.mark.parametrize(
    "cls, extra",
    [
        (DQNTrainer, {}),
        (DQNTrainer, {"n_step": 3, "num_atoms": 5, "noisy": True}),
        (SimpleQTrainer, {"model": {"fcnet_hiddens": [16]}}),
    ],
)
def test_trainers_run_one_iteration(cls, extra):
    config = {**SMALL_DQN, **extra}
    if cls is SimpleQTrainer:
        config.pop("hiddens")
    trainer = cls(config=config, env="CartPole-v1")
    try:
        result = trainer.train()
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert result["timesteps_total"] >= 64
        assert np.isfinite(stats["loss"]) and "mean_q" in stats
        assert result["info"]["num_target_updates"] >= 0
    finally:
        trainer.stop()


def test_apex_runs_with_per_worker_epsilons():
    config = {
        **SMALL_DQN,
        "num_workers": 2,
        "replay_buffer_config": {"capacity": 1000},
        "target_network_update_freq": 100,
    }
    trainer = ApexTrainer(config=config, env="CartPole-v1")
    try:
        result = trainer.train()
        assert result["timesteps_total"] >= 64 and result["num_healthy_workers"] == 2
        epsilons = trainer.workers.foreach_worker(lambda w: w.get_policy().exploration.epsilon())
        # The driver's worker (greedy), then workers 1 and 2 of 2: 0.4 and 0.4 ** 8.
        assert epsilons == pytest.approx([0.0, 0.4, 0.4**8])
        assert APEX_DEFAULT_CONFIG["exploration_config"]["type"] == "PerWorkerEpsilonGreedy"
    finally:
        trainer.stop()


def test_registry_names():
    assert get_trainer_class("DQN") is DQNTrainer
    assert get_trainer_class("SimpleQ") is SimpleQTrainer
    assert get_trainer_class("APEX") is ApexTrainer


def test_default_config_keeps_rllib_defaults():
    c = DEFAULT_CONFIG
    assert (c["num_atoms"], c["v_min"], c["v_max"], c["noisy"], c["sigma0"]) == (
        1,
        -10,
        10,
        False,
        0.5,
    )
    assert (c["dueling"], c["hiddens"], c["double_q"], c["n_step"]) == (True, [256], True, 1)
    assert c["exploration_config"]["final_epsilon"] == 0.02
    assert c["replay_buffer_config"]["capacity"] == 50000 and c["prioritized_replay"]
    assert (c["lr"], c["grad_clip"], c["learning_starts"], c["train_batch_size"]) == (
        5e-4,
        40,
        1000,
        32,
    )


@pytest.mark.parametrize("store", [True, False])
def test_replay_buffer_restored_from_checkpoint(store, tmp_path):
    config = {**SMALL_DQN, "store_buffer_in_checkpoints": store}
    trainer = DQNTrainer(config=config, env="CartPole-v1")
    try:
        trainer.train()
        path = trainer.save(str(tmp_path))
        saved = trainer.local_replay_buffer.get_state()["buffers"]["default_policy"]
    finally:
        trainer.stop()
    restored = DQNTrainer(config=config, env="CartPole-v1")
    try:
        restored.restore(path)
        buffer = restored.local_replay_buffer
        if not store:
            assert len(buffer) == 0
            return
        state = buffer.get_state()["buffers"]["default_policy"]
        assert len(buffer) == len(saved["columns"]["obs"]) > 0
        for k, v in saved["columns"].items():
            np.testing.assert_array_equal(state["columns"][k], v)
        np.testing.assert_allclose(state["priorities"], saved["priorities"])
        restored.train()  # training continues from the restored buffer
    finally:
        restored.stop()


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"dueling": True},
        {"dueling": True, "num_atoms": 5},
        {"use_noisy": True, "q_hiddens": [8]},
    ],
    ids=["plain", "dueling", "dueling_c51", "noisy"],
)
def test_acting_fast_path_matches_the_module_calls(options):
    """`forward_inference` (the layers' own `forward`s or numpy, no hook dispatch) computes
    the Q-values `forward` does; only `forward`, which training uses, runs forward hooks."""
    from corral.agents.dqn.dqn_torch_model import DQNTorchModel

    obs_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    model = DQNTorchModel(
        obs_space,
        gym.spaces.Discrete(4),
        4,
        {"fcnet_hiddens": [16, 16], "fcnet_activation": "relu"},
        "q",
        **{"q_hiddens": [8], **options},
    )
    calls = []
    model.trunk.register_forward_hook(lambda *args: calls.append("trunk"))
    obs = torch.randn(5, 3)
    torch.manual_seed(0)  # the same noise draws for the noisy layers on both paths
    expected, _ = model({"obs": obs}, [], None)
    assert calls == ["trunk"]
    torch.manual_seed(0)
    with torch.inference_mode():
        q_values, values = model.forward_inference(obs)
    assert calls == ["trunk"]  # the fast path skips the hooks
    # Plain Q-values on a few rows run in numpy (`NumpyLayers`): equal to float32 rounding.
    torch.testing.assert_close(q_values, expected.detach(), rtol=1e-5, atol=1e-6)
    assert q_values.shape == (5, 4) and values.shape == (5,)


@pytest.mark.parametrize(
    ("buffer_type", "prioritized_replay", "prioritized"),
    [
        ("MultiAgentReplayBuffer", False, False),
        ("MultiAgentReplayBuffer", True, True),  # RLlib 1.13's switch
        ("MultiAgentPrioritizedReplayBuffer", False, True),  # its successors' switch
    ],
)
def test_replay_buffer_type_or_prioritized_replay_turns_prioritization_on(
    buffer_type, prioritized_replay, prioritized
):
    trainer = DQNTrainer(
        env="CartPole-v1",
        config={
            "num_workers": 0,
            "prioritized_replay": prioritized_replay,
            "replay_buffer_config": {"type": buffer_type, "capacity": 1000},
        },
    )
    try:
        assert trainer.local_replay_buffer.prioritized is prioritized
    finally:
        trainer.stop()


class Rllib113QModel(DQNTorchModel):
    """A custom Q-model written for RLlib 1.13: its constructor names DQN's model
    arguments as RLlib 1.13's `build_q_model` passed them."""

    def __init__(
        self,
        obs_space,
        action_space,
        num_outputs,
        model_config,
        name,
        q_hiddens=(256,),
        dueling=False,
        num_atoms=1,
        use_noisy=False,
        v_min=-10.0,
        v_max=10.0,
        sigma0=0.5,
        add_layer_norm=False,
    ):
        self.seen = {"use_noisy": use_noisy, "add_layer_norm": add_layer_norm}
        super().__init__(
            obs_space,
            action_space,
            num_outputs,
            model_config,
            name,
            q_hiddens=q_hiddens,
            dueling=dueling,
            num_atoms=num_atoms,
            use_noisy=use_noisy,
            v_min=v_min,
            v_max=v_max,
            sigma0=sigma0,
            add_layer_norm=add_layer_norm,
        )


def test_dqn_builds_q_models_with_rllib_1_13_arguments_and_layer_norm_for_parameter_noise():
    def layer_norms(policy):
        return [m for m in policy.model.modules() if isinstance(m, torch.nn.LayerNorm)]

    plain = DQNTrainer(
        env="CartPole-v1", config={**SMALL_DQN, "model": {"custom_model": Rllib113QModel}}
    )
    try:
        assert plain.get_policy().model.seen == {"use_noisy": False, "add_layer_norm": False}
        assert not layer_norms(plain.get_policy())
        plain.train()
    finally:
        plain.stop()
    config = {
        **SMALL_DQN,
        "hiddens": [16],
        "dueling": True,
        "exploration_config": {"type": "ParameterNoise"},
        "model": {"custom_model": Rllib113QModel},
    }
    noisy = DQNTrainer(env="CartPole-v1", config=config)
    try:
        policy = noisy.get_policy()
        assert policy.model.seen["add_layer_norm"] is True
        # One after the hidden layer of each of the advantage and value streams.
        assert [m.normalized_shape for m in layer_norms(policy)] == [(16,), (16,)]
        noisy.train()
    finally:
        noisy.stop()
