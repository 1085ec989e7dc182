"""Envs written for the old gym API (gym <= 0.25) train unchanged (API.md "Porting rule")."""

from __future__ import annotations

import os
import warnings

import gymnasium
import numpy as np
import pytest
import torch

from corral.env.gym_compat import (
    OldAPIEnv,
    OldAPIMultiAgentEnv,
    convert_space,
    ensure_gymnasium_env,
    is_old_gym_space,
)
from corral.env.multi_agent_env import MultiAgentEnv
from corral.utils.error import EnvError

gym = pytest.importorskip("gym")


class OldCorridor(gym.Env):
    """RLlib 1.x's custom-env example shape: list observations, 4-tuple steps."""

    def __init__(self, config=None):
        self.end = (config or {}).get("corridor_length", 3)
        self.action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.spaces.Box(0.0, self.end, shape=(1,), dtype=np.float32)
        self.pos = 0

    def reset(self):
        self.pos = 0
        return [self.pos]

    def step(self, action):
        self.pos += 1 if action == 1 else 0
        done = self.pos >= self.end
        return [self.pos], 1.0 if done else -0.1, done, {}

    def render(self, mode="human"):
        return None


class OldTwoAgents(MultiAgentEnv):
    """An RLlib 1.x MultiAgentEnv: reset -> obs dict, step -> 4 dicts, gym spaces."""

    def __init__(self, config=None):
        super().__init__()
        self._agent_ids = {0, 1}
        self.agents = ["not", "ids"]  # RLlib 1.x examples keep sub-envs here
        self.observation_space = gym.spaces.Discrete(3)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def reset(self):
        self.t = 0
        return {0: 0, 1: 0}

    def step(self, action_dict):
        self.t += 1
        done = self.t >= 4
        obs = {a: self.t % 3 for a in action_dict}
        return obs, {a: 1.0 for a in action_dict}, {"__all__": done}, {}


def test_old_gym_space_converts_nested():
    old = gym.spaces.Dict(
        {
            "a": gym.spaces.Tuple([gym.spaces.Discrete(3), gym.spaces.MultiBinary(2)]),
            "b": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
            "c": gym.spaces.MultiDiscrete([2, 3]),
        }
    )
    assert is_old_gym_space(old)
    new = convert_space(old)
    assert isinstance(new, gymnasium.spaces.Dict)
    assert list(new.spaces) == ["a", "b", "c"]
    assert new["a"][0] == gymnasium.spaces.Discrete(3)
    assert new["b"] == gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32)
    assert new["c"] == gymnasium.spaces.MultiDiscrete([2, 3])
    space = gymnasium.spaces.Discrete(2)
    assert convert_space(space) is space


def test_old_gym_env_is_converted_with_shimmy_and_warns_once():
    with pytest.warns(UserWarning, match="OldCorridor") as record:
        env = ensure_gymnasium_env(OldCorridor())
        ensure_gymnasium_env(OldCorridor())
    assert sum("OldCorridor" in str(w.message) for w in record) == 1
    assert type(env).__module__.startswith("shimmy")
    assert isinstance(env.observation_space, gymnasium.spaces.Box)
    obs, info = env.reset(seed=0)
    assert obs == [0] and info == {}
    assert env.step(1) == ([1], -0.1, False, False, {})


def test_gym_make_result_is_converted():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = ensure_gymnasium_env(gym.make("CartPole-v0"))
        obs, _ = env.reset(seed=3)
        assert obs.shape == (4,)
        for _ in range(300):
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                break
        assert terminated or truncated


def test_old_multi_agent_env_is_wrapped():
    with pytest.warns(UserWarning, match="OldTwoAgents"):
        env = ensure_gymnasium_env(OldTwoAgents())
    assert isinstance(env, OldAPIMultiAgentEnv) and isinstance(env, MultiAgentEnv)
    assert env.possible_agents == [0, 1]
    assert env.observation_space == gymnasium.spaces.Discrete(3)
    obs, infos = env.reset()
    assert obs == {0: 0, 1: 0} and infos == {0: {}, 1: {}}
    _, _, term, trunc, _ = env.step({0: 1, 1: 0})
    assert term == {"__all__": False} and trunc == {"__all__": False}
    assert env.t == 1  # the old env's attributes stay reachable


