"""RLlib 1.x's `training_enabled` info from a plain env: an episode piece whose last
info says `training_enabled: False` is acted on and counted in the episode metrics, but
its rows are not in the sampled batch (1.13's `postprocess_episode` skipped it)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.pg import PGTrainer
from corral.env import MultiAgentEnv
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch
from corral.tune.registry import register_env


class FlaggedEnv(gym.Env):
    """Episodes of `length` steps; obs = (episode number, step). The info of step `t` of
    episode `e` says `training_enabled: False` when `off(e, t)`."""

    observation_space = gym.spaces.Box(0, 10_000, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length: int, off: Any) -> None:
        self.length, self.off = length, off
        self.episode, self.t = -1, 0

    def reset(self, *, seed=None, options=None):
        self.episode, self.t = self.episode + 1, 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        info = {"training_enabled": False} if self.off(self.episode, self.t) else {}
        return self._obs(), 1.0, self.t >= self.length, False, info

    def _obs(self) -> np.ndarray:
        return np.array([self.episode, self.t], np.float32)


def odd_episodes_off(episode: int, t: int) -> bool:
    return episode % 2 == 1


def worker_of(env: FlaggedEnv, **config: Any) -> Any:
    register_env("flagged_env", lambda _: env)
    trainer = PGTrainer(
        config={
            "env": "flagged_env",
            "num_workers": 0,
            "rollout_fragment_length": 10,
            "train_batch_size": 10,
            "model": {"fcnet_hiddens": [4]},
            **config,
        }
    )
    return trainer, trainer.workers.local_worker()


def no_rows(batch: Any, env_steps: int) -> bool:
    """Whether `batch` is RLlib 1.13's batch of dropped steps: a `MultiAgentBatch` of no
    policy's rows that counts `env_steps`."""
    return (
        isinstance(batch, MultiAgentBatch)
        and not batch.policy_batches
        and batch.env_steps() == env_steps
    )


def rows(batch: SampleBatch) -> list[tuple[int, int]]:
    """(episode, step) of each row's observation."""
    return [(int(e), int(t)) for e, t in batch[SampleBatch.OBS].tolist()]


def test_pieces_of_untrained_episodes_are_not_in_the_batch():
    trainer, worker = worker_of(FlaggedEnv(5, odd_episodes_off))
    batch = worker.sample()
    # Episodes 0 and 1 fill the fragment; episode 1's steps said False.
    assert rows(batch) == [(0, t) for t in range(5)]
    batch = worker.sample()
    assert rows(batch) == [(2, t) for t in range(5)]
    trainer.stop()


def test_the_pieces_last_info_decides():
    # Episodes of 7 steps, fragments of 5: step 5's info alone says False. The piece of
    # episode 0 that ends at step 5 is dropped; its next piece (steps 6, 7) is kept.
    trainer, worker = worker_of(
        FlaggedEnv(7, lambda e, t: t == 5), rollout_fragment_length=5, train_batch_size=5
    )
    first, second = worker.sample(), worker.sample()
    assert no_rows(first, env_steps=5)
    assert rows(second) == [(0, 5), (0, 6), (1, 0), (1, 1), (1, 2)]
    trainer.stop()


def test_complete_episodes_drop_whole_episodes_by_their_last_info():
    # Episode e's last step says False for odd e: those episodes are not handed out,
    # whatever their earlier pieces said. Their steps still count towards the fragment
    # (RLlib 1.13): a sample of dropped episodes alone is an empty batch of env steps.
    trainer, worker = worker_of(
        FlaggedEnv(7, lambda e, t: e % 2 == 1 and t == 7),
        batch_mode="complete_episodes",
        rollout_fragment_length=5,
        train_batch_size=5,
    )
    first, second, third, fourth = (worker.sample() for _ in range(4))
    assert rows(first) == [(0, t) for t in range(7)]
    assert no_rows(second, env_steps=7)
    assert rows(third) == [(2, t) for t in range(7)]
    assert no_rows(fourth, env_steps=7)
    trainer.stop()


@pytest.mark.parametrize("batch_mode", ["truncate_episodes", "complete_episodes"])
def test_training_goes_on_when_no_episode_is_to_be_trained_on(batch_mode, time_limit):
    # Every step says False: each sample holds no rows but counts its env steps, so a
    # trainer's sampling loop (which waits for env steps) ends; before, it never did.
    trainer, _ = worker_of(
        FlaggedEnv(5, lambda e, t: True), batch_mode=batch_mode, train_batch_size=20
    )
    with time_limit(60):
        result = trainer.train()
    assert result["timesteps_this_iter"] >= 20
    assert result["episodes_this_iter"] >= 4
    assert result["info"]["num_agent_steps_trained"] == 0
    trainer.stop()


