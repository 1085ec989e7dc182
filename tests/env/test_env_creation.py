"""Env specifications: registered names, Gymnasium ids, dotted class paths, classes."""

import gymnasium as gym
import numpy as np
import pytest

from corral import register_env
from corral.agents.ppo import PPOTrainer
from corral.env import EnvContext
from corral.utils.error import EnvError

SMALL = {
    "num_workers": 0,
    "rollout_fragment_length": 10,
    "train_batch_size": 20,
    "sgd_minibatch_size": 10,
    "num_sgd_iter": 1,
    "model": {"fcnet_hiddens": [8]},
}
SEEN_CONTEXTS: list[EnvContext] = []


class ContextEnv(gym.Env):
    """Records the EnvContext it was built with."""

    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, ctx):
        SEEN_CONTEXTS.append(ctx)
        self.ctx = ctx

    def reset(self, *, seed=None, options=None):
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.zeros(2, np.float32), float(self.ctx.get("reward", 1.0)), True, False, {}


def build(env, **config):
    return PPOTrainer(config={**SMALL, **config}, env=env)


def test_env_class_gets_env_context():
    SEEN_CONTEXTS.clear()
    t = build(ContextEnv, env_config={"reward": 2.0}, num_envs_per_worker=2)
    try:
        assert t.train()["episode_reward_mean"] == 2.0
    finally:
        t.stop()
    assert [(c.worker_index, c.vector_index) for c in SEEN_CONTEXTS] == [(0, 0), (0, 1)]
    assert all(isinstance(c, EnvContext) and c["reward"] == 2.0 for c in SEEN_CONTEXTS)
    assert SEEN_CONTEXTS[0].num_workers == 0 and SEEN_CONTEXTS[0].remote is False


def test_dotted_class_path():
    SEEN_CONTEXTS.clear()
    t = build(f"{__name__}.ContextEnv", env_config={"reward": 3.0})
    try:
        assert t.train()["episode_reward_mean"] == 3.0
    finally:
        t.stop()
    assert SEEN_CONTEXTS


def test_bad_class_path_is_named():
    with pytest.raises(EnvError, match="no_such_module.Env"):
        build("no_such_module.Env")


def test_registered_name_and_env_context_copy():
    register_env("corral_test_ctx_env", lambda ctx: ContextEnv(ctx))
    # The env may also come in through the config.
    t = PPOTrainer(config={**SMALL, "env": "corral_test_ctx_env"})
    try:
        assert t.config["env"] == "corral_test_ctx_env"
        t.train()
    finally:
        t.stop()
    ctx = EnvContext({"a": 1}, worker_index=2, vector_index=1, num_workers=3)
    copy = ctx.copy_with_overrides(vector_index=5)
    assert (copy.worker_index, copy.vector_index, copy.num_workers, copy["a"]) == (2, 5, 3, 1)


def test_gym_id_gets_env_config_as_kwargs():
    t = build("Pendulum-v1", env_config={"g": 5.0})
    try:
        assert t.workers.local_worker().env.unwrapped.g == 5.0
    finally:
        t.stop()


def test_validate_env_hook_runs_on_every_sub_env():
    calls = []

    class Checked(PPOTrainer):
        @staticmethod
        def validate_env(env, env_context):
            calls.append(env_context.vector_index)

    t = Checked(config={**SMALL, "num_envs_per_worker": 3}, env="CartPole-v1")
    t.stop()
    assert calls == [0, 1, 2]


def test_continuous_actions_are_unsquashed_to_the_bounds():
    t = build("Pendulum-v1")
    try:
        batch = t.workers.local_worker().sample()
        policy = t.get_policy()
        raw = batch["actions"]
        env_actions = policy.to_env_actions(raw, unsquash=True, clip=False)
        assert np.all(np.abs(env_actions) <= 2.0)
        action = t.compute_single_action(np.zeros(3, np.float32), explore=False)
        assert action.shape == (1,) and -2.0 <= action[0] <= 2.0
        result = t.train()
        assert np.isfinite(
            result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"]
        )
    finally:
        t.stop()
