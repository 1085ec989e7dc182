"""The sections RLlib 1.13's `Trainer` added to every result: `timers`, `counters`,
`sampler_results`, `episode_media` and the steps of the iteration; and `self._timers`,
which a `training_iteration` of one's own (written for 1.13) times its parts with."""

from corral.agents.pg import PGTrainer
from corral.execution.rollout_ops import synchronous_parallel_sample
from corral.execution.train_ops import train_one_step
from corral.utils.metrics import SAMPLE_TIMER
from tests.fixtures.configs import SMALL_CARTPOLE

CONFIG = {k: v for k, v in SMALL_CARTPOLE.items() if k != "env"}


def test_results_have_rllib_1_13_sections():
    trainer = PGTrainer(config=CONFIG, env="CartPole-v1")
    try:
        result = trainer.train()
    finally:
        trainer.stop()
    assert result["timers"]["training_iteration_time_ms"] > 0
    assert result["counters"]["num_env_steps_sampled"] == result["num_env_steps_sampled"] == 40
    assert result["num_env_steps_sampled_this_iter"] == 40
    assert result["num_env_steps_trained_this_iter"] == 40
    sampler = result["sampler_results"]
    assert sampler["episode_reward_mean"] == result["episode_reward_mean"]
    assert sampler["episodes_this_iter"] == result["episodes_this_iter"]
    assert result["episode_media"] == {}


class TimedPG(PGTrainer):
    """A 1.13-style `training_iteration` that times its sampling itself."""

    def training_iteration(self) -> dict:
        with self._timers[SAMPLE_TIMER]:
            batch = synchronous_parallel_sample(self.workers)
        self._timers[SAMPLE_TIMER].push_units_processed(batch.count)
        self._counters["num_env_steps_sampled"] += batch.count
        return train_one_step(self, batch)


def test_a_training_iteration_of_ones_own_times_with_self_timers():
    trainer = TimedPG(config=CONFIG, env="CartPole-v1")
    try:
        result = trainer.train()
    finally:
        trainer.stop()
    timers = result["timers"]
    assert timers["sample_time_ms"] > 0
    assert timers["sample_throughput"] > 0
    assert timers["training_iteration_time_ms"] >= timers["sample_time_ms"]


def test_info_has_the_execution_plans_older_step_counters():
    """RLlib 1.13's execution plans (IMPALA's, DDPG's, ...) reported `num_steps_sampled`
    and `num_steps_trained` (env steps) under `info`; 1.x code reads them there."""
    trainer = PGTrainer(config=CONFIG, env="CartPole-v1")
    try:
        result = trainer.train()
    finally:
        trainer.stop()
    info = result["info"]
    assert info["num_steps_sampled"] == result["num_env_steps_sampled"] == 40
    assert info["num_steps_trained"] == result["num_env_steps_trained"] == 40


def test_built_in_steps_report_rllib_1_13_sample_learn_and_update_timers():
    """RLlib 1.13's execution plans timed sampling, learning and the weight syncs into
    `sample_*`, `learn_*` and `update_time_ms`; corral's built-in steps do the same."""
    for workers in (0, 2):
        trainer = PGTrainer(config={**CONFIG, "num_workers": workers}, env="CartPole-v1")
        try:
            timers = trainer.train()["timers"]
        finally:
            trainer.stop()
        for key in ("sample_time_ms", "sample_throughput", "learn_time_ms", "learn_throughput"):
            assert timers[key] > 0, (workers, key)
        assert timers["update_time_ms"] >= 0
        assert timers["training_iteration_time_ms"] >= timers["sample_time_ms"]


def test_a_timer_block_of_ones_own_is_not_timed_twice_inside():
    trainer = TimedPG(config=CONFIG, env="CartPole-v1")
    try:
        trainer.train()
        trainer.train()
        assert trainer._timers[SAMPLE_TIMER].count == 2  # the block's, not the sampler's too
    finally:
        trainer.stop()