def test_untrained_episodes_still_count_in_the_metrics():
    trainer, _ = worker_of(FlaggedEnv(5, odd_episodes_off), train_batch_size=20)
    result = trainer.train()
    # 20 trained rows: 4 fragments of 10 steps, each of one kept and one dropped episode.
    assert result["timesteps_this_iter"] == 20
    assert result["episodes_this_iter"] == 8
    trainer.stop()


def test_a_batched_vector_envs_infos_are_read_too():
    length = 5

    def make(_config: Any) -> gym.vector.VectorEnv:
        return gym.vector.SyncVectorEnv(
            [lambda: FlaggedEnv(length, odd_episodes_off) for _ in range(2)]
        )

    register_env("flagged_vector", make)
    trainer = PGTrainer(
        config={
            "env": "flagged_vector",
            "num_workers": 0,
            "num_envs_per_worker": 2,
            "rollout_fragment_length": 12,
            "train_batch_size": 24,
            "model": {"fcnet_hiddens": [4]},
        }
    )
    batch = trainer.workers.local_worker().sample()
    assert len(batch) > 0
    assert all(e % 2 == 0 for e, _ in rows(batch))
    trainer.stop()


@pytest.mark.parametrize("info", [{}, {"training_enabled": True}, {"other": 1}])
def test_other_infos_keep_every_row(info):
    class Plain(FlaggedEnv):
        def step(self, action):
            obs, r, term, trunc, _ = super().step(action)
            return obs, r, term, trunc, dict(info)

    trainer, worker = worker_of(Plain(5, odd_episodes_off))
    assert len(worker.sample()) == 10
    trainer.stop()


class TwoAgents(MultiAgentEnv):
    """Agents "a" and "b" act every step; episodes of 5 steps. "b"'s infos say
    `training_enabled: False`."""

    possible_agents = ["a", "b"]
    observation_space = gym.spaces.Box(0, 100, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        super().__init__()
        self.t = 0

    def _obs(self) -> dict:
        return {a: np.array([self.t], np.float32) for a in self.possible_agents}

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return self._obs(), {}

    def step(self, action_dict):
        self.t += 1
        done = self.t >= 5
        infos = {"a": {}, "b": {"training_enabled": False}}
        return (
            self._obs(),
            {a: 1.0 for a in action_dict},
            {"__all__": done},
            {"__all__": False},
            infos,
        )


def test_a_multi_agent_envs_untrained_agents_are_left_out():
    space = gym.spaces.Box(0, 100, (1,), np.float32)
    trainer = PGTrainer(
        config={
            "env": TwoAgents,
            "num_workers": 0,
            "rollout_fragment_length": 10,
            "train_batch_size": 10,
            "model": {"fcnet_hiddens": [4]},
            "multiagent": {
                "policies": {
                    "pa": (None, space, gym.spaces.Discrete(2), {}),
                    "pb": (None, space, gym.spaces.Discrete(2), {}),
                },
                "policy_mapping_fn": lambda agent_id, *args, **kwargs: f"p{agent_id}",
            },
        }
    )
    batch = trainer.workers.local_worker().sample()
    assert isinstance(batch, MultiAgentBatch)
    assert batch.policy_batches["pa"].count == 10
    assert "pb" not in batch.policy_batches or batch.policy_batches["pb"].count == 0
    assert batch.env_steps() == 10  # the env steps are all counted
    trainer.stop()


def test_written_fragments_without_rows_read_back_as_input(tmp_path):
    # `output` writes each sample as it is, 1.13's empty batch of dropped steps included;
    # a trainer reading the files back (with the default off-policy estimators) skips
    # those records' estimates and trains on the rows the others hold.
    trainer, _ = worker_of(
        FlaggedEnv(5, odd_episodes_off), output=str(tmp_path), rollout_fragment_length=5
    )
    trainer.train()
    trainer.stop()
    records = [line for f in tmp_path.glob("*.json") for line in f.read_text().splitlines()]
    assert any('"policy_batches": {}' in r for r in records)
    assert any('"policy_batches": {}' not in r for r in records)
    reader = PGTrainer(
        config={
            "env": None,
            "observation_space": FlaggedEnv.observation_space,
            "action_space": FlaggedEnv.action_space,
            "input": str(tmp_path),
            "train_batch_size": 10,
            "model": {"fcnet_hiddens": [4]},
        }
    )
    result = reader.train()
    assert result["info"]["num_agent_steps_trained"] > 0
    reader.stop()
