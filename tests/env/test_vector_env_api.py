"""RLlib 1.x's env interfaces: user `VectorEnv` subclasses, `BaseEnv.poll`,
`convert_to_base_env`, `with_dummy_agent_id`, `VideoMonitor`."""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.callbacks import DefaultCallbacks
from corral.agents.pg import PGTrainer
from corral.env.base_env import (
    ASYNC_RESET_RETURN,
    BaseEnv,
    convert_to_base_env,
    with_dummy_agent_id,
)
from corral.env.multi_agent_env import MultiAgentEnvWrapper, make_multi_agent
from corral.env.utils import VideoMonitor
from corral.env.vector_env import VectorEnv, VectorEnvWrapper, VectorizedGymEnv
from corral.policy.sample_batch import SampleBatch
from corral.utils.error import EnvError


class CountingEnv:
    """An old-API env (reset() -> obs, step() -> 4-tuple): obs is the step count,
    the episode ends after `length` steps."""

    observation_space = gym.spaces.Box(0.0, 100.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length: int) -> None:
        self.length = length
        self.t = 0

    def reset(self):
        self.t = 0
        return np.array([0.0], np.float32)

    def step(self, action):
        self.t += 1
        return np.array([self.t], np.float32), 1.0, self.t >= self.length, {"t": self.t}


class RLlibVectorEnv(VectorEnv):
    """An RLlib 1.x-style vector env: 4 lists; sub-env i's episodes last 3 + i steps.
    `truncate`: the dones are time limits (gym's `TimeLimit.truncated` info key)."""

    def __init__(self, num_envs: int = 3, truncate: bool = False, five: bool = False) -> None:
        super().__init__(
            observation_space=CountingEnv.observation_space,
            action_space=CountingEnv.action_space,
            num_envs=num_envs,
        )
        self.envs = [CountingEnv(3 + i) for i in range(num_envs)]
        self.truncate = truncate
        self.five = five
        self.resets: list[int] = []

    def vector_reset(self):
        return [e.reset() for e in self.envs]

    def reset_at(self, index):
        self.resets.append(index)
        return self.envs[index].reset()

    def vector_step(self, actions):
        obs, rewards, dones, infos = (
            list(c) for c in zip(*(e.step(a) for e, a in zip(self.envs, actions)))
        )
        if self.five:  # Gymnasium's five lists
            return (
                obs,
                rewards,
                [d and not self.truncate for d in dones],
                [d and self.truncate for d in dones],
                infos,
            )
        if self.truncate:
            infos = [{**i, "TimeLimit.truncated": d} for i, d in zip(infos, dones)]
        return obs, rewards, dones, infos

    def get_sub_environments(self):
        return self.envs


def _trainer(name, **config) -> PGTrainer:
    return PGTrainer(
        env=name,
        config={
            "num_workers": 0,
            "rollout_fragment_length": 12,
            "train_batch_size": 36,
            "seed": 0,
            **config,
        },
    )


def test_a_user_vector_env_is_sampled_with_its_own_steps_and_resets(env_name):
    made: list[RLlibVectorEnv] = []

    def creator(ctx):
        made.append(RLlibVectorEnv())
        return made[-1]

    trainer = _trainer(env_name(creator), num_envs_per_worker=3)
    worker = trainer.workers.local_worker()
    assert worker.env is made[0]  # RLlib's `worker.env`: the creator's VectorEnv
    assert isinstance(worker.async_env, VectorEnvWrapper)
    batch = worker.sample()
    assert batch.count == 36
    # Each sub-env's episodes: observations 0..L-1 and the episode ends at step L.
    for eps_id in np.unique(batch[SampleBatch.EPS_ID]):
        rows = batch[SampleBatch.EPS_ID] == eps_id
        obs = batch[SampleBatch.OBS][rows, 0]
        np.testing.assert_array_equal(obs, np.arange(len(obs)))
    # Ended episodes are terminations, and each sub-env was reset by `reset_at`.
    lengths = {3, 4, 5}
    ends = batch[SampleBatch.TERMINATEDS]
    assert ends.any() and not batch[SampleBatch.TRUNCATEDS].any()
    assert set(made[0].resets) == {0, 1, 2}
    result = trainer.train()
    assert result["episodes_this_iter"] > 0
    assert set(result["hist_stats"]["episode_lengths"]) <= lengths
    trainer.stop()


