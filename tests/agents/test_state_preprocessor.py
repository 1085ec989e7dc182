"""`use_state_preprocessor` for SAC, DDPG/TD3 (and CQL on SAC): a catalog model from the
`model` config before the heads, trained by the critics' loss, with a target copy."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from corral.agents.cql import CQL_DEFAULT_CONFIG
from corral.agents.cql.cql_torch_policy import CQLTorchPolicy
from corral.agents.ddpg import DDPGTrainer, TD3Trainer
from corral.agents.ddpg.ddpg_torch_policy import DDPGTorchPolicy
from corral.agents.sac import SACTrainer
from corral.agents.sac.sac_torch_policy import SACTorchPolicy
from corral.models import ModelCatalog
from corral.models.torch.fcnet import FullyConnectedNetwork
from corral.models.torch.mlp import STATE_PREPROCESSOR_OUTPUTS, EnsembleMLP
from corral.models.torch.torch_modelv2 import TorchModelV2
from corral.models.torch.visionnet import VisionNetwork

IMAGE = (42, 42, 3)
IMAGE_OBS = gym.spaces.Box(0, 255, IMAGE, np.uint8)
FLAT_OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
BOX_ACT = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
DISCRETE_ACT = gym.spaces.Discrete(3)
# A small conv stack (42x42 -> 3x3x8), so that the tests stay fast.
SMALL_CONV = {"conv_filters": [[4, [4, 4], 4], [8, [4, 4], 4]]}

TRAIN = {
    "learning_starts": 32,
    "rollout_fragment_length": 16,
    "train_batch_size": 32,
    "training_intensity": 64,
    "min_time_s_per_reporting": 0,
    "min_sample_timesteps_per_reporting": 64,
    "num_workers": 0,
    "use_state_preprocessor": True,
}
SAC_HEADS = {"Q_model": {"fcnet_hiddens": [16]}, "policy_model": {"fcnet_hiddens": [16]}}
DDPG_HEADS = {
    "actor_hiddens": [16],
    "critic_hiddens": [16],
    "exploration_config": {"random_timesteps": 0},
}


class ImageEnv(gym.Env):
    """Random uint8 frames; the reward favours actions near the frame's mean brightness."""

    observation_space = IMAGE_OBS

    def __init__(self, config: dict | None = None) -> None:
        self.action_space = (
            gym.spaces.Discrete(3)
            if (config or {}).get("discrete")
            else gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        )
        self.rng = np.random.default_rng(0)
        self.t = 0

    def _frame(self) -> np.ndarray:
        return self.rng.integers(0, 256, IMAGE, dtype=np.uint8)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.t = 0
        self.frame = self._frame()
        return self.frame, {}

    def step(self, action: Any) -> Any:
        target = self.frame.mean() / 127.5 - 1.0
        reward = -float(np.sum((np.asarray(action, np.float32) - target) ** 2))
        self.t += 1
        self.frame = self._frame()
        return self.frame, reward, False, self.t >= 20, {}


class RecordingBase(TorchModelV2, nn.Module):
    """A custom state preprocessor that records its construction and its inputs."""

    def __init__(
        self,
        obs_space: gym.Space,
        action_space: gym.Space,
        num_outputs: int,
        model_config: dict,
        name: str,
        width: int = 5,
    ) -> None:
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        # Its own output size (RLlib's models may change `num_outputs`): the heads read it.
        self.requested_outputs = num_outputs
        self.num_outputs = width
        self.body = nn.Linear(int(np.prod(obs_space.shape)), width)
        self.input_shapes: list[tuple[int, ...]] = []

    def forward(self, input_dict, state, seq_lens):
        obs = input_dict["obs"]
        self.input_shapes.append(tuple(obs.shape))
        return torch.tanh(self.body(input_dict["obs_flat"])), state


ModelCatalog.register_custom_model("state_preprocessor_test_base", RecordingBase)


