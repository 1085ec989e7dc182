"""The smaller RLlib 1.13 utilities: metrics names, learner info, WindowStat, TimerStat,
sgd helpers, schedules, `corral.utils`'s own helpers, typing, debug, threading, PG's
postprocessing, per-worker noise explorations."""

import threading
import time

import gymnasium as gym
import numpy as np
import pytest

import corral.utils as utils
from corral.policy.sample_batch import SampleBatch
from corral.utils import metrics
from corral.utils.metrics.learner_info import LEARNER_STATS_KEY, LearnerInfoBuilder
from corral.utils.metrics.window_stat import WindowStat
from corral.utils.schedules import (
    ConstantSchedule,
    ExponentialSchedule,
    LinearSchedule,
    PiecewiseSchedule,
    PolynomialSchedule,
    Schedule,
)
from corral.utils.sgd import minibatches, standardized
from corral.utils.timer import TimerStat


def test_metric_names_have_rllibs_values():
    assert metrics.NUM_ENV_STEPS_SAMPLED == "num_env_steps_sampled"
    assert metrics.NUM_AGENT_STEPS_TRAINED == "num_agent_steps_trained"
    assert metrics.SAMPLE_TIMER == "sample" and metrics.LEARN_ON_BATCH_TIMER == "learn"
    assert metrics.SYNCH_WORKER_WEIGHTS_TIMER == "synch_weights"
    from corral.agents import trainer

    # The trainer's counters use the same strings.
    assert trainer.NUM_ENV_STEPS_SAMPLED == metrics.NUM_ENV_STEPS_SAMPLED


def test_learner_info_builder_averages_and_reduces_towers():
    builder = LearnerInfoBuilder()
    builder.add_learn_on_batch_results({LEARNER_STATS_KEY: {"loss": 1.0}})
    builder.add_learn_on_batch_results({LEARNER_STATS_KEY: {"loss": 3.0}})
    builder.add_learn_on_batch_results_multi_agent(
        {"p2": {LEARNER_STATS_KEY: {"loss": 5.0}}, "batch_count": 3}
    )
    info = builder.finalize()
    assert info["default_policy"][LEARNER_STATS_KEY]["loss"] == 2.0
    assert info["p2"][LEARNER_STATS_KEY]["loss"] == 5.0
    towers = LearnerInfoBuilder(num_devices=2)
    towers.add_learn_on_batch_results(
        {
            "tower_0": {LEARNER_STATS_KEY: {"min_q": 1.0, "loss": 2.0}},
            "tower_1": {LEARNER_STATS_KEY: {"min_q": -1.0, "loss": 4.0}},
            "batch_count": 8,
        }
    )
    stats = towers.finalize()["default_policy"]
    assert stats[LEARNER_STATS_KEY] == {"min_q": -1.0, "loss": 3.0}
    assert stats["batch_count"] == 8


def test_window_stat_and_timer():
    window = WindowStat("x", 2)
    for v in (1.0, 2.0, 4.0):
        window.push(v)
    stats = window.stats()
    assert stats["x_count"] == 3 and stats["x_mean"] == 3.0
    # RLlib 1.13's methods of the window (the last 2 values).
    assert window.mean() == 3.0 and window.std() == 1.0
    assert window.quantiles() == [2.0, 2.2, 3.0, 3.8, 4.0] == stats["x_quantiles"]
    empty = WindowStat("y", 3)
    assert np.isnan(empty.mean()) and empty.quantiles() == []
    timer = TimerStat()
    with timer:
        time.sleep(0.01)
    timer.push_units_processed(10)
    assert timer.count == 1 and timer.mean >= 0.009 and timer.has_units_processed()
    assert timer.mean_throughput > 0 and timer.mean_units_processed == 10


def test_sgd_helpers():
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(standardized(x).mean(), 0.0, atol=1e-7)
    batch = SampleBatch({"obs": np.arange(10), "rewards": np.arange(10.0)})
    parts = list(minibatches(batch, 4))
    assert sorted(len(p["obs"]) for p in parts) == [2, 4, 4]
    assert sorted(np.concatenate([p["obs"] for p in parts]).tolist()) == list(range(10))
    assert list(minibatches(batch, 0))[0] is batch


