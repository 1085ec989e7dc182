"""SAC's custom policy and Q models (`policy_model` / `Q_model` `custom_model`), built by
`ModelCatalog` as RLlib 1.13's SAC builds them."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from corral.agents.cql import CQL_DEFAULT_CONFIG
from corral.agents.cql.cql_torch_policy import CQLTorchPolicy
from corral.agents.sac import DEFAULT_CONFIG, SACTrainer
from corral.agents.sac.sac_torch_model import CatalogQEnsemble, EnsembleMLP, SACTorchModel
from corral.agents.sac.sac_torch_policy import SACTorchPolicy
from corral.models import ModelCatalog
from corral.models.torch.torch_modelv2 import TorchModelV2
from corral.policy.sample_batch import SampleBatch

BOX_OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
BOX_ACT = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)
CARTPOLE_OBS = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
DISCRETE_ACT = gym.spaces.Discrete(3)

FAST = {
    "learning_starts": 32,
    "rollout_fragment_length": 16,
    "train_batch_size": 32,
    "training_intensity": 64,
    "min_iter_time_s": 0,
    "timesteps_per_iteration": 64,
    "num_workers": 0,
}


class RecordingNet(TorchModelV2, nn.Module):
    """A small dense net that records how it was built and what it was called with."""

    def __init__(
        self,
        obs_space: gym.Space,
        action_space: gym.Space,
        num_outputs: int,
        model_config: dict,
        name: str,
        hidden: int = 4,
    ) -> None:
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        self.hidden = hidden
        self.body = nn.Sequential(
            nn.Linear(int(obs_space.shape[0]), hidden), nn.Tanh(), nn.Linear(hidden, num_outputs)
        )
        self.input_shapes: list[tuple[int, ...]] = []

    def forward(self, input_dict, state, seq_lens):
        obs = input_dict["obs"]
        self.input_shapes.append(tuple(obs.shape))
        return self.body(obs), state


ModelCatalog.register_custom_model("sac_test_recording_net", RecordingNet)

CUSTOM = {
    "policy_model": {
        "custom_model": "sac_test_recording_net",
        "custom_model_config": {"hidden": 8},
    },
    "Q_model": {"custom_model": RecordingNet, "custom_model_config": {"hidden": 6}},
}


def _policy(obs_space: gym.Space, action_space: gym.Space, **overrides) -> SACTorchPolicy:
    config = SACTrainer.merge_trainer_configs(DEFAULT_CONFIG, {**FAST, **CUSTOM, **overrides})
    return SACTorchPolicy(obs_space, action_space, config)


def _batch(obs_dim: int, actions: torch.Tensor) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    n = len(actions)
    return {
        "obs": torch.rand(n, obs_dim, generator=g) * 2 - 1,
        "new_obs": torch.rand(n, obs_dim, generator=g) * 2 - 1,
        "actions": actions,
        "rewards": torch.randn(n, generator=g),
        "terminateds": torch.zeros(n, dtype=torch.bool),
    }


def _box_batch(n: int = 16) -> dict[str, torch.Tensor]:
    return _batch(3, torch.rand(n, 2, generator=torch.Generator().manual_seed(1)) * 2 - 1)


def _discrete_batch(n: int = 16) -> dict[str, torch.Tensor]:
    return _batch(4, torch.randint(0, 3, (n,), generator=torch.Generator().manual_seed(1)))


def test_box_actions_build_catalog_nets_with_rllib_arguments():
    model = _policy(BOX_OBS, BOX_ACT).model
    assert isinstance(model.action_model, RecordingNet)
    assert model.action_model.num_outputs == 4  # mean and log_std of 2 actions
    assert model.action_model.obs_space.shape == (3,)
    assert model.action_model.name == "policy_model"
    assert model.action_model.hidden == 8  # custom_model_config as keyword arguments
    assert isinstance(model.q_net, CatalogQEnsemble)
    assert [net.name for net in model.q_net.nets] == ["q", "twin_q"]
    for net in model.q_net.nets:
        assert isinstance(net, RecordingNet) and net.hidden == 6
        assert net.obs_space.shape == (3 + 2,) and net.num_outputs == 1

    obs, actions = torch.zeros(5, 3), torch.zeros(5, 2)
    assert model.get_policy_output(obs).shape == (5, 4)
    assert model.action_model.input_shapes == [(5, 3)]
    q = model.q_ensemble(obs, actions)
    assert q.shape == (2, 5)
    assert all(net.input_shapes == [(5, 5)] for net in model.q_net.nets)
    expected = model.q_net.nets[1]({"obs": torch.cat([obs, actions], -1)})[0].squeeze(-1)
    torch.testing.assert_close(q[1], expected)
    assert model.get_q_values(obs, actions).shape == (5,)
    torch.testing.assert_close(model.get_twin_q_values(obs, actions), expected)
    assert model.q_ensemble(obs, actions, members=slice(0, 1)).shape == (1, 5)


def test_discrete_actions_build_catalog_nets_with_one_output_per_action():
    model = _policy(CARTPOLE_OBS, DISCRETE_ACT, twin_q=False).model
    assert model.action_model.num_outputs == 3
    assert len(model.q_net.nets) == 1
    (net,) = model.q_net.nets
    assert net.obs_space.shape == (4,) and net.num_outputs == 3
    assert model.q_ensemble(torch.zeros(7, 4)).shape == (1, 7, 3)


def test_default_nets_unchanged_without_custom_model():
    config = SACTrainer.merge_trainer_configs(DEFAULT_CONFIG, FAST)
    model = SACTorchPolicy(BOX_OBS, BOX_ACT, config).model
    assert isinstance(model.q_net, EnsembleMLP)
    assert not isinstance(model.action_model, TorchModelV2)


def test_custom_model_with_wrong_output_shape_is_refused():
    class WrongWidth(RecordingNet):
        def forward(self, input_dict, state, seq_lens):
            out, state = super().forward(input_dict, state, seq_lens)
            return torch.cat([out, out], -1), state

    model = _policy(BOX_OBS, BOX_ACT, Q_model={"custom_model": WrongWidth}).model
    with pytest.raises(ValueError, match=r"\[batch, num_outputs\] = \[5, 1\]"):
        model.q_ensemble(torch.zeros(5, 3), torch.zeros(5, 2))


@pytest.mark.parametrize(
    ("obs_space", "action_space", "batch"),
    [(BOX_OBS, BOX_ACT, _box_batch), (CARTPOLE_OBS, DISCRETE_ACT, _discrete_batch)],
)
def test_actor_loss_does_not_reach_the_q_nets(obs_space, action_space, batch):
    policy = _policy(obs_space, action_space)
    m = policy.model
    losses = policy._losses_discrete if policy.discrete else policy._losses_continuous
    stats = losses(batch())
    stats["actor_loss"].backward(retain_graph=True)
    assert all(p.grad is None or not p.grad.any() for p in m.q_variables())
    assert any(p.grad is not None and p.grad.any() for p in m.policy_variables())
    stats["critic_loss"].backward()
    assert all(p.grad is not None and p.grad.any() for p in m.q_variables())


def test_detached_q_keeps_the_gradient_to_the_actions():
    model = _policy(BOX_OBS, BOX_ACT).model
    actions = torch.zeros(5, 2, requires_grad=True)
    model.q_ensemble(torch.ones(5, 3), actions, detach_params=True).sum().backward()
    assert actions.grad is not None and actions.grad.any()
    assert all(p.grad is None for p in model.q_variables())


def test_optimizer_groups_hold_the_custom_nets():
    policy = _policy(BOX_OBS, BOX_ACT)
    m = policy.model
    groups = {g["name"]: {id(p) for p in g["params"]} for g in policy.make_optimizer().param_groups}
    assert groups["actor"] == {id(p) for p in m.action_model.parameters()}
    assert groups["critic"] == {id(p) for p in m.q_net.parameters()}
    assert groups["alpha"] == {id(m.log_alpha)}


def test_target_nets_are_separate_copies():
    policy = _policy(BOX_OBS, BOX_ACT)
    source, target = policy.model.q_net, policy.target_q
    assert isinstance(target, CatalogQEnsemble) and target is not source
    for p_src, p_tgt in zip(source.parameters(), target.parameters()):
        assert p_src is not p_tgt and p_src.data_ptr() != p_tgt.data_ptr()
        torch.testing.assert_close(p_src, p_tgt)
        assert not p_tgt.requires_grad


@pytest.mark.parametrize(
    ("env", "obs_dim", "action"),
    [("Pendulum-v1", 3, None), ("CartPole-v1", 4, 0)],
)
def test_trains_with_custom_models(env, obs_dim, action):
    trainer = SACTrainer(config={**FAST, **CUSTOM, "seed": 0}, env=env)
    try:
        policy = trainer.get_policy()
        m = policy.model
        before = {
            "actor": [p.detach().clone() for p in m.action_model.parameters()],
            "critic": [p.detach().clone() for p in m.q_net.parameters()],
            "target": [p.detach().clone() for p in policy.target_q.parameters()],
        }
        for _ in range(2):
            result = trainer.train()
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert np.isfinite(stats["critic_loss"]) and np.isfinite(stats["actor_loss"])
        after = {
            "actor": list(m.action_model.parameters()),
            "critic": list(m.q_net.parameters()),
            "target": list(policy.target_q.parameters()),
        }
        for part in before:
            assert all(not torch.equal(b, a) for b, a in zip(before[part], after[part])), part
        # The target critics trail the critics (polyak averaging), not equal to them.
        assert any(not torch.equal(t, c) for t, c in zip(after["target"], after["critic"]))
        act = trainer.compute_single_action(np.zeros(obs_dim, np.float32), explore=False)
        if action is None:
            assert np.shape(act) == (1,)
        else:
            assert act in (0, 1)
    finally:
        trainer.stop()


def test_checkpoint_round_trip_with_custom_models(tmp_path):
    trainer = SACTrainer(config={**FAST, **CUSTOM, "seed": 1}, env="Pendulum-v1")
    obs = np.random.default_rng(0).uniform(-1, 1, (6, 3)).astype(np.float32)
    try:
        trainer.train()
        path = trainer.save(str(tmp_path))
        expected = [trainer.compute_single_action(o, explore=False) for o in obs]
        weights = trainer.get_policy().get_weights()
        target = {k: v.clone() for k, v in trainer.get_policy().target_q.state_dict().items()}
    finally:
        trainer.stop()
    assert any(k.startswith("q_net.nets.1.") for k in weights)
    assert any(k.startswith("action_model.body.") for k in weights)
    restored = SACTrainer(config={**FAST, **CUSTOM, "seed": 2}, env="Pendulum-v1")
    try:
        restored.restore(path)
        actual = [restored.compute_single_action(o, explore=False) for o in obs]
        np.testing.assert_array_equal(np.array(actual), np.array(expected))
        for k, v in restored.get_policy().get_weights().items():
            np.testing.assert_array_equal(v, weights[k])
        for k, v in restored.get_policy().target_q.state_dict().items():
            torch.testing.assert_close(v, target[k])
        restored.train()
    finally:
        restored.stop()


def test_cql_on_sac_uses_the_custom_models():
    config = SACTrainer.merge_trainer_configs(
        CQL_DEFAULT_CONFIG, {**CUSTOM, "num_actions": 2, "train_batch_size": 16}
    )
    policy = CQLTorchPolicy(BOX_OBS, BOX_ACT, config)
    assert isinstance(policy.model.q_net, CatalogQEnsemble)
    before = [p.detach().clone() for p in policy.model.q_variables()]
    rng = np.random.default_rng(0)
    batch = SampleBatch(
        {
            SampleBatch.OBS: rng.uniform(-1, 1, (16, 3)).astype(np.float32),
            SampleBatch.NEXT_OBS: rng.uniform(-1, 1, (16, 3)).astype(np.float32),
            SampleBatch.ACTIONS: rng.uniform(-1, 1, (16, 2)).astype(np.float32),
            SampleBatch.REWARDS: np.ones(16, np.float32),
            SampleBatch.TERMINATEDS: np.zeros(16, bool),
        }
    )
    stats = policy.learn_on_batch(batch)["learner_stats"]
    assert np.isfinite(stats["critic_loss"])
    assert all(not torch.equal(b, a) for b, a in zip(before, policy.model.q_variables()))


def test_net_keys_free_for_custom_models_checked_for_dense_nets():
    # A custom model may read keys of its own (RLlib merges Q_model/policy_model freely).
    config = {**FAST, "Q_model": {**CUSTOM["Q_model"], "fcnet_hiddens": [5], "extra": 1}}
    trainer = SACTrainer(config=config, env="Pendulum-v1")
    try:
        net = trainer.get_policy().model.q_net.nets[0]
        assert net.model_config["extra"] == 1 and net.model_config["fcnet_hiddens"] == [5]
    finally:
        trainer.stop()
    # Without one, a key the dense networks do not read is a typo.
    with pytest.raises(ValueError, match="`Q_model` .* sets keys its dense networks do not read"):
        SACTrainer(config={**FAST, "Q_model": {"fcnet_hidden": [8]}}, env="Pendulum-v1")


# -- a SACTorchModel subclass as `model.custom_model` (RLlib 1.13's) ----------------

BUILT: list[str] = []


class TinyNet(TorchModelV2, nn.Module):
    """One linear layer from the flat input to `num_outputs`."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        self.layer = nn.Linear(int(obs_space.shape[0]), num_outputs)

    def forward(self, input_dict, state, seq_lens):
        return self.layer(input_dict["obs"].float()), state