@pytest.mark.parametrize(
    ("num_envs_per_worker", "fragment", "rows"),
    [(1, 12, 12), (1, 10, 12), (1, 1, 3), (3, 12, 36)],
)
def test_a_user_vector_env_s_fragment_counts_env_steps(
    num_envs_per_worker, fragment, rows, env_name
):
    # RLlib 1.13: a fragment is rollout_fragment_length x num_envs_per_worker env steps,
    # whatever the number of sub-envs of the creator's own vector env (3 here). corral
    # steps all sub-envs together, just often enough (1.13 cut the last vector step
    # between two fragments: 10 rows where corral gives 12).
    trainer = _trainer(
        env_name(lambda ctx: RLlibVectorEnv()),
        num_envs_per_worker=num_envs_per_worker,
        rollout_fragment_length=fragment,
    )
    worker = trainer.workers.local_worker()
    assert worker.rollout_fragment_length == fragment * num_envs_per_worker
    assert [worker.sample().count for _ in range(3)] == [rows] * 3
    trainer.stop()


@pytest.mark.parametrize("five", [False, True], ids=["rllib-4-lists", "gymnasium-5-lists"])
def test_a_vector_env_s_time_limits_are_truncations(five, env_name):
    trainer = _trainer(env_name(lambda ctx: RLlibVectorEnv(truncate=True, five=five)))
    batch = trainer.workers.local_worker().sample()
    assert batch[SampleBatch.TRUNCATEDS].any()
    assert not batch[SampleBatch.TERMINATEDS].any()
    trainer.stop()


def test_callbacks_see_the_vector_env_s_own_sub_envs(env_name):
    seen = []

    class Callbacks(DefaultCallbacks):
        def on_episode_end(self, *, worker, base_env, policies, episode, env_index=None, **kw):
            sub_env = base_env.get_sub_environments()[env_index]
            seen.append((env_index, sub_env.length))  # the CountingEnv's own attribute

    trainer = _trainer(env_name(lambda ctx: RLlibVectorEnv()), callbacks=Callbacks)
    trainer.workers.local_worker().sample()
    assert seen and all(length == 3 + i for i, length in seen)
    trainer.stop()


def test_a_hard_horizon_resets_one_sub_env_of_a_vector_env(env_name):
    trainer = _trainer(env_name(lambda ctx: RLlibVectorEnv()), horizon=2)
    worker = trainer.workers.local_worker()
    batch = worker.sample()
    assert batch[SampleBatch.OBS][:, 0].max() <= 1  # no episode got past its second step
    trainer.stop()


def test_vector_env_settings_it_cannot_honour_are_refused(env_name):
    with pytest.raises(ValueError, match="num_envs_per_worker=2"):
        _trainer(env_name(lambda ctx: RLlibVectorEnv(num_envs=3)), num_envs_per_worker=2)
    with pytest.raises(ValueError, match="restart_failed_sub_environments"):
        _trainer(env_name(lambda ctx: RLlibVectorEnv()), restart_failed_sub_environments=True)


def test_a_malformed_vector_step_names_the_call(env_name):
    class Broken(RLlibVectorEnv):
        def vector_step(self, actions):
            return super().vector_step(actions)[:3]

    trainer = _trainer(env_name(lambda ctx: Broken()))
    with pytest.raises(EnvError, match=r"Broken: vector_step\(actions\) returned a tuple of 3"):
        trainer.workers.local_worker().sample()
    trainer.stop()


def test_a_sub_env_of_a_vector_env_does_not_step_alone():
    wrapper = VectorEnvWrapper(RLlibVectorEnv())
    with pytest.raises(EnvError, match="steps only together"):
        wrapper.get_sub_environments()[0].step(0)


def test_poll_send_actions_and_try_reset_over_a_vector_env():
    base_env = RLlibVectorEnv(num_envs=2).to_base_env()
    obs, rewards, dones, infos, off_policy = base_env.poll()
    assert set(obs) == {0, 1} and obs[0]["agent0"][0] == 0.0
    assert dones[0] == {"__all__": False} and off_policy == {}
    for _ in range(3):
        base_env.send_actions({0: {"agent0": 0}, 1: {"agent0": 1}})
        obs, rewards, dones, infos, _ = base_env.poll()
    assert dones[0]["__all__"] and not dones[1]["__all__"]  # sub-env 0 lasts 3 steps
    assert rewards[1]["agent0"] == 1.0 and infos[1]["agent0"] == {"t": 3}
    assert base_env.try_reset(0) == {0: {"agent0": np.array([0.0], np.float32)}}
    # Nothing new until the next send_actions.
    assert base_env.poll()[0] == {}


