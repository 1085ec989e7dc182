"""`_disable_preprocessor_api: True`: models receive the observations as the env gives
them (Dict/Tuple structures, discrete parts as their values), not the flattened rows."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from corral.agents.dqn import DQNTrainer
from corral.agents.ppo import PPOTrainer
from corral.models import ModelCatalog
from corral.models.preprocessors import preprocessor_for_space, raw_observations
from corral.models.torch.complex_input_net import ComplexInputNetwork
from corral.models.torch.fcnet import FullyConnectedNetwork
from corral.models.torch.torch_modelv2 import TorchModelV2
from corral.models.torch.visionnet import VisionNetwork

CUE_SPACE = gym.spaces.Dict(
    {
        "cue": gym.spaces.Discrete(3),
        "noise": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
        "flags": gym.spaces.MultiDiscrete([2, 3]),
    }
)


class CueEnv(gym.Env):
    """One-step episodes: reward 1 for the action equal to the observed `cue`."""

    observation_space = CUE_SPACE
    action_space = gym.spaces.Discrete(3)

    def __init__(self, config=None):
        self.rng = np.random.default_rng((config or {}).get("seed", 0))

    def _obs(self):
        self.cue = int(self.rng.integers(3))
        return {
            "cue": self.cue,
            "noise": self.rng.uniform(-1, 1, 2).astype(np.float32),
            "flags": self.rng.integers([0, 0], [2, 3]),
        }

    def reset(self, *, seed=None, options=None):
        return self._obs(), {}

    def step(self, action):
        reward = float(action == self.cue)
        return self._obs(), reward, True, False, {}


class RecordingDictModel(TorchModelV2, nn.Module):
    """Reads the raw parts itself: one-hots the cue, records what it got."""

    seen: list = []

    def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        self.obs_space_seen = obs_space
        self.net = nn.Linear(3 + 2, num_outputs)
        self.vf = nn.Linear(3 + 2, 1)

    def forward(self, input_dict, state, seq_lens):
        obs = input_dict["obs"]
        RecordingDictModel.seen.append((obs, input_dict["obs_flat"]))
        x = torch.cat([nn.functional.one_hot(obs["cue"].long(), 3).float(), obs["noise"]], -1)
        self._x = x
        return self.net(x), state

    def value_function(self):
        return self.vf(self._x).squeeze(-1)


def _ppo(env_name, **config):
    return PPOTrainer(
        env=env_name(lambda ctx: CueEnv(ctx)),
        config={
            "num_workers": 0,
            "rollout_fragment_length": 128,
            "train_batch_size": 128,
            "sgd_minibatch_size": 64,
            "num_sgd_iter": 4,
            "lr": 3e-3,
            "seed": 0,
            "_disable_preprocessor_api": True,
            **config,
        },
    )


def test_raw_observations_undo_the_flattening():
    space = gym.spaces.Tuple(
        (CUE_SPACE, gym.spaces.MultiBinary(3), gym.spaces.Discrete(4, start=-1))
    )
    space.seed(3)
    samples = [space.sample() for _ in range(5)]
    flat = preprocessor_for_space(space).transform_batch(samples)
    for rows in (flat, torch.from_numpy(flat)):
        raw = raw_observations(rows, space)
        for i, sample in enumerate(samples):
            assert int(raw[0]["cue"][i]) == sample[0]["cue"]
            np.testing.assert_allclose(np.asarray(raw[0]["noise"][i]), sample[0]["noise"])
            np.testing.assert_array_equal(np.asarray(raw[0]["flags"][i]), sample[0]["flags"])
            np.testing.assert_array_equal(np.asarray(raw[1][i]), sample[1])
            assert int(raw[2][i]) == sample[2]
    assert raw[0]["cue"].dtype == torch.int64 and raw[1].dtype == torch.int8


def test_a_custom_model_receives_dict_observations_and_ppo_learns_with_it(env_name):
    ModelCatalog.register_custom_model("recording_dict_model", RecordingDictModel)
    RecordingDictModel.seen.clear()
    trainer = _ppo(env_name, lr=3e-2, model={"custom_model": "recording_dict_model"})
    try:
        policy = trainer.get_policy()
        model = policy.model
        assert model.obs_space_seen == CUE_SPACE  # the env's own space, not a flat Box
        assert model.model_config["_disable_preprocessor_api"] is True
        rewards = [trainer.train()["episode_reward_mean"] for _ in range(8)]
    finally:
        trainer.stop()
    # Acting and training calls alike got the structure: the cue as an integer value.
    assert RecordingDictModel.seen
    for obs, obs_flat in RecordingDictModel.seen:
        assert isinstance(obs, dict) and set(obs) == {"cue", "noise", "flags"}
        assert obs["cue"].dtype == torch.int64 and obs["cue"].dim() == 1
        assert int(obs["cue"].min()) >= 0 and int(obs["cue"].max()) <= 2
        assert obs["flags"].shape[1:] == (2,) and obs["noise"].shape[1:] == (2,)
        assert obs_flat is obs  # RLlib 1.13: "obs_flat" is the unpreprocessed "obs"
    # Random play earns 1/3 per episode; reading the cue earns more.
    assert rewards[-1] > 0.6, rewards


def test_the_default_model_is_the_complex_input_net_and_learns(env_name):
    trainer = _ppo(env_name, model={"fcnet_hiddens": [32]})
    try:
        assert isinstance(trainer.get_policy().model, ComplexInputNetwork)
        rewards = [trainer.train()["episode_reward_mean"] for _ in range(10)]
    finally:
        trainer.stop()
    assert rewards[-1] > 0.6, rewards


def test_catalog_choices_under_the_flag():
    config = {"_disable_preprocessor_api": True, "fcnet_hiddens": [8]}
    act = gym.spaces.Discrete(2)
    image = gym.spaces.Box(0, 255, (42, 42, 3), np.uint8)
    vector = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    discrete = gym.spaces.Discrete(5)
    assert isinstance(ModelCatalog.get_model_v2(image, act, 2, config), VisionNetwork)
    assert isinstance(ModelCatalog.get_model_v2(vector, act, 2, config), FullyConnectedNetwork)
    net = ModelCatalog.get_model_v2(discrete, act, 2, config)
    assert isinstance(net, ComplexInputNetwork)
    # Raw values and one-hot rows give the same outputs.
    raw_out, _ = net({"obs": torch.tensor([0, 4, 2])})
    flat_out, _ = net({"obs": nn.functional.one_hot(torch.tensor([0, 4, 2]), 5).float()})
    torch.testing.assert_close(raw_out, flat_out)


def test_image_observations_stay_images(env_name):
    space = gym.spaces.Box(0, 255, (42, 42, 3), np.uint8)

    class ImageEnv(gym.Env):
        observation_space = space
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            self.t = 0
            return np.zeros((42, 42, 3), np.uint8), {}

        def step(self, action):
            self.t += 1
            return np.full((42, 42, 3), self.t, np.uint8), 1.0, self.t >= 4, False, {}

    seen = []

    class Recording(VisionNetwork):
        def forward(self, input_dict, state, seq_lens):
            seen.append(input_dict["obs"].shape)
            return super().forward(input_dict, state, seq_lens)

    ModelCatalog.register_custom_model("recording_vision", Recording)
    trainer = PPOTrainer(
        env=env_name(lambda ctx: ImageEnv()),
        config={
            "num_workers": 0,
            "rollout_fragment_length": 16,
            "train_batch_size": 16,
            "sgd_minibatch_size": 8,
            "num_sgd_iter": 1,
            "_disable_preprocessor_api": True,
            "model": {"custom_model": "recording_vision"},
        },
    )
    try:
        trainer.train()
    finally:
        trainer.stop()
    assert seen and all(tuple(shape[1:]) == (42, 42, 3) for shape in seen)


def test_lstm_on_dict_observations(env_name):
    trainer = _ppo(env_name, model={"use_lstm": True, "lstm_cell_size": 16, "fcnet_hiddens": [16]})
    try:
        result = trainer.train()
        base = trainer.get_policy().model.base
    finally:
        trainer.stop()
    assert isinstance(base, ComplexInputNetwork)
    assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"])


def test_policies_with_their_own_models_refuse_it(env_name):
    with pytest.raises(NotImplementedError, match="_disable_preprocessor_api"):
        DQNTrainer(env="CartPole-v1", config={"num_workers": 0, "_disable_preprocessor_api": True})


def test_a_custom_preprocessor_beside_it_is_refused(env_name):
    from corral.models.preprocessors import Preprocessor

    class Identity(Preprocessor):
        pass

    ModelCatalog.register_custom_preprocessor("identity_prep", Identity)
    with pytest.raises(ValueError, match="exclude each other"):
        _ppo(env_name, model={"custom_preprocessor": "identity_prep"})


@pytest.mark.parametrize("algorithm", ["PG", "A2C", "APPO", "IMPALA"])
def test_other_catalog_model_algorithms_train_with_it(algorithm, env_name):
    from corral.agents.registry import get_trainer_class

    trainer = get_trainer_class(algorithm)(
        env=env_name(lambda ctx: CueEnv(ctx)),
        config={
            "num_workers": 0,
            "rollout_fragment_length": 32,
            "train_batch_size": 64,
            "min_time_s_per_reporting": 0,
            "model": {"fcnet_hiddens": [8]},
            "_disable_preprocessor_api": True,
        },
    )
    try:
        before = {k: v.copy() for k, v in trainer.get_policy().get_weights().items()}
        trained = 0
        for _ in range(20):  # (APPO's and IMPALA's learners train asynchronously)
            trained = trainer.train()["info"].get("num_agent_steps_trained", 0)
            if trained:
                break
        policy = trainer.get_policy()
        after = policy.get_weights()
    finally:
        trainer.stop()
    assert isinstance(policy.model, ComplexInputNetwork) and trained > 0
    assert any(not np.array_equal(before[k], after[k]) for k in before)
    assert all(np.all(np.isfinite(v)) for v in after.values())


def test_a_hand_built_policy_with_its_own_model_refuses_it():
    from corral.agents.dqn import DEFAULT_CONFIG
    from corral.agents.dqn.dqn_torch_policy import DQNTorchPolicy

    config = {**DEFAULT_CONFIG, "_disable_preprocessor_api": True}
    with pytest.raises(NotImplementedError, match="DQNTorchPolicy builds its own model"):
        DQNTorchPolicy(CUE_SPACE, gym.spaces.Discrete(3), config)