def test_duck_typed_old_env_is_wrapped():
    class Plain:
        observation_space = gymnasium.spaces.Discrete(2)
        action_space = gymnasium.spaces.Discrete(2)

        def reset(self):
            return 0

        def step(self, action):
            return 1, 0.5, True, {"TimeLimit.truncated": True}

    with pytest.warns(UserWarning, match="Plain"):
        env = ensure_gymnasium_env(Plain())
    assert isinstance(env, OldAPIEnv)
    assert env.reset() == (0, {})
    assert env.step(0) == (1, 0.5, False, True, {"TimeLimit.truncated": True})


def test_gymnasium_env_passes_through():
    env = gymnasium.make("CartPole-v1")
    assert ensure_gymnasium_env(env) is env


def _train_one(env, config=None, **kwargs):
    from corral.agents.pg import PGTrainer

    cfg = {"env": env, "num_workers": 0, "rollout_fragment_length": 20, "train_batch_size": 40}
    cfg.update(config or {})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = PGTrainer(config=cfg, **kwargs)
        try:
            return trainer.train()
        finally:
            trainer.stop()


def test_old_env_class_trains():
    result = _train_one(OldCorridor, {"env_config": {"corridor_length": 3}})
    assert result["timesteps_total"] >= 40
    assert result["episodes_total"] > 0


def test_registered_gym_make_creator_trains():
    from corral.tune.registry import register_env

    register_env("old_gym_cartpole_test", lambda cfg: gym.make("CartPole-v0"))
    assert _train_one("old_gym_cartpole_test")["timesteps_total"] >= 40


def test_old_multi_agent_env_and_old_spaces_in_policy_specs_train():
    spaces = (gym.spaces.Discrete(3), gym.spaces.Discrete(2))
    config = {
        "multiagent": {
            "policies": {"p0": (None, *spaces, {}), "p1": (None, *spaces, {})},
            "policy_mapping_fn": lambda aid, *a, **k: f"p{aid}",
        }
    }
    result = _train_one(OldTwoAgents, config)
    assert result["timesteps_total"] >= 40
    assert set(result["policy_reward_mean"]) == {"p0", "p1"}


def test_env_fitting_neither_api_gets_a_clear_error():
    class Broken(gymnasium.Env):
        observation_space = gymnasium.spaces.Discrete(2)
        action_space = gymnasium.spaces.Discrete(2)

        def __init__(self, config=None):
            pass

        def reset(self, *, seed=None, options=None):
            return 0, {}

        def step(self, action):
            return 0, 1.0, True, {}  # old 4-tuple from a new-API reset

    with pytest.raises(EnvError, match=r"Broken.*step\(action\) returned a 4-tuple"):
        _train_one(Broken)


def test_models_see_the_old_space_the_env_declared_also_after_pickling():
    import pickle

    from corral.env.gym_compat import gym_space_of
    from corral.models.preprocessors import preprocessor_for_space

    old = gym.spaces.Dict({"mask": gym.spaces.Box(0.0, 1.0, (3,)), "obs": gym.spaces.Discrete(4)})
    new = convert_space(old)
    assert gym_space_of(new) is old
    assert convert_space(old) is new  # converted once
    copy = pickle.loads(pickle.dumps(new))  # a worker's spaces reach the driver
    assert isinstance(gym_space_of(copy), gym.spaces.Dict)
    original = preprocessor_for_space(copy).observation_space.original_space
    assert isinstance(original, gym.spaces.Dict) and "mask" in original.spaces


def test_custom_model_is_retried_without_custom_model_config_kwargs():
    from corral.models import ModelCatalog
    from corral.models.torch.fcnet import FullyConnectedNetwork
    from corral.models.torch.torch_modelv2 import TorchModelV2

    class NoKwargs(TorchModelV2, torch.nn.Module):
        def __init__(self, obs_space, action_space, num_outputs, model_config, name):
            TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
            torch.nn.Module.__init__(self)
            self.flag = model_config["custom_model_config"]["flag"]
            self.inner = FullyConnectedNetwork(obs_space, action_space, num_outputs, {}, name)

    space = gymnasium.spaces.Box(-1.0, 1.0, (3,))
    model = ModelCatalog.get_model_v2(
        space,
        gymnasium.spaces.Discrete(2),
        2,
        {"custom_model": NoKwargs, "custom_model_config": {"flag": 7}},
        framework="torch",
    )
    assert model.flag == 7