def test_schedules_take_rllibs_arguments():
    assert isinstance(LinearSchedule(10, 0.0), Schedule)
    assert LinearSchedule(schedule_timesteps=10, final_p=0.0, framework=None, initial_p=1.0)(
        5
    ) == pytest.approx(0.5)
    assert LinearSchedule(10, 0.0, 2.0).value(0) == 2.0  # corral's older (.., initial_p) form
    assert ConstantSchedule(3.0, framework="torch").value(100) == 3.0
    assert PolynomialSchedule(10, 0.0, initial_p=1.0, power=2.0).value(5) == pytest.approx(0.25)
    assert PolynomialSchedule(10, 0.1).value(50) == pytest.approx(0.1)
    assert ExponentialSchedule(10, initial_p=1.0, decay_rate=0.1).value(10) == pytest.approx(0.1)
    piecewise = PiecewiseSchedule([[0, 0.0], [10, 1.0]], framework=None, outside_value=5.0)
    assert piecewise(5) == pytest.approx(0.5) and piecewise(20) == 5.0
    from corral.utils.schedules.polynomial_schedule import PolynomialSchedule as RLlibPath

    assert RLlibPath is PolynomialSchedule


def test_utils_package_helpers():
    assert utils.force_list(None) == [] and utils.force_list(1) == [1]
    assert utils.force_tuple([1, 2]) == (1, 2)
    merged = utils.merge_dicts({"a": {"x": 1}, "b": 1}, {"a": {"y": 2}})
    assert merged == {"a": {"x": 1, "y": 2}, "b": 1}
    with utils.NullContextManager():
        pass

    class Base:
        def who(self):
            return "base"

    class Mixin:
        def who(self):
            return "mixin"

    assert utils.add_mixins(Base, [Mixin])().who() == "mixin"
    assert utils.add_mixins(Base, [Mixin], reversed=True)().who() == "base"
    # RLlib's re-exports from `ray.rllib.utils`.
    from corral.utils import check, override, try_import_torch  # noqa: F401

    assert utils.LinearSchedule is LinearSchedule


def test_typing_and_debug_and_threading():
    from corral.utils.debug import summarize, update_global_seed_if_necessary
    from corral.utils.threading import with_lock
    from corral.utils.typing import AgentID, ModelConfigDict, SampleBatchType, TensorType  # noqa

    text = summarize({"batch": SampleBatch({"obs": np.zeros((3, 2))})})
    assert "np.ndarray((3, 2), dtype=float64" in text
    update_global_seed_if_necessary("torch", 1)
    a = np.random.rand()
    update_global_seed_if_necessary("torch", 1)
    assert np.random.rand() == a
    import torch

    torch.use_deterministic_algorithms(False)

    class Counter:
        def __init__(self):
            self._lock = threading.Lock()
            self.n = 0

        @with_lock
        def bump(self):
            self.n += 1

    counter = Counter()
    counter.bump()
    assert counter.n == 1

    class NoLock:
        @with_lock
        def f(self):
            return 1

    with pytest.raises(AttributeError, match="_lock"):
        NoLock().f()


def test_per_worker_noise_scales():
    from corral.utils.exploration import PerWorkerGaussianNoise, PerWorkerOrnsteinUhlenbeckNoise

    space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    common = {"policy_config": {}, "model": None, "framework": "torch"}
    local = PerWorkerGaussianNoise(space, num_workers=2, worker_index=0, **common)
    first = PerWorkerGaussianNoise(space, num_workers=2, worker_index=1, **common)
    last = PerWorkerOrnsteinUhlenbeckNoise(space, num_workers=2, worker_index=2, **common)
    assert local.scale_schedule.value(0) == 0.0
    assert first.scale_schedule.value(0) == pytest.approx(0.4)
    assert last.scale_schedule.value(0) == pytest.approx(0.4**8)


