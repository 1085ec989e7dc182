"""`output_config={"store_infos": True}`: the samplers' `infos` column (RLlib 1.13's rows:
the info dict the env returned with each row's step)."""

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.pg import PGTrainer
from corral.env import MultiAgentEnv
from corral.env.external_env import ExternalEnv, ExternalEnvStopped
from corral.evaluation.multi_agent_sampler import _AgentInfosTrajectory, _AgentTrajectory
from corral.evaluation.sampler import SingleAgentSampler
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch
from corral.utils.replay_buffers.replay_buffer import ReplayBuffer

STORE = {"store_infos": True}


class InfoCounter(gym.Env):
    """Obs = the step counter; terminates after `length` steps. Each step's info says
    which step it came with (`t`) and whether it was the last; the reset's info is
    {"reset": True} (never a row's)."""

    observation_space = gym.spaces.Box(0, 1000, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.length = (config or {}).get("length", 4)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.array([0.0], np.float32), {"reset": True}

    def step(self, action):
        self.t += 1
        done = self.t >= self.length
        info = {"t": self.t, "last": done, "action": int(action)}
        return np.array([self.t], np.float32), 1.0, done, False, info


def pg(env, **config):
    base = {"num_workers": 0, "rollout_fragment_length": 10, "model": {"fcnet_hiddens": [8]}}
    return PGTrainer(config={**base, **config}, env=env)


def check_single_agent_rows(batch: SampleBatch) -> None:
    infos = batch[SampleBatch.INFOS]
    assert len(infos) == batch.count
    for info, next_obs, action, done in zip(
        infos,
        batch[SampleBatch.NEXT_OBS][:, 0],
        batch[SampleBatch.ACTIONS],
        batch[SampleBatch.DONES],
    ):
        assert "reset" not in info  # the reset's info is no row's
        assert info["t"] == int(next_obs)  # the info that came with the row's new_obs
        assert info["action"] == int(action) and info["last"] == bool(done)


@pytest.mark.parametrize("batch_mode", ["truncate_episodes", "complete_episodes"])
def test_single_agent_rows_carry_their_steps_infos(batch_mode):
    trainer = pg(
        InfoCounter,
        num_envs_per_worker=3,
        batch_mode=batch_mode,
        env_config={"length": 4},
        output_config=STORE,
    )
    try:
        worker = trainer.workers.local_worker()
        for _ in range(3):  # (episodes across fragment cuts too)
            check_single_agent_rows(worker.sample())
        trainer.train()  # PG's learner takes the object column
    finally:
        trainer.stop()


def test_without_the_key_no_infos_column_and_the_plain_recording():
    trainer = pg(InfoCounter, num_envs_per_worker=2)
    try:
        sampler = trainer.workers.local_worker().sampler
        assert isinstance(sampler, SingleAgentSampler) and not sampler.store_infos
        # The loop records with the class's method: no infos work at all per step.
        assert "_record_columns" not in vars(sampler)
        batch = trainer.workers.local_worker().sample()
        assert SampleBatch.INFOS not in batch
        assert SampleBatch.INFOS not in sampler._buf
    finally:
        trainer.stop()


def test_batched_vector_env_rows_carry_their_infos(env_name):
    """A vector env stepping its sub-envs itself: Gymnasium's dict of arrays, one row's
    dict each (`InfoRows`), the autoreset steps' rows dropped with their infos."""
    name = env_name(
        lambda config: gym.vector.SyncVectorEnv([lambda: InfoCounter({"length": 3})] * 2)
    )
    trainer = pg(name, num_envs_per_worker=2, output_config=STORE)
    try:
        batch = trainer.workers.local_worker().sample()
        check_single_agent_rows(batch)
        assert isinstance(batch[SampleBatch.INFOS][0]["t"], np.integer)  # (as the env gave)
    finally:
        trainer.stop()


class TwoAgentInfos(MultiAgentEnv):
    """Agent "a" acts every step, "b" every other step (it skips the odd ones); each
    observing agent's info names it and the step. The episode ends after 5 steps,
    without an observation (nor an info) for "b", whose last action stays open."""

    possible_agents = ["a", "b"]
    observation_space = gym.spaces.Box(-10.0, 10.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        super().__init__()
        self.t = 0

    def _obs(self, agent):
        return np.array([self.t, 0.0 if agent == "a" else 1.0], np.float32)

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return {"a": self._obs("a"), "b": self._obs("b")}, {"a": {"reset": True}}

    def step(self, action_dict):
        self.t += 1
        agents = ["a"] if self.t % 2 or self.t == 5 else ["a", "b"]
        obs = {agent: self._obs(agent) for agent in agents}
        infos = {agent: {"agent": agent, "t": self.t} for agent in agents}
        rewards = {agent: 1.0 for agent in action_dict}
        done = self.t == 5
        return obs, rewards, {"__all__": done}, {"__all__": False}, infos


def test_multi_agent_rows_carry_each_agents_infos():
    trainer = pg(
        TwoAgentInfos,
        rollout_fragment_length=5,
        batch_mode="complete_episodes",
        output_config=STORE,
        multiagent={
            "policies": {"pa", "pb"},
            "policy_mapping_fn": lambda agent_id, episode, worker, **kw: f"p{agent_id}",
        },
    )
    try:
        batch = trainer.workers.local_worker().sample()
        assert isinstance(batch, MultiAgentBatch)
        a, b = batch.policy_batches["pa"], batch.policy_batches["pb"]
        # "a": one row a step, each with the info of the step that completed it.
        assert [i["t"] for i in a[SampleBatch.INFOS][:5]] == [1, 2, 3, 4, 5]
        assert all(i["agent"] == "a" for i in a[SampleBatch.INFOS])
        assert [i["t"] for i in a[SampleBatch.INFOS]] == (a[SampleBatch.T] + 1).tolist()
        # "b" observed at 0, 2 and 4: rows completed by steps 2 and 4, and its last action
        # closed by the episode's end, which brought it no info ({}).
        assert list(b[SampleBatch.INFOS][:3]) == [
            {"agent": "b", "t": 2},
            {"agent": "b", "t": 4},
            {},
        ]
        trainer.train()
    finally:
        trainer.stop()


def test_multi_agent_trajectories_keep_infos_only_with_the_key():
    def trajectory_types(output_config):
        trainer = pg(
            TwoAgentInfos,
            rollout_fragment_length=3,  # (mid-episode: the agents' trajectories are kept)
            output_config=output_config,
            multiagent={
                "policies": {"p"},
                "policy_mapping_fn": lambda agent_id, episode, worker, **kw: "p",
            },
        )
        try:
            worker = trainer.workers.local_worker()
            batch = worker.sample()
            types = {type(t) for s in worker.sampler.slots for t in s.trajectories.values()}
            return types, SampleBatch.INFOS in batch.policy_batches["p"]
        finally:
            trainer.stop()

    assert trajectory_types({}) == ({_AgentTrajectory}, False)
    assert trajectory_types(STORE) == ({_AgentInfosTrajectory}, True)


def test_replay_buffers_drop_the_infos_column():
    trainer = pg(InfoCounter, output_config=STORE)
    try:
        batch = trainer.workers.local_worker().sample()
    finally:
        trainer.stop()
    assert SampleBatch.INFOS in batch
    buffer = ReplayBuffer(capacity=100)
    buffer.add(batch)
    assert SampleBatch.INFOS not in buffer.sample(4)


class InfoCounterServer(ExternalEnv):
    """`InfoCounter` driven from `run()`: each step's info goes in with its reward."""

    def __init__(self):
        super().__init__(InfoCounter.action_space, InfoCounter.observation_space)

    def run(self):
        env = InfoCounter({"length": 4})
        try:
            while True:
                eid = self.start_episode()
                obs, _ = env.reset()
                while True:
                    action = self.get_action(eid, obs)
                    obs, reward, terminated, _, info = env.step(action)
                    self.log_returns(eid, reward, info)
                    if terminated:
                        self.end_episode(eid, obs)
                        break
        except ExternalEnvStopped:
            pass


def test_external_env_rows_carry_the_infos_logged_with_their_returns(env_name):
    trainer = pg(env_name(lambda config: InfoCounterServer()), output_config=STORE)
    try:
        check_single_agent_rows(trainer.workers.local_worker().sample())
    finally:
        trainer.stop()