class OldPaintedCorridor(OldCorridor):
    """An old-API env that draws frames in `render(mode=...)`, as RLlib 1.13's
    env_rendering_and_recording example's env."""

    def render(self, mode="rgb"):
        self.modes = [*getattr(self, "modes", []), mode]
        return np.full((8, 8, 3), 40 * self.pos, np.uint8)


def test_old_env_renders_frames_for_record_env_and_render_env():
    # The worker's shown env asks for Gymnasium's render mode; the converted old env is
    # then rendered with that mode (old envs take it per render() call).
    old = OldPaintedCorridor()
    frames = ensure_gymnasium_env(old, render_mode="rgb_array")
    assert frames.render_mode == "rgb_array"
    frames.reset()
    assert frames.render().shape == (8, 8, 3) and old.modes == ["rgb_array"]
    assert ensure_gymnasium_env(OldPaintedCorridor()).render_mode is None


def test_record_env_records_an_old_api_env(tmp_path):
    pytest.importorskip("moviepy", reason="record_env needs moviepy (the `video` extra)")
    from corral.agents.pg import PGTrainer

    trainer = PGTrainer(
        env=OldPaintedCorridor,
        config={"num_workers": 0, "record_env": str(tmp_path), "train_batch_size": 20},
    )
    try:
        trainer.workers.local_worker().sample()
    finally:
        trainer.stop()
    assert [f for f in os.listdir(tmp_path) if f.endswith(".mp4")]


class OldTwoChoices(OldCorridor):
    """An old-API env with an old gym Tuple action space (RLlib 1.13's
    CorrelatedActionsEnv shape)."""

    def __init__(self, config=None):
        super().__init__(config)
        self.action_space = gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.Discrete(2)])

    def step(self, action):
        return super().step(int(action[0]))


def test_custom_models_see_the_old_action_space_the_env_declared():
    from corral.agents.ppo import PPOTrainer
    from corral.models import ModelCatalog
    from corral.models.torch.fcnet import FullyConnectedNetwork

    class OnlyTwoByTwo(FullyConnectedNetwork):
        def __init__(self, obs_space, action_space, num_outputs, model_config, name):
            # RLlib 1.13's autoregressive example model checks its space like this.
            if action_space != gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.Discrete(2)]):
                raise ValueError("This model only supports the [2, 2] action space")
            super().__init__(obs_space, action_space, num_outputs, model_config, name)

    ModelCatalog.register_custom_model("only_two_by_two", OnlyTwoByTwo)
    trainer = PPOTrainer(
        env=OldTwoChoices,
        config={
            "num_workers": 0,
            "train_batch_size": 64,
            "rollout_fragment_length": 64,
            "sgd_minibatch_size": 32,
            "num_sgd_iter": 1,
            "model": {"custom_model": "only_two_by_two"},
        },
    )
    try:
        assert trainer.train()["timesteps_total"] == 64
    finally:
        trainer.stop()


def test_corral_s_space_helpers_take_the_old_spaces_1_x_models_hold():
    from corral.models import ModelCatalog
    from corral.models.torch.torch_action_dist import TorchCategorical
    from corral.utils.torch_utils import one_hot

    encoded = one_hot(torch.tensor([2, 0]), gym.spaces.Discrete(3))
    assert encoded.tolist() == [[0, 0, 1], [1, 0, 0]]
    assert ModelCatalog.get_action_dist(gym.spaces.Discrete(3), {}) == (TorchCategorical, 3)
    assert ModelCatalog.get_action_shape(gym.spaces.Box(-1.0, 1.0, (2,)))[1] == (None, 2)


