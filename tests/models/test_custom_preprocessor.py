"""`model: {"custom_preprocessor": name}` with `ModelCatalog.register_custom_preprocessor`
(RLlib 1.13's deprecated API): the user's preprocessor replaces the default one, and its
output is what the model receives."""

import logging

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from corral.agents.pg.pg_torch_policy import PGTorchPolicy
from corral.agents.ppo import PPOTrainer
from corral.evaluation.rollout_worker import RolloutWorker
from corral.models import ModelCatalog
from corral.models.preprocessors import Preprocessor, preprocessor_for_space
from corral.models.torch.torch_modelv2 import TorchModelV2
from corral.policy.sample_batch import SampleBatch


class PolarCartPole(Preprocessor):
    """RLlib style: `_init_shape` and `transform`. CartPole's 4 values, plus the pole
    angle's sine and cosine and a constant 1."""

    def _init_shape(self, obs_space, options):
        return (7,)

    def transform(self, observation):
        x = np.asarray(observation, np.float32)
        return np.concatenate([x, [np.sin(x[2]), np.cos(x[2]), 1.0]]).astype(np.float32)


class SummedDict(Preprocessor):
    """A Dict observation summed into one value per key (a layout of the user's own)."""

    def _init_shape(self, obs_space, options):
        return (len(obs_space.spaces),)

    def transform(self, observation):
        return np.array([np.sum(v) for v in observation.values()], np.float32)


class RecordingModel(TorchModelV2, nn.Module):
    """Records the observations it is called with."""

    seen: list = []
    spaces: list = []

    def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        RecordingModel.spaces.append(obs_space)
        self.pi = nn.Linear(int(np.prod(obs_space.shape)), num_outputs)
        self.vf = nn.Linear(int(np.prod(obs_space.shape)), 1)

    def forward(self, input_dict, state, seq_lens):
        obs = input_dict["obs"].float()
        RecordingModel.seen.append(obs.detach().clone())
        self._obs = obs
        return self.pi(obs), state

    def value_function(self):
        return self.vf(self._obs).squeeze(-1)


@pytest.fixture(autouse=True)
def _registered():
    ModelCatalog.register_custom_preprocessor("polar_cartpole", PolarCartPole)
    ModelCatalog.register_custom_preprocessor("summed_dict", SummedDict)
    ModelCatalog.register_custom_model("recording_model", RecordingModel)
    RecordingModel.seen.clear()
    RecordingModel.spaces.clear()


def test_catalog_builds_it_and_its_space_is_a_plain_box():
    space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    options = {"custom_preprocessor": "polar_cartpole"}
    for prep in (
        ModelCatalog.get_preprocessor_for_space(space, options),
        preprocessor_for_space(space, options),
    ):
        assert isinstance(prep, PolarCartPole)
        assert prep.shape == (7,) and prep.size == 7
        assert prep.observation_space.shape == (7,)
        assert not hasattr(prep.observation_space, "original_space")
        out = prep.transform(np.array([0.1, 0.2, 0.3, 0.4], np.float32))
        np.testing.assert_allclose(out[4:], [np.sin(0.3), np.cos(0.3), 1.0], rtol=1e-6)
        assert prep.transform_batch([np.zeros(4)] * 3).shape == (3, 7)
    # A class works too, not only a registered name.
    by_class = preprocessor_for_space(space, {"custom_preprocessor": PolarCartPole})
    assert isinstance(by_class, PolarCartPole)


def test_it_is_deprecated_as_in_rllib(caplog, monkeypatch):
    from corral.utils import deprecation

    monkeypatch.setattr(deprecation, "_logged_keys", set())
    space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    with caplog.at_level(logging.WARNING):
        ModelCatalog.register_custom_preprocessor("polar_cartpole", PolarCartPole)
        preprocessor_for_space(space, {"custom_preprocessor": "polar_cartpole"})
    text = caplog.text
    assert "`register_custom_preprocessor` has been deprecated" in text
    assert "`model.custom_preprocessor` has been deprecated" in text
    assert "gym.ObservationWrapper" in text


def test_unknown_names_and_classes_are_refused():
    with pytest.raises(ValueError, match="No custom preprocessor registered under 'polar'"):
        preprocessor_for_space(gym.spaces.Discrete(2), {"custom_preprocessor": "polar"})
    with pytest.raises(TypeError, match="subclass of corral.models.preprocessors.Preprocessor"):
        ModelCatalog.register_custom_preprocessor("bad", dict)
    with pytest.raises(ValueError, match="register_custom_preprocessor"):
        PPOTrainer(
            env="CartPole-v1",
            config={"num_workers": 0, "model": {"custom_preprocessor": "nope"}},
        )


def test_the_model_receives_its_output_and_ppo_trains_with_it():
    trainer = PPOTrainer(
        env="CartPole-v1",
        config={
            "num_workers": 0,
            "rollout_fragment_length": 64,
            "train_batch_size": 64,
            "sgd_minibatch_size": 32,
            "num_sgd_iter": 2,
            "seed": 0,
            "model": {"custom_preprocessor": "polar_cartpole", "custom_model": "recording_model"},
        },
    )
    try:
        policy = trainer.get_policy()
        assert isinstance(policy.preprocessor, PolarCartPole)
        assert RecordingModel.spaces[0].shape == (7,)
        # (The policy's construction checked the model once, on an all-zero dummy batch.)
        assert len(RecordingModel.seen) == 1 and not RecordingModel.seen[0].any()
        RecordingModel.seen.clear()
        before = {k: v.copy() for k, v in policy.get_weights().items()}
        results = [trainer.train() for _ in range(2)]
        after = policy.get_weights()
    finally:
        trainer.stop()
    assert any(not np.array_equal(before[k], after[k]) for k in before)
    for r in results:
        assert np.isfinite(r["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"])
    # Every model call (acting and training) got the preprocessor's 7 columns.
    assert RecordingModel.seen and all(obs.shape[-1] == 7 for obs in RecordingModel.seen)
    rows = torch.cat(RecordingModel.seen)
    torch.testing.assert_close(rows[:, 4], torch.sin(rows[:, 2]))
    torch.testing.assert_close(rows[:, 6], torch.ones(len(rows)))


def test_a_worker_samples_its_output_for_dict_observations():
    space = gym.spaces.Dict(
        {"a": gym.spaces.Box(0.0, 1.0, (3,), np.float32), "b": gym.spaces.Discrete(4)}
    )

    class DictEnv(gym.Env):
        observation_space = space
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return self.observation_space.sample(), {}

        def step(self, action):
            self.t += 1
            return self.observation_space.sample(), 1.0, self.t >= 5, False, {}

    worker = RolloutWorker(
        env_creator=lambda ctx: DictEnv(),
        policy_spec=PGTorchPolicy,
        rollout_fragment_length=10,
        policy_config={"model": {"custom_preprocessor": "summed_dict", "fcnet_hiddens": [8]}},
        seed=0,
    )
    batch = worker.sample()
    assert batch[SampleBatch.OBS].shape == (10, 2)
    assert float(batch[SampleBatch.OBS][:, 1].max()) <= 3.0  # the Discrete part as its value
    assert worker.get_policy().model.obs_space.shape == (2,)
    assert isinstance(worker.preprocessors["default_policy"], SummedDict)