def test_memory_tracking_callbacks_and_sac_constant():
    import tracemalloc
    from types import SimpleNamespace

    from corral.agents.callbacks import MemoryTrackingCallbacks
    from corral.agents.sac.sac import OPTIMIZER_SHARED_CONFIGS

    assert "train_batch_size" in OPTIMIZER_SHARED_CONFIGS
    callbacks = MemoryTrackingCallbacks()
    try:
        episode = SimpleNamespace(custom_metrics={})
        _ = [bytearray(1000) for _ in range(10)]
        callbacks.on_episode_end(worker=None, base_env=None, policies={}, episode=episode)
        assert any(k.endswith("/size") for k in episode.custom_metrics)
        assert episode.custom_metrics["tracemalloc/worker/rss"] > 0
    finally:
        tracemalloc.stop()


# -- from_config, get_global_worker ------------------------------------------------------


class _Shape:
    def __init__(self, size=1, color="red"):
        self.size, self.color = size, color


class _BigShape(_Shape):
    pass


def test_from_config_builds_from_dicts_strings_and_files(tmp_path):
    from corral.utils.from_config import from_config, from_file, lookup_type

    made = from_config(_Shape, {"type": "_BigShape", "size": 3}, color="blue")
    assert isinstance(made, _BigShape) and (made.size, made.color) == (3, "blue")
    assert isinstance(from_config(_Shape), _Shape)  # the base class, no arguments
    existing = _Shape(7)
    assert from_config(_Shape, existing) is existing
    path_type = from_config({"type": "collections.OrderedDict"})
    assert type(path_type).__name__ == "OrderedDict"
    assert from_config(_Shape, '{"size": 4}').size == 4  # JSON
    assert from_config(_Shape, "size: 5").size == 5  # YAML
    config_file = tmp_path / "shape.yaml"
    config_file.write_text("type: _BigShape\nsize: 6\n")
    assert isinstance(from_file(_Shape, str(config_file)), _BigShape)
    assert from_config(_Shape, str(config_file)).size == 6
    assert lookup_type(_Shape, "big_shape") is _BigShape
    with pytest.raises(ValueError, match="no class 'Nowhere'"):
        from_config(_Shape, {"type": "Nowhere"})
    with pytest.raises(TypeError, match="config must be"):
        from_config(_Shape, 3.5)


def test_from_config_passes_old_gym_spaces_as_gymnasium_spaces():
    """RLlib 1.13 builds explorations with `from_config(Exploration, {...})`; an old
    `gym.spaces` action space there is converted, as corral converts them elsewhere."""
    old_gym = pytest.importorskip("gym")
    import gymnasium

    from corral.utils.exploration import EpsilonGreedy, Exploration
    from corral.utils.from_config import from_config

    made = from_config(
        Exploration,
        {"type": "EpsilonGreedy", "action_space": old_gym.spaces.Discrete(3), "framework": "torch"},
    )
    assert isinstance(made, EpsilonGreedy)
    assert made.action_space == gymnasium.spaces.Discrete(3)
    # Other arguments are passed as they are (a dict is the caller's own object).
    shared = {"size": 2}
    assert from_config(_Shape, {"size": shared}).size is shared


def test_from_config_of_an_abstract_class_is_none():
    """RLlib 1.13's answer to building an abstract class: None, not a TypeError."""
    import abc

    from corral.utils.from_config import from_config

    class Abstract(abc.ABC):
        @abc.abstractmethod
        def act(self): ...

    class Concrete(Abstract):
        def act(self):
            return 1

    assert from_config({"type": Abstract}) is None
    assert from_config(Abstract, {"type": Concrete}).act() == 1


def test_get_global_worker_is_each_process_s_worker():
    from corral.agents.pg import PGTrainer
    from corral.evaluation.rollout_worker import get_global_worker

    trainer = PGTrainer(
        env="CartPole-v1",
        config={"num_workers": 1, "train_batch_size": 50, "rollout_fragment_length": 50},
    )
    try:
        assert trainer.workers.foreach_worker(lambda w: get_global_worker() is w) == [True, True]
    finally:
        trainer.stop()