class OldPlayersEnv(gym.Env):
    """RLlib 1.13's `SimpleRPG` shape: a Repeated of old gym Dicts that hold Repeateds."""

    def __init__(self, config=None):
        from corral.utils.spaces.repeated import Repeated

        item = gym.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        player = gym.spaces.Dict({"hp": gym.spaces.Discrete(3), "items": Repeated(item, 3)})
        self.observation_space = Repeated(player, max_len=2)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self):
        return [{"hp": 1, "items": [np.zeros(2, np.float32)]}]

    def step(self, action):
        return self.reset(), float(action), True, {}


def test_repeated_of_old_spaces_nests_in_old_dicts_converts_and_trains():
    import pickle

    from corral.agents.pg import PGTrainer
    from corral.utils.spaces.repeated import Repeated

    env = OldPlayersEnv()
    # It is an old gym space too (old Dicts take only those), and a Gymnasium one.
    assert isinstance(env.observation_space, gym.Space | gymnasium.Space)
    assert isinstance(env.observation_space.child_space["items"], gym.Space)
    back = pickle.loads(pickle.dumps(env.observation_space))
    assert type(back) is type(env.observation_space) and back == env.observation_space
    seeds = env.observation_space.seed(3)  # (a list, which old gym's Dict adds up)
    assert isinstance(seeds, list)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        converted = ensure_gymnasium_env(env).observation_space
    assert type(converted) is Repeated and converted.max_len == 2
    assert isinstance(converted.child_space, gymnasium.spaces.Dict)
    assert isinstance(converted.child_space["items"].child_space, gymnasium.spaces.Box)
    assert converted.contains(env.reset())
    trainer = PGTrainer(
        env=OldPlayersEnv, config={"num_workers": 0, "train_batch_size": 16, "seed": 0}
    )
    try:
        assert trainer.train()["timesteps_total"] >= 16
    finally:
        trainer.stop()


def test_model_catalog_builds_models_and_preprocessors_for_old_spaces():
    from corral.models import ModelCatalog
    from corral.models.preprocessors import DictFlatteningPreprocessor, get_preprocessor
    from corral.models.torch.fcnet import FullyConnectedNetwork
    from corral.models.torch.visionnet import VisionNetwork

    vector = gym.spaces.Box(0.0, 1.0, shape=(3,), dtype=np.float32)
    model = ModelCatalog.get_model_v2(vector, gym.spaces.Discrete(5), 5, {})
    assert isinstance(model, FullyConnectedNetwork)
    out, state = model({"obs": torch.zeros(1, 3)})
    assert out.shape == (1, 5) and state == []
    image = gym.spaces.Box(0.0, 1.0, shape=(84, 84, 3), dtype=np.float32)
    assert isinstance(
        ModelCatalog.get_model_v2(image, gym.spaces.Discrete(5), 5, {}), VisionNetwork
    )
    nested = gym.spaces.Dict({"a": gym.spaces.Discrete(3), "b": vector})
    assert get_preprocessor(nested) is DictFlatteningPreprocessor
    prep = ModelCatalog.get_preprocessor_for_space(nested)
    assert isinstance(prep, DictFlatteningPreprocessor) and prep.shape == (6,)
    assert prep.transform({"a": 1, "b": np.ones(3, np.float32)}).tolist() == [0, 1, 0, 1, 1, 1]
    # A flattened space names its original (nested) space, as RLlib's did.
    flat = gym.spaces.Box(-1.0, 1.0, shape=(6,), dtype=np.float32)
    flat.original_space = nested
    assert isinstance(convert_space(flat).original_space, gymnasium.spaces.Dict)


def test_es_and_ars_workers_convert_an_old_gym_env():
    from corral.agents.ars import ARSTrainer
    from corral.agents.es import ESTrainer

    small = {
        "num_workers": 0,
        "noise_size": 10_000,
        "model": {"fcnet_hiddens": [8]},
        "env_config": {"corridor_length": 3},
    }
    es = {**small, "episodes_per_batch": 2, "train_batch_size": 2}
    for trainer_cls, config in ((ESTrainer, es), (ARSTrainer, {**small, "num_rollouts": 1})):
        trainer = trainer_cls(config=config, env=OldCorridor)
        try:
            assert trainer.train()["timesteps_total"] > 0
        finally:
            trainer.stop()