def test_convert_to_base_env_of_each_kind_of_env():
    gym_env = convert_to_base_env(
        gym.make("CartPole-v1"), make_env=lambda i: gym.make("CartPole-v1"), num_envs=3
    )
    assert isinstance(gym_env, VectorizedGymEnv) and gym_env.num_envs == 3
    assert convert_to_base_env(gym_env) is gym_env
    assert isinstance(convert_to_base_env(RLlibVectorEnv()), VectorEnvWrapper)
    # An old-API env is converted.
    old = convert_to_base_env(CountingEnv(4))
    obs, *_ = old.poll()
    assert obs == {0: {"agent0": np.array([0.0], np.float32)}}
    with pytest.raises(ValueError, match="num_envs=2 needs make_env"):
        convert_to_base_env(gym.make("CartPole-v1"), num_envs=2)


def test_poll_over_gymnasium_and_multi_agent_sub_envs():
    base_env = convert_to_base_env(gym.make("CartPole-v1"))
    assert isinstance(base_env, BaseEnv) and base_env.get_agent_ids() == {"agent0"}
    obs, *_ = base_env.poll()
    assert obs[0]["agent0"].shape == (4,)
    base_env.send_actions({0: {"agent0": 1}})
    obs, rewards, dones, infos, _ = base_env.poll()
    assert rewards == {0: {"agent0": 1.0}} and dones == {0: {"__all__": False}}

    env_class = make_multi_agent("CartPole-v1")
    multi = env_class({"num_agents": 2}).to_base_env(
        make_env=lambda i: env_class({"num_agents": 2}), num_envs=2
    )
    assert isinstance(multi, MultiAgentEnvWrapper) and multi.get_agent_ids() == {0, 1}
    obs, *_ = multi.poll()
    assert set(obs) == {0, 1} and set(obs[1]) == {0, 1}
    multi.send_actions({0: {0: 1, 1: 0}, 1: {0: 0, 1: 1}})
    obs, rewards, dones, infos, _ = multi.poll()
    assert rewards[0] == {0: 1.0, 1: 1.0}
    assert dones[0] == {0: False, 1: False, "__all__": False}


def test_send_actions_before_poll_is_refused():
    with pytest.raises(RuntimeError, match="before the first poll"):
        convert_to_base_env(gym.make("CartPole-v1")).send_actions({0: {"agent0": 0}})


def test_vectorized_gym_env_speaks_rllib_s_vector_interface():
    vector = VectorEnv.vectorize_gym_envs(
        make_env=lambda i: gym.make("CartPole-v1", max_episode_steps=2), num_envs=2
    )
    assert len(vector.vector_reset()) == 2
    assert vector.reset_at(1).shape == (4,)
    for _ in range(2):
        obs, rewards, dones, infos = vector.vector_step([0, 0])
    assert dones == [True, True]  # the time limit ...
    assert all(info["TimeLimit.truncated"] for info in infos)  # ... marked as gym marked it


def test_with_dummy_agent_id_and_async_reset_return():
    assert with_dummy_agent_id({0: 1.0, 3: 2.0}) == {0: {"agent0": 1.0}, 3: {"agent0": 2.0}}
    assert with_dummy_agent_id({0: True}, "__all__") == {0: {"__all__": True}}
    assert ASYNC_RESET_RETURN == "async_reset_return"


def test_video_monitor_records_with_gym_monitor_s_arguments(tmp_path):
    pytest.importorskip("moviepy", reason="VideoMonitor writes videos with moviepy (extra `video`)")
    env = VideoMonitor(
        gym.make("CartPole-v1", render_mode="rgb_array"),
        str(tmp_path),
        video_callable=lambda episode: episode == 0,
        force=True,
        uid="run",
    )
    env.reset(seed=0)
    done = False
    while not done:
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        done = terminated or truncated
    env.close()
    assert [f for f in os.listdir(tmp_path) if f.startswith("run") and f.endswith(".mp4")]
    with pytest.raises(ValueError, match="render_mode='rgb_array'"):
        VideoMonitor(gym.make("CartPole-v1"), str(tmp_path))