class MySACModel(SACTorchModel):
    def __init__(self, *args, tag="none", **kwargs):
        self.tag = tag
        super().__init__(*args, **kwargs)

    def build_policy_model(self, obs_space, num_outputs, policy_model_config, name):
        BUILT.append(name)
        return TinyNet(obs_space, self.action_space, num_outputs, policy_model_config, name)

    def build_q_model(self, obs_space, action_space, num_outputs, q_model_config, name):
        BUILT.append(name)
        width = obs_space.shape[0] + action_space.shape[0]
        space = type(obs_space)(-1.0, 1.0, (width,))
        return TinyNet(space, action_space, num_outputs, q_model_config, name)


SMALL_SAC = {
    "num_workers": 0,
    "seed": 0,
    "learning_starts": 32,
    "train_batch_size": 32,
    "min_sample_timesteps_per_reporting": 64,
    "min_time_s_per_reporting": 0,
}


def test_a_sac_torch_model_subclass_builds_the_nets():
    BUILT.clear()
    ModelCatalog.register_custom_model("my_sac_model", MySACModel)
    trainer = SACTrainer(
        env="Pendulum-v1",
        config={
            **SMALL_SAC,
            "model": {"custom_model": "my_sac_model", "custom_model_config": {"tag": "x"}},
        },
    )
    try:
        model = trainer.get_policy().model
        assert isinstance(model, MySACModel) and model.tag == "x"
        assert isinstance(model.action_model, TinyNet)
        # The policy's model and its target copy, each with a policy net and two Q-nets.
        assert BUILT.count("policy_model") >= 1 and BUILT.count("twin_q") >= 1
        before = model.action_model.layer.weight.detach().clone()
        assert trainer.train()["info"]["learner"]["default_policy"]["learner_stats"]
        assert not torch.equal(before, model.action_model.layer.weight)
        obs = torch.zeros(3, 3)
        outputs, state = model.get_action_model_outputs(obs)
        assert outputs.shape == (3, 2) and state == []
    finally:
        trainer.stop()


def test_a_model_custom_model_sac_cannot_use_is_refused():
    with pytest.raises(ValueError, match="no subclass of SACTorchModel"):
        SACTrainer(env="Pendulum-v1", config={**SMALL_SAC, "model": {"custom_model": TinyNet}})