def _sac(obs_space: gym.Space, action_space: gym.Space, **overrides: Any) -> SACTorchPolicy:
    config = SACTrainer.merge_trainer_configs(
        SACTrainer._default_config, {**TRAIN, **SAC_HEADS, **overrides}
    )
    return SACTorchPolicy(obs_space, action_space, config)


def _td3(obs_space: gym.Space, **overrides: Any) -> DDPGTorchPolicy:
    config = TD3Trainer.merge_trainer_configs(
        TD3Trainer._default_config, {**TRAIN, **DDPG_HEADS, "policy_delay": 1, **overrides}
    )
    return DDPGTorchPolicy(obs_space, BOX_ACT, config)


def _cql(obs_space: gym.Space, **overrides: Any) -> CQLTorchPolicy:
    config = SACTrainer.merge_trainer_configs(
        CQL_DEFAULT_CONFIG, {**TRAIN, **SAC_HEADS, "bc_iters": 0, "num_actions": 2, **overrides}
    )
    return CQLTorchPolicy(obs_space, BOX_ACT, config)


def _batch(obs_space: gym.Space, actions: torch.Tensor) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    n = len(actions)
    if obs_space is IMAGE_OBS:

        def obs() -> torch.Tensor:
            return torch.randint(0, 256, (n, *IMAGE), generator=g, dtype=torch.uint8)
    else:

        def obs() -> torch.Tensor:
            return torch.rand(n, *obs_space.shape, generator=g) * 2 - 1

    return {
        "obs": obs(),
        "new_obs": obs(),
        "actions": actions,
        "rewards": torch.randn(n, generator=g),
        "terminateds": torch.zeros(n, dtype=torch.bool),
    }


def _box_actions(n: int = 16) -> torch.Tensor:
    return torch.rand(n, 2, generator=torch.Generator().manual_seed(1)) * 2 - 1


def _params(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.named_parameters()}


# -- construction -------------------------------------------------------------


def test_default_path_has_no_state_preprocessor():
    sac = _sac(FLAT_OBS, BOX_ACT, use_state_preprocessor=False)
    td3 = _td3(FLAT_OBS, use_state_preprocessor=False)
    for policy in (sac, td3):
        assert policy.model.base_model is None and not policy.state_preprocessor
        assert policy.model.state_preprocessor_variables() == []
    # SAC's target stays the critics alone; the heads read the 3 observations.
    assert isinstance(sac.target_model, EnsembleMLP) and sac.target_q is sac.target_model
    assert sac.model.q_net.weights[0].shape[1] == 3 + 2
    assert td3.model.actor.layers[0].in_features == 3


@pytest.mark.parametrize("algo", ["SAC", "TD3"])
def test_image_observations_get_the_catalog_vision_network(algo):
    # The default conv stack of 42x42 frames, as the catalog picks it.
    policy = _sac(IMAGE_OBS, BOX_ACT) if algo == "SAC" else _td3(IMAGE_OBS)
    m = policy.model
    assert isinstance(m.base_model, VisionNetwork)
    assert m.base_model.num_outputs == STATE_PREPROCESSOR_OUTPUTS
    if algo == "SAC":
        assert m.action_model.layers[0].in_features == STATE_PREPROCESSOR_OUTPUTS
        assert m.q_net.weights[0].shape[1] == STATE_PREPROCESSOR_OUTPUTS + 2
    else:
        assert m.actor.layers[0].in_features == STATE_PREPROCESSOR_OUTPUTS
        assert m.q_net.weights[0].shape[1] == STATE_PREPROCESSOR_OUTPUTS + 2
    # Acting reads the (flattened) uint8 frames through the conv net.
    obs = np.random.default_rng(0).integers(0, 256, (4, *IMAGE), dtype=np.uint8)
    actions, _ = policy.compute_actions_from_obs(obs, explore=False)
    assert actions.shape == (4, 2) and np.all(np.isfinite(actions))
    # `forward` gives the heads' input (`model_out`).
    out, _ = m({"obs": torch.from_numpy(obs)}, [], None)
    assert out.shape == (4, STATE_PREPROCESSOR_OUTPUTS)


