"""RLlib 1.13's ExternalEnv: envs that drive themselves and ask the policy for actions."""

from __future__ import annotations

import contextlib
import threading

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.dqn import DQNTrainer
from corral.agents.pg import PGTrainer
from corral.agents.ppo import PPOTrainer
from corral.env.external_env import ExternalEnv, ExternalEnvStopped, ExternalEnvWrapper
from corral.env.external_multi_agent_env import ExternalMultiAgentEnv
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch
from corral.utils.error import EnvError


class CartPoleServer(ExternalEnv):
    """CartPole driven from `run()`, `threads` loops at once (episodes run concurrently);
    `logged`: every action is chosen here (always 1) and logged off-policy; `train_every`:
    only every n-th episode is trained on (0: none)."""

    def __init__(
        self, threads: int = 1, logged: bool = False, train_every: int = 1, fail_after: int = 0
    ):
        super().__init__(gym.spaces.Discrete(2), gym.spaces.Box(-np.inf, np.inf, (4,), np.float32))
        self.threads, self.logged, self.train_every, self.fail_after = (
            threads,
            logged,
            train_every,
            fail_after,
        )
        self.episodes_started = 0
        self._count = threading.Lock()

    def run(self):
        # Helper threads: their ExternalEnvStopped (a SystemExit) would end them quietly
        # in plain Python; pytest reports any exception of a thread, so they catch it.
        loops = [
            threading.Thread(target=self._loop, args=(i,), daemon=True)
            for i in range(self.threads - 1)
        ]
        for loop in loops:
            loop.start()
        self._loop(self.threads - 1)

    def _loop(self, seed: int):
        with contextlib.suppress(ExternalEnvStopped):
            self._play_episodes(seed)

    def _play_episodes(self, seed: int):
        env = gym.make("CartPole-v1")
        obs, _ = env.reset(seed=seed)
        while True:
            with self._count:
                self.episodes_started += 1
                n = self.episodes_started
            if self.fail_after and n > self.fail_after:
                raise RuntimeError("the simulator crashed")
            eid = self.start_episode(
                training_enabled=bool(self.train_every) and (n - 1) % self.train_every == 0
            )
            while True:
                if self.logged:
                    action = 1
                    self.log_action(eid, obs, action)
                else:
                    action = self.get_action(eid, obs)
                obs, reward, terminated, truncated, _ = env.step(action)
                self.log_returns(eid, reward)
                if terminated or truncated:
                    self.end_episode(eid, obs)
                    obs, _ = env.reset()
                    break


def _trainer(cls, name, **config):
    return cls(
        env=name,
        config={
            "num_workers": 0,
            "rollout_fragment_length": 100,
            "train_batch_size": 200,
            **config,
        },
    )


def test_ppo_trains_on_an_external_env(env_name):
    trainer = _trainer(
        PPOTrainer, env_name(lambda ctx: CartPoleServer()), sgd_minibatch_size=50, num_sgd_iter=2
    )
    try:
        worker = trainer.workers.local_worker()
        assert isinstance(worker.async_env, ExternalEnvWrapper)
        assert isinstance(worker.env, CartPoleServer)  # RLlib's `worker.env`
        batch = worker.sample()
        assert batch.count == 100
        # Each episode's rows are its own, in order, and only the last one terminated.
        for eps_id in np.unique(batch[SampleBatch.EPS_ID]):
            rows = batch[SampleBatch.EPS_ID] == eps_id
            assert batch[SampleBatch.T][rows].tolist() == list(
                range(batch[SampleBatch.T][rows][0], batch[SampleBatch.T][rows][0] + rows.sum())
            )
            assert not batch[SampleBatch.TERMINATEDS][rows][:-1].any()
            np.testing.assert_array_equal(
                batch[SampleBatch.OBS][rows][1:], batch[SampleBatch.NEXT_OBS][rows][:-1]
            )
        result = trainer.train()
        assert result["timesteps_total"] >= 200 and result["episodes_this_iter"] > 0
        # CartPole pays 1 per step: an episode's return is its length.
        assert result["episode_reward_mean"] == pytest.approx(result["episode_len_mean"])
    finally:
        trainer.stop()


def test_concurrent_episodes_from_several_threads_are_kept_apart(env_name):
    trainer = _trainer(PGTrainer, env_name(lambda ctx: CartPoleServer(threads=3)))
    try:
        batch = trainer.workers.local_worker().sample()
        eps = batch[SampleBatch.EPS_ID]
        assert len(np.unique(eps)) >= 3
        for eps_id in np.unique(eps):  # rows of one episode are contiguous in the batch
            rows = np.flatnonzero(eps == eps_id)
            assert (np.diff(rows) == 1).all()
            np.testing.assert_array_equal(
                batch[SampleBatch.OBS][rows][1:], batch[SampleBatch.NEXT_OBS][rows][:-1]
            )
    finally:
        trainer.stop()


