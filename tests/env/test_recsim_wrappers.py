"""RLlib 1.13's RecSim wrappers without RecSim: on a RecSim-like stub (document ids that
change every step, no reset "response", a raising close) and on corral's
InterestEvolutionEnv, and the bandit layout feeding BanditLinUCB."""

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.bandit import BanditLinUCBTrainer
from corral.env.recommender_system import InterestEvolutionEnv
from corral.env.wrappers.recsim import (
    InterestEvolutionRecSimEnv,
    MultiDiscreteToDiscreteActionWrapper,
    RecSimObservationBanditWrapper,
    RecSimObservationSpaceWrapper,
    RecSimResetWrapper,
    make_recsim_env,
    recsim_gym_wrapper,
)
from corral.utils.error import UnsupportedSpaceException

_RESPONSE = gym.spaces.Tuple([gym.spaces.Dict({"click": gym.spaces.Discrete(2)})] * 2)


class RecSimLikeEnv(gym.Env):
    """RecSim's quirks: 3 documents keyed by ids that change every step, float64 features,
    a reset observation without "response", and a close() that raises."""

    observation_space = gym.spaces.Dict(
        {
            "user": gym.spaces.Box(-1, 1, (2,), np.float32),
            "doc": gym.spaces.Dict(
                {f"id{i}": gym.spaces.Box(-1, 1, (4,), np.float32) for i in range(3)}
            ),
            "response": _RESPONSE,
        }
    )
    action_space = gym.spaces.MultiDiscrete([3, 3])

    def __init__(self):
        self.t = 0

    def _obs(self):
        # Document d's features are all d (so a row tells which document it is).
        docs = {f"id{100 * self.t + d}": np.full(4, d / 10, np.float64) for d in range(3)}
        return {"user": np.zeros(2, np.float64), "doc": docs}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        obs = self._obs()
        obs["response"] = tuple({"click": int(k == 0)} for k in range(2))
        return obs, 1.0, self.t >= 3, False, {"slate": list(action)}

    def close(self):
        raise NotImplementedError


def test_reset_wrapper_adds_a_response_and_close_does_not_raise():
    env = RecSimResetWrapper(RecSimLikeEnv())
    obs, _ = env.reset(seed=1)
    assert _RESPONSE.contains(obs["response"])
    assert obs["user"].dtype == np.float32
    env.close()
    # An env whose reset has a response keeps it.
    corral_env = RecSimResetWrapper(InterestEvolutionEnv({"seed": 0}))
    obs, _ = corral_env.reset()
    assert all(r["click"] == 0 and r["watch_time"] == 0 for r in obs["response"])
    with pytest.raises(UnsupportedSpaceException, match="'response'"):
        RecSimResetWrapper(gym.make("CartPole-v1"))


def test_observation_space_wrapper_keys_documents_by_position():
    env = recsim_gym_wrapper(RecSimLikeEnv())
    assert list(env.observation_space["doc"].spaces) == ["0", "1", "2"]
    obs, _ = env.reset(seed=0)
    for t in range(3):
        assert env.observation_space.contains(obs), t
        assert list(obs["doc"]) == ["0", "1", "2"]
        np.testing.assert_allclose(obs["doc"]["2"], np.full(4, 0.2, np.float32))
        obs, reward, terminated, truncated, info = env.step([2, 0])
        assert info["slate"] == [2, 0] and reward == 1.0
    assert terminated and not truncated


def test_observation_space_wrapper_on_interest_evolution_keeps_the_candidate_order():
    raw = InterestEvolutionEnv({"num_candidates": 12, "seed": 3})
    env = RecSimObservationSpaceWrapper(InterestEvolutionEnv({"num_candidates": 12, "seed": 3}))
    # 12 documents: keys in numeric order, not string order ("10" after "9").
    assert list(env.observation_space["doc"].spaces) == [str(i) for i in range(12)]
    assert env.action_space == raw.action_space
    obs, raw_obs = env.reset()[0], raw.reset()[0]
    for _ in range(4):
        assert env.observation_space.contains(obs)
        for i in range(12):
            np.testing.assert_array_equal(obs["doc"][str(i)], raw_obs["doc"][str(i)])
        obs, reward, *_ = env.step([11, 4])
        raw_obs, raw_reward, *_ = raw.step([11, 4])
        assert reward == raw_reward