@pytest.mark.parametrize("algo", ["SAC", "TD3"])
def test_flat_observations_get_a_dense_network_ending_in_256(algo):
    model = {"fcnet_hiddens": [32, 8], "fcnet_activation": "tanh"}
    policy = _sac(FLAT_OBS, BOX_ACT, model=model) if algo == "SAC" else _td3(FLAT_OBS, model=model)
    base = policy.model.base_model
    assert isinstance(base, FullyConnectedNetwork)
    # RLlib 1.13's `no_final_linear`: the last hidden layer is the 256-wide output.
    linears = [layer for layer in base.modules() if isinstance(layer, nn.Linear)]
    assert [(lin.in_features, lin.out_features) for lin in linears[:2]] == [(3, 32), (32, 256)]
    features = policy.model.state_features(torch.zeros(5, 3))
    assert features.shape == (5, 256)


@pytest.mark.parametrize("algo", ["SAC", "TD3"])
def test_a_registered_custom_model_is_the_state_preprocessor(algo):
    model = {"custom_model": "state_preprocessor_test_base", "custom_model_config": {"width": 7}}
    policy = (
        _sac(IMAGE_OBS, BOX_ACT, model=model) if algo == "SAC" else _td3(IMAGE_OBS, model=model)
    )
    base = policy.model.base_model
    assert isinstance(base, RecordingBase)
    assert (
        base.requested_outputs == STATE_PREPROCESSOR_OUTPUTS and base.name == "state_preprocessor"
    )
    assert base.obs_space.shape == IMAGE
    first = policy.model.action_model if algo == "SAC" else policy.model.actor
    assert first.layers[0].in_features == 7 and policy.model.q_net.weights[0].shape[1] == 7 + 2
    # Called with frames in the observation's shape, also from acting's flat rows.
    policy.compute_actions_from_obs(np.zeros((2, *IMAGE), np.uint8), explore=False)
    assert base.input_shapes[-1] == (2, *IMAGE)


def test_sac_custom_heads_read_the_state_preprocessors_outputs():
    from tests.agents.test_sac_custom_models import RecordingNet

    policy = _sac(
        FLAT_OBS,
        BOX_ACT,
        model={"fcnet_hiddens": [8]},
        policy_model={"custom_model": RecordingNet},
        Q_model={"custom_model": RecordingNet},
    )
    m = policy.model
    assert m.action_model.obs_space.shape == (STATE_PREPROCESSOR_OUTPUTS,)
    assert m.q_net.nets[0].obs_space.shape == (STATE_PREPROCESSOR_OUTPUTS + 2,)
    stats = policy.learn_step(_batch(FLAT_OBS, _box_actions()), policy.make_optimizer())
    assert np.isfinite(float(stats["critic_loss"]))


def test_recurrent_model_is_refused():
    with pytest.raises(ValueError, match="use_state_preprocessor needs a feed-forward"):
        _td3(FLAT_OBS, model={"use_lstm": True})


# -- learning -----------------------------------------------------------------


def _step(policy: Any, batch: dict[str, torch.Tensor]) -> dict:
    return policy.learn_step(batch, policy.make_optimizer())