def test_logged_off_policy_actions_are_recorded_as_taken(env_name):
    trainer = _trainer(
        DQNTrainer,
        env_name(lambda ctx: CartPoleServer(logged=True)),
        learning_starts=50,
        rollout_fragment_length=20,
        train_batch_size=32,
    )
    try:
        batch = trainer.workers.local_worker().sample()
        assert batch.count == 20 and (batch[SampleBatch.ACTIONS] == 1).all()
        result = trainer.train()  # DQN learns from the logged transitions
        assert result["timesteps_total"] > 20
    finally:
        trainer.stop()


def test_episodes_without_training_are_acted_on_and_counted_but_not_batched(env_name):
    trainer = _trainer(PGTrainer, env_name(lambda ctx: CartPoleServer(train_every=2)))
    try:
        worker = trainer.workers.local_worker()
        batch = worker.sample()
        metrics = worker.get_metrics()
        ended = [m for m in metrics if m.episode_length]
        server = worker.env
        assert len(np.unique(batch[SampleBatch.EPS_ID])) < server.episodes_started
        assert len(ended) >= len(
            np.unique(batch[SampleBatch.EPS_ID][batch[SampleBatch.TERMINATEDS]])
        )
    finally:
        trainer.stop()


@pytest.mark.parametrize("batch_mode", ["truncate_episodes", "complete_episodes"])
def test_episodes_without_training_still_end_a_sample(batch_mode, env_name, time_limit):
    # No episode is trained on: each sample() still ends (RLlib 1.13 counted their env
    # steps too), with 1.13's empty batch that counts them; before, it waited forever.
    trainer = _trainer(
        PGTrainer,
        env_name(lambda ctx: CartPoleServer(train_every=0)),
        batch_mode=batch_mode,
    )
    try:
        worker = trainer.workers.local_worker()
        for _ in range(2):
            with time_limit(60):
                batch = worker.sample()
            assert isinstance(batch, MultiAgentBatch) and not batch.policy_batches
            assert batch.env_steps() >= 100
        assert worker.get_metrics()
    finally:
        trainer.stop()


def test_complete_episodes_batch_mode_returns_whole_episodes(env_name):
    trainer = _trainer(
        PGTrainer, env_name(lambda ctx: CartPoleServer()), batch_mode="complete_episodes"
    )
    try:
        batch = trainer.workers.local_worker().sample()
        assert batch.count >= 100
        for eps_id in np.unique(batch[SampleBatch.EPS_ID]):
            rows = batch[SampleBatch.EPS_ID] == eps_id
            assert batch[SampleBatch.T][rows][0] == 0 and batch[SampleBatch.TERMINATEDS][rows][-1]
    finally:
        trainer.stop()


def test_no_done_at_end_makes_episode_ends_truncations(env_name):
    # As the env samplers do (and RLlib 1.13's sampler did for external envs too).
    trainer = _trainer(
        PGTrainer,
        env_name(lambda ctx: CartPoleServer()),
        batch_mode="complete_episodes",
        no_done_at_end=True,
    )
    try:
        batch = trainer.workers.local_worker().sample()
        assert not batch[SampleBatch.TERMINATEDS].any() and not batch[SampleBatch.DONES].any()
        for eps_id in np.unique(batch[SampleBatch.EPS_ID]):
            rows = batch[SampleBatch.EPS_ID] == eps_id
            assert batch[SampleBatch.TRUNCATEDS][rows].tolist() == [False] * (rows.sum() - 1) + [
                True
            ]
    finally:
        trainer.stop()


def test_a_crash_in_run_reaches_the_trainer(env_name):
    trainer = _trainer(PGTrainer, env_name(lambda ctx: CartPoleServer(fail_after=2)))
    try:
        with pytest.raises(EnvError, match="raised RuntimeError: the simulator crashed"):
            for _ in range(50):
                trainer.workers.local_worker().sample()
    finally:
        trainer.stop()


def test_episode_api_errors():
    env = CartPoleServer()
    eid = env.start_episode("a")
    with pytest.raises(ValueError, match="already started"):
        env.start_episode("a")
    env._episodes.pop(eid)
    env._finished.add("a")
    with pytest.raises(ValueError, match="already completed"):
        env.start_episode("a")
    with pytest.raises(ValueError, match="was never started"):
        env.log_returns("b", 1.0)
    small = ExternalEnv(gym.spaces.Discrete(2), gym.spaces.Discrete(2), max_concurrent=1)
    small.start_episode()
    with pytest.raises(ValueError, match="max_concurrent=1"):
        small.start_episode()
    with pytest.raises(NotImplementedError, match="implement run"):
        ExternalEnv(gym.spaces.Discrete(2), gym.spaces.Discrete(2)).run()


def test_settings_an_external_env_cannot_honour_are_refused(env_name):
    with pytest.raises(ValueError, match="num_envs_per_worker"):
        _trainer(PGTrainer, env_name(lambda ctx: CartPoleServer()), num_envs_per_worker=2)
    with pytest.raises(ValueError, match="horizon"):
        _trainer(PGTrainer, env_name(lambda ctx: CartPoleServer()), horizon=10)