def test_discrete_action_wrapper_round_trips_every_slate():
    env = MultiDiscreteToDiscreteActionWrapper(
        InterestEvolutionEnv({"num_candidates": 4, "slate_size": 3})
    )
    assert env.action_space == gym.spaces.Discrete(64)
    slates = [env.action(a) for a in range(64)]
    assert len({tuple(s) for s in slates}) == 64
    for index, slate in enumerate(slates):
        assert env.env.action_space.contains(np.array(slate))
        assert env.reverse_action(slate) == index
    # Slot 0 is the least significant digit (RLlib's order).
    assert env.action(1) == [1, 0, 0] and env.action(4) == [0, 1, 0] and env.action(63) == [3, 3, 3]
    with pytest.raises(ValueError, match="not in"):
        env.action(64)
    with pytest.raises(ValueError, match="not a slate"):
        env.reverse_action([4, 0, 0])
    with pytest.raises(UnsupportedSpaceException, match="Discrete"):
        MultiDiscreteToDiscreteActionWrapper(gym.make("CartPole-v1"))


def test_discrete_action_wrapper_steps_as_its_slate():
    config = {"num_candidates": 5, "slate_size": 2, "seed": 7}
    env = recsim_gym_wrapper(InterestEvolutionEnv(config), convert_to_discrete_action_space=True)
    raw = InterestEvolutionEnv(config)
    env.reset(), raw.reset()
    for index in (0, 7, 24, 13):
        obs, reward, *_ = env.step(index)
        raw_obs, raw_reward, *_ = raw.step([index % 5, index // 5])
        assert reward == raw_reward
        np.testing.assert_array_equal(obs["user"], raw_obs["user"])


def test_bandit_wrapper_stacks_the_documents_under_item():
    env = RecSimObservationBanditWrapper(
        RecSimObservationSpaceWrapper(RecSimResetWrapper(RecSimLikeEnv()))
    )
    assert list(env.observation_space.spaces) == ["user", "item", "response"]
    assert env.observation_space["item"].shape == (3, 4)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    np.testing.assert_allclose(obs["item"][:, 0], [0.0, 0.1, 0.2])
    obs, *_ = env.step([0, 1])
    assert env.observation_space.contains(obs)
    bad = gym.spaces.Dict(
        {
            "user": gym.spaces.Box(-1, 1, (2,)),
            "doc": gym.spaces.Dict({"0": gym.spaces.Discrete(3)}),
            "response": _RESPONSE,
        }
    )

    class BadDocs(RecSimLikeEnv):
        observation_space = bad

    with pytest.raises(UnsupportedSpaceException, match="1-D Box"):
        RecSimObservationBanditWrapper(BadDocs())


def test_interest_evolution_recsim_env_feeds_lin_ucb():
    config = {"slate_size": 1, "convert_to_discrete_action_space": True, "wrap_for_bandits": True}
    env = InterestEvolutionRecSimEnv(config)
    assert env.action_space == gym.spaces.Discrete(10)
    assert env.observation_space["item"].shape == (10, 10)
    trainer = BanditLinUCBTrainer(
        config={"seed": 0, "log_level": "ERROR", "env_config": config, "train_batch_size": 20},
        env=InterestEvolutionRecSimEnv,
    )
    try:
        result = trainer.train()
        assert result["timesteps_total"] >= 20
        # The item regression saw (and was updated with) the 10 topic features.
        theta = trainer.get_policy().model.arm.theta
        assert theta.shape == (10,) and bool(theta.abs().sum() > 0)
    finally:
        trainer.stop()


def test_make_recsim_env_names_recsim_and_the_corral_env():
    env_class = make_recsim_env(lambda ctx: None, lambda ctx: None, sum)
    with pytest.raises(NotImplementedError, match="recsim.*InterestEvolutionEnv"):
        env_class({})
    with pytest.raises(TypeError, match="reward_aggregator"):
        make_recsim_env(lambda ctx: None, lambda ctx: None, 1.0)


def test_the_deprecated_module_reexports_the_wrappers():
    from corral.env.wrappers import recsim, recsim_wrapper

    for name in recsim_wrapper.__all__:
        assert getattr(recsim_wrapper, name) is getattr(recsim, name)