@pytest.mark.parametrize(
    "make, action_space",
    [
        (lambda **kw: _sac(IMAGE_OBS, BOX_ACT, model=SMALL_CONV, **kw), BOX_ACT),
        (lambda **kw: _sac(IMAGE_OBS, DISCRETE_ACT, model=SMALL_CONV, **kw), DISCRETE_ACT),
        (lambda **kw: _td3(IMAGE_OBS, model=SMALL_CONV, **kw), BOX_ACT),
        (lambda **kw: _cql(IMAGE_OBS, model=SMALL_CONV, **kw), BOX_ACT),
    ],
    ids=["sac", "sac-discrete", "td3", "cql"],
)
def test_update_trains_the_state_preprocessor_and_polyaks_its_target_copy(make, action_space):
    policy = make(tau=0.25)
    m, target = policy.model, policy.target_model
    # The target is a full copy: its own state preprocessor, not the model's.
    assert target is not m and target.base_model is not m.base_model
    for p, tp in zip(m.base_model.parameters(), target.base_model.parameters()):
        assert p.data_ptr() != tp.data_ptr() and not tp.requires_grad
        torch.testing.assert_close(p, tp)
    if isinstance(action_space, gym.spaces.Discrete):
        actions = torch.randint(0, 3, (16,), generator=torch.Generator().manual_seed(1))
    else:
        actions = _box_actions()
    # Move the target away first, so that the polyak step below is visible in it.
    with torch.no_grad():
        for tp in target.parameters():
            tp.add_(0.5)
    base_before, target_before = _params(m.base_model), _params(target.base_model)

    stats = _step(policy, _batch(IMAGE_OBS, actions))

    assert all(np.isfinite(float(v)) for v in stats.values())
    base_after = _params(m.base_model)
    trunk = [k for k in base_after if not k.startswith("_value_branch")]
    assert trunk and all(not torch.equal(base_before[k], base_after[k]) for k in trunk)
    for k, v in target.base_model.named_parameters():
        # theta' <- tau theta + (1 - tau) theta'
        torch.testing.assert_close(v, 0.75 * target_before[k] + 0.25 * base_after[k])


@pytest.mark.parametrize("algo", ["SAC", "TD3"])
def test_only_the_critics_loss_trains_the_state_preprocessor(algo):
    # With the critics' learning rate at 0 the state preprocessor stays as it was, while
    # the actor (which reads its output detached) still learns.
    if algo == "SAC":
        lrs = {"actor_learning_rate": 1e-2, "critic_learning_rate": 0.0}
        policy: Any = _sac(IMAGE_OBS, BOX_ACT, model=SMALL_CONV, optimization=lrs)
        actor = policy.model.action_model
    else:
        policy = _td3(IMAGE_OBS, model=SMALL_CONV, critic_lr=0.0, actor_lr=1e-2)
        actor = policy.model.actor
    base_before, actor_before = _params(policy.model.base_model), _params(actor)
    _step(policy, _batch(IMAGE_OBS, _box_actions()))
    for k, v in policy.model.base_model.named_parameters():
        torch.testing.assert_close(v, base_before[k], rtol=0, atol=0)
    assert any(not torch.equal(v, actor_before[k]) for k, v in actor.named_parameters())


@pytest.mark.parametrize("algo", ["SAC", "TD3", "CQL"])
def test_the_actor_reads_the_state_preprocessor_detached(algo, monkeypatch):
    makers = {
        "SAC": lambda: _sac(IMAGE_OBS, BOX_ACT, model=SMALL_CONV),
        "TD3": lambda: _td3(IMAGE_OBS, model=SMALL_CONV),
        "CQL": lambda: _cql(IMAGE_OBS, model=SMALL_CONV),
    }
    policy = makers[algo]()
    m = policy.model
    inputs: list[torch.Tensor] = []
    heads = m.get_policy_output

    def recording(model_out: torch.Tensor) -> torch.Tensor:
        inputs.append(model_out)
        return heads(model_out)

    monkeypatch.setattr(m, "get_policy_output", recording)
    _step(policy, _batch(IMAGE_OBS, _box_actions()))
    # No gradient of the actor's (or alpha's) loss reaches the state preprocessor.
    assert inputs and not any(x.requires_grad for x in inputs)


def test_optimizer_puts_the_state_preprocessor_in_the_critic_group():
    for policy in (_sac(IMAGE_OBS, BOX_ACT, model=SMALL_CONV), _td3(IMAGE_OBS, model=SMALL_CONV)):
        groups = {g["name"]: g["params"] for g in policy.make_optimizer().param_groups}
        base = {id(p) for p in policy.model.base_model.parameters()}
        assert base <= {id(p) for p in groups["critic"]}
        assert not base & {id(p) for p in groups["actor"]}