def test_stopping_the_worker_ends_the_env_s_thread_quietly(env_name):
    server = CartPoleServer(threads=2)
    trainer = _trainer(PGTrainer, env_name(lambda ctx: server))
    trainer.workers.local_worker().sample()
    trainer.stop()
    server.join(timeout=10)  # its get_action raised ExternalEnvStopped (a SystemExit)
    assert not server.is_alive()
    with pytest.raises(ExternalEnvStopped):
        server.get_action(server.start_episode(), np.zeros(4, np.float32))


class TwoCartPoles(ExternalMultiAgentEnv):
    """Agents 0 and 1 each balance a CartPole; an agent is done when its pole falls, the
    episode when both are."""

    def __init__(self):
        super().__init__(gym.spaces.Discrete(2), gym.spaces.Box(-np.inf, np.inf, (4,), np.float32))
        self.agent_steps = {0: 0, 1: 0}

    def run(self):
        envs = {a: gym.make("CartPole-v1") for a in (0, 1)}
        with contextlib.suppress(ExternalEnvStopped):
            while True:
                obs = {a: env.reset(seed=a)[0] for a, env in envs.items()}
                eid = self.start_episode()
                while obs:
                    actions = self.get_action(eid, obs)
                    assert set(actions) == set(obs)
                    rewards, dones, next_obs = {}, {}, {}
                    for agent, action in actions.items():
                        o, r, terminated, truncated, _ = envs[agent].step(action)
                        self.agent_steps[agent] += 1
                        rewards[agent] = r
                        dones[agent] = terminated or truncated
                        if not dones[agent]:
                            next_obs[agent] = o
                    dones["__all__"] = not next_obs
                    self.log_returns(eid, rewards, multiagent_done_dict=dones)
                    if not next_obs:
                        self.end_episode(eid, {})
                    obs = next_obs


def test_a_multi_agent_external_env_trains_each_agent_s_policy(env_name):
    trainer = _trainer(
        PPOTrainer,
        env_name(lambda ctx: TwoCartPoles()),
        sgd_minibatch_size=50,
        num_sgd_iter=2,
        multiagent={
            "policies": {"p0": (None, None, None, {}), "p1": (None, None, None, {})},
            "policy_mapping_fn": lambda agent_id, episode, worker, **kw: f"p{agent_id}",
        },
    )
    try:
        batch = trainer.workers.local_worker().sample()
        assert isinstance(batch, MultiAgentBatch) and set(batch.policy_batches) == {"p0", "p1"}
        assert batch.count >= 100
        for policy_batch in batch.policy_batches.values():
            assert (
                policy_batch[SampleBatch.AGENT_INDEX] == policy_batch[SampleBatch.AGENT_INDEX][0]
            ).all()
            for eps_id in np.unique(policy_batch[SampleBatch.EPS_ID]):
                rows = policy_batch[SampleBatch.EPS_ID] == eps_id
                np.testing.assert_array_equal(
                    policy_batch[SampleBatch.OBS][rows][1:],
                    policy_batch[SampleBatch.NEXT_OBS][rows][:-1],
                )
                assert not policy_batch[SampleBatch.TERMINATEDS][rows][:-1].any()
        result = trainer.train()
        assert set(result["policy_reward_mean"]) == {"p0", "p1"}
        # Each agent is paid 1 per step: the episode's return is the agents' steps.
        assert result["episode_reward_mean"] >= result["episode_len_mean"]
    finally:
        trainer.stop()


class Paying(CartPoleServer):
    """CartPole paying 5 per step (or NaN, with `nan`; None, with `none`; the text "5.0",
    with `text`)."""

    def __init__(self, nan: bool = False, none: bool = False, text: bool = False):
        super().__init__()
        self.nan, self.none, self.text = nan, none, text

    def log_returns(self, episode_id, reward, info=None):
        paid = float("nan") if self.nan else None if self.none else 5.0 * reward
        super().log_returns(episode_id, str(paid) if self.text else paid, info)


def test_clip_rewards_clips_the_batch_not_the_returns(env_name):
    trainer = _trainer(PGTrainer, env_name(lambda ctx: Paying()), clip_rewards=True)
    try:
        worker = trainer.workers.local_worker()
        batch = worker.sample()
        assert (batch[SampleBatch.REWARDS] == 1.0).all()
        result = trainer.train()
        assert result["episode_reward_mean"] == pytest.approx(5 * result["episode_len_mean"])
    finally:
        trainer.stop()


@pytest.mark.parametrize(
    ("paying", "message"),
    [
        ({"nan": True}, "NaN or inf reward"),
        ({"none": True}, r"log_returns\('.*', ...\): the reward None \(a NoneType\) is no number"),
        ({"text": True}, r"log_returns\('.*', ...\): the reward '5.0' \(a str\) is no number"),
    ],
)
def test_a_nan_or_no_number_reward_names_the_env(env_name, paying, message):
    trainer = _trainer(PGTrainer, env_name(lambda ctx: Paying(**paying)))
    try:
        with pytest.raises(EnvError, match=message):
            trainer.workers.local_worker().sample()
    finally:
        trainer.stop()
