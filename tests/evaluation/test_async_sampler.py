"""`sample_async: True`: each worker's sampler runs ahead in a background thread
(RLlib 1.13's `AsyncSampler`)."""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.pg.pg_torch_policy import PGTorchPolicy
from corral.agents.ppo import PPOTrainer
from corral.env.multi_agent_env import make_multi_agent
from corral.evaluation.async_sampler import QUEUE_SIZE, AsyncSampler
from corral.evaluation.rollout_worker import RolloutWorker
from corral.evaluation.sampler import SingleAgentSampler
from corral.policy.sample_batch import SampleBatch
from corral.utils.filter import ConcurrentMeanStdFilter

pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")

PPO_CONFIG = {
    "sample_async": True,
    "rollout_fragment_length": 50,
    "train_batch_size": 200,
    "sgd_minibatch_size": 100,
    "num_sgd_iter": 2,
    "model": {"fcnet_hiddens": [16]},
    "seed": 0,
}


class CountingEnv(gym.Env):
    """Episodes of `episode_len` steps; counts every step of every instance; raises in
    the step numbered `fail_at` (counted over all instances), if given."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)
    steps = 0

    def __init__(self, episode_len: int = 7, fail_at: int | None = None) -> None:
        self.episode_len = episode_len
        self.fail_at = fail_at
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        CountingEnv.steps += 1
        if self.fail_at is not None and CountingEnv.steps == self.fail_at:
            raise ValueError(f"CountingEnv broke at step {CountingEnv.steps}")
        self.t += 1
        return np.zeros(2, np.float32), 1.0, self.t >= self.episode_len, False, {}


@pytest.fixture(autouse=True)
def _reset_step_count():
    CountingEnv.steps = 0


def counting_worker(fragment: int = 10, **kwargs) -> RolloutWorker:
    env_kwargs = {k: kwargs.pop(k) for k in ("episode_len", "fail_at") if k in kwargs}
    return RolloutWorker(
        env_creator=lambda ctx: CountingEnv(**env_kwargs),
        policy_spec=PGTorchPolicy,
        rollout_fragment_length=fragment,
        sample_async=True,
        policy_config={"model": {"fcnet_hiddens": [8]}},
        seed=0,
        **kwargs,
    )


def wait_for(condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the sampling thread")
        time.sleep(0.01)


# -- trainers -------------------------------------------------------------------------


@pytest.mark.parametrize("num_workers", [0, 2])
def test_ppo_trains_with_sample_async(num_workers):
    trainer = PPOTrainer(config={**PPO_CONFIG, "num_workers": num_workers}, env="CartPole-v1")
    try:
        kinds = trainer.workers.foreach_worker(lambda w: type(w.sampler).__name__)
        # The driver's worker has no env with remote workers.
        assert kinds == (
            ["AsyncSampler"] if num_workers == 0 else ["NoneType"] + 2 * ["AsyncSampler"]
        )
        before = trainer.get_policy().get_weights()
        for _ in range(2):
            result = trainer.train()
        assert result["timesteps_total"] >= 400
        assert result["episodes_total"] > 0 and np.isfinite(result["episode_reward_mean"])
        after = trainer.get_policy().get_weights()
        assert any(not np.array_equal(before[k], after[k]) for k in before)
    finally:
        trainer.stop()


def test_impala_trains_with_sample_async():
    from corral.agents.impala import ImpalaTrainer

    trainer = ImpalaTrainer(
        config={
            "sample_async": True,
            "num_workers": 2,
            "rollout_fragment_length": 50,
            "train_batch_size": 100,
            "min_time_s_per_reporting": 0,
            "model": {"fcnet_hiddens": [16]},
            "seed": 0,
        },
        env="CartPole-v1",
    )
    try:
        assert (
            trainer.workers.remote_workers()[0]
            .apply(lambda w: isinstance(w.sampler, AsyncSampler))
            .result()
        )
        steps = 0
        for _ in range(3):
            steps = trainer.train()["timesteps_total"]
        assert steps >= 100
    finally:
        trainer.stop()


class FailingEnv(CountingEnv):
    """Raises in its 120th step."""

    def __init__(self, config: dict | None = None) -> None:
        super().__init__(episode_len=9, fail_at=120)


def test_env_error_in_the_thread_fails_train_and_names_it():
    trainer = PPOTrainer(config={**PPO_CONFIG, "num_workers": 0}, env=FailingEnv)
    try:
        with pytest.raises(ValueError, match="CountingEnv broke at step 120"):
            trainer.train()
    finally:
        trainer.stop()


def test_evaluation_workers_sample_synchronously():
    trainer = PPOTrainer(
        config={
            **PPO_CONFIG,
            "num_workers": 0,
            "evaluation_interval": 1,
            "evaluation_duration": 2,
        },
        env="CartPole-v1",
    )
    try:
        assert isinstance(trainer.workers.local_worker().sampler, AsyncSampler)
        assert isinstance(trainer.evaluation_workers.local_worker().sampler, SingleAgentSampler)
        result = trainer.train()
        assert result["evaluation"]["episodes_this_iter"] == 2
    finally:
        trainer.stop()


# -- one worker -----------------------------------------------------------------------


def test_the_thread_samples_ahead_until_the_queue_is_full():
    worker = counting_worker(fragment=10)
    try:
        batch = worker.sample()
        assert isinstance(batch, SampleBatch) and batch.count == 10
        # No further call: the queue fills (5 fragments) and the thread samples one
        # more, which waits for room; then it steps no more.
        expected = (1 + QUEUE_SIZE + 1) * 10
        wait_for(lambda: CountingEnv.steps >= expected and worker.sampler.queue.full())
        time.sleep(0.3)
        assert CountingEnv.steps == expected
        assert worker.sampler.queue.qsize() == QUEUE_SIZE
        # The queued fragments are handed out in order, each a whole fragment.
        t_first = [worker.sample()[SampleBatch.T][0] for _ in range(3)]
        assert t_first == [10 % 7, 20 % 7, 30 % 7]
    finally:
        worker.stop()


def test_episode_metrics_are_reported_once_with_their_fragment():
    worker = counting_worker(fragment=10, episode_len=7)
    try:
        reported = []
        for k in range(1, 7):
            worker.sample()
            if k % 2 == 0:
                reported.extend(worker.get_metrics())
            # The thread's episodes beyond the fragments handed out are not reported.
            assert len(reported) <= (10 * k) // 7
        wait_for(worker.sampler.queue.full)
        reported.extend(worker.get_metrics())
        assert [m.episode_length for m in reported] == [7] * ((10 * 6) // 7)
        assert worker.get_metrics() == []
    finally:
        worker.stop()


def test_env_error_reaches_sample_after_the_good_fragments():
    worker = counting_worker(fragment=10, fail_at=25)
    try:
        assert worker.sample().count == 10
        assert worker.sample().count == 10
        with pytest.raises(ValueError, match="broke at step 25") as err:
            worker.sample()
        assert any("sampling thread of worker 0" in n for n in getattr(err.value, "__notes__", []))
        # The thread is gone; each later call raises the same error.
        assert not worker.sampler.is_alive()
        with pytest.raises(ValueError, match="broke at step 25"):
            worker.sample()
    finally:
        worker.stop()


def test_stop_joins_the_thread_blocked_on_a_full_queue():
    worker = counting_worker(fragment=5)
    wait_for(worker.sampler.queue.full)
    thread = worker.sampler.thread
    worker.stop()
    assert not thread.is_alive()
    with pytest.raises(RuntimeError, match="stopped"):
        worker.sample()


def test_reset_sampler_restarts_the_thread_with_fresh_episodes():
    worker = counting_worker(fragment=10, episode_len=7)
    try:
        worker.sample()
        wait_for(worker.sampler.queue.full)
        worker.reset_sampler()
        assert worker.sampler.is_alive()
        batch = worker.sample()
        assert batch[SampleBatch.T][0] == 0  # a new episode, not a queued fragment
    finally:
        worker.stop()


def test_mean_std_filter_is_refused_concurrent_one_is_updated():
    with pytest.raises(ValueError, match="ConcurrentMeanStdFilter"):
        counting_worker(observation_filter="MeanStdFilter")
    worker = RolloutWorker(
        env_creator=lambda ctx: gym.make("CartPole-v1"),
        policy_spec=PGTorchPolicy,
        rollout_fragment_length=20,
        sample_async=True,
        observation_filter="ConcurrentMeanStdFilter",
        seed=0,
    )
    try:
        worker.sample()
        filters = worker.get_filters(flush_after=True)
        assert isinstance(filters["default_policy"], ConcurrentMeanStdFilter)
        assert filters["default_policy"].running_stats.n >= 20
        worker.sync_filters(filters)
        worker.sample()
        state = worker.get_state()
        assert state["filters"]["default_policy"]["running_stats"]["n"] >= 40
    finally:
        worker.stop()


def test_multi_agent_env_samples_asynchronously():
    env_class = make_multi_agent("CartPole-v1")
    worker = RolloutWorker(
        env_creator=lambda ctx: env_class({"num_agents": 2}),
        policy_spec=PGTorchPolicy,
        rollout_fragment_length=20,
        sample_async=True,
        seed=0,
    )
    try:
        assert isinstance(worker.sampler, AsyncSampler)
        batch = worker.sample()
        # (Only `default_policy`: a plain SampleBatch of both agents' rows, as in 1.13.)
        assert isinstance(batch, SampleBatch) and set(batch["agent_index"].tolist()) == {0, 1}
    finally:
        worker.stop()