def test_target_critics_read_the_target_state_preprocessor():
    from corral.policy.sample_batch import SampleBatch

    batch = SampleBatch({k: v.numpy() for k, v in _batch(IMAGE_OBS, _box_actions(8)).items()})
    for policy in (_sac(IMAGE_OBS, BOX_ACT, model=SMALL_CONV), _td3(IMAGE_OBS, model=SMALL_CONV)):
        torch.manual_seed(0)  # SAC samples a'
        before = policy.compute_td_error(batch)
        assert before.shape == (8,) and np.all(np.isfinite(before))
        # Only the target's state preprocessor changes: the targets, so the errors, do.
        with torch.no_grad():
            for p in policy.target_model.base_model.parameters():
                p.mul_(1.5)
        torch.manual_seed(0)
        assert not np.allclose(policy.compute_td_error(batch), before)


# -- trainers -----------------------------------------------------------------


@pytest.mark.parametrize(
    "trainer_cls, heads, env, env_config",
    [
        (SACTrainer, SAC_HEADS, ImageEnv, {}),
        (SACTrainer, SAC_HEADS, ImageEnv, {"discrete": True}),
        (SACTrainer, SAC_HEADS, "Pendulum-v1", {}),
        (TD3Trainer, DDPG_HEADS, ImageEnv, {}),
        (TD3Trainer, DDPG_HEADS, "Pendulum-v1", {}),
        (DDPGTrainer, DDPG_HEADS, "Pendulum-v1", {}),
    ],
    ids=["sac-image", "sac-image-discrete", "sac-pendulum", "td3-image", "td3-pendulum", "ddpg"],
)
def test_trainers_train_with_a_state_preprocessor(trainer_cls, heads, env, env_config):
    model = SMALL_CONV if env is ImageEnv else {"fcnet_hiddens": [16]}
    config = {**TRAIN, **heads, "model": model, "env_config": env_config, "seed": 0}
    trainer = trainer_cls(config=config, env=env)
    try:
        policy = trainer.get_policy()
        assert policy.model.base_model is not None
        before = _params(policy.model.base_model)
        for _ in range(2):
            result = trainer.train()
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert np.isfinite(stats["critic_loss"]) and np.isfinite(stats["actor_loss"])
        after = _params(policy.model.base_model)
        assert any(not torch.equal(before[k], after[k]) for k in before)
    finally:
        trainer.stop()


@pytest.mark.parametrize(
    "trainer_cls, heads", [(SACTrainer, SAC_HEADS), (TD3Trainer, DDPG_HEADS)], ids=["sac", "td3"]
)
def test_checkpoint_round_trip_restores_state_preprocessor_and_target(tmp_path, trainer_cls, heads):
    config = {**TRAIN, **heads, "model": SMALL_CONV}
    frames = np.random.default_rng(0).integers(0, 256, (4, *IMAGE), dtype=np.uint8)
    trainer = trainer_cls(config={**config, "seed": 1}, env=ImageEnv)
    try:
        trainer.train()
        path = trainer.save(str(tmp_path))
        expected = [trainer.compute_single_action(f, explore=False) for f in frames]
        policy = trainer.get_policy()
        weights = {k: v.detach().clone() for k, v in policy.model.state_dict().items()}
        target = {k: v.detach().clone() for k, v in policy.target_model.state_dict().items()}
    finally:
        trainer.stop()
    assert any(k.startswith("base_model.") for k in weights)
    assert any(k.startswith("base_model.") for k in target)
    restored = trainer_cls(config={**config, "seed": 2}, env=ImageEnv)
    try:
        restored.restore(path)
        policy = restored.get_policy()
        for k, v in policy.model.state_dict().items():
            torch.testing.assert_close(v, weights[k], rtol=0, atol=0)
        for k, v in policy.target_model.state_dict().items():
            torch.testing.assert_close(v, target[k], rtol=0, atol=0)
        actual = [restored.compute_single_action(f, explore=False) for f in frames]
        np.testing.assert_array_equal(np.array(actual), np.array(expected))
        restored.train()  # training continues from the restored state
    finally:
        restored.stop()
