"""Tests for `corral.utils.metrics`: Stats reductions and MetricsLogger trees."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from corral.utils.metrics import MetricsLogger, Stats, stats_to_values


def _stats(values, **kwargs) -> Stats:
    stats = Stats(**kwargs)
    for value in values:
        stats.push(value)
    return stats


# ---------------------------------------------------------------------- Stats


@pytest.mark.parametrize(
    ("reduce", "expected"),
    [("mean", 2.5), ("min", 1), ("max", 4), ("sum", 10), (None, [1, 2, 3, 4])],
)
def test_reductions(reduce, expected):
    stats = _stats([1, 2, 3, 4], reduce=reduce, window=math.inf)
    assert stats.peek() == expected
    assert len(stats) == 4


def test_bad_reduce_names_value_and_allowed():
    with pytest.raises(ValueError, match=r"'median'.*") as info:
        Stats(reduce="median")
    message = str(info.value)
    for allowed in ("mean", "min", "max", "sum", "None"):
        assert allowed in message


@pytest.mark.parametrize("kwargs", [{"window": 0}, {"window": 2.5}, {"ema_coeff": 0.0}])
def test_bad_settings(kwargs):
    with pytest.raises(ValueError):
        Stats(**kwargs)


def test_ema_coeff_excludes_window_and_non_mean():
    with pytest.raises(ValueError, match="window"):
        Stats(window=3, ema_coeff=0.1)
    with pytest.raises(ValueError, match="mean"):
        Stats(reduce="sum", ema_coeff=0.1)


def test_window_keeps_last_values():
    stats = _stats([1, 2, 3, 4, 5], reduce="mean", window=2)
    assert len(stats) == 2
    assert stats.peek() == 4.5
    assert _stats([5, 1, 9, 2], reduce="max", window=2).peek() == 9
    assert _stats([5, 1, 9, 2], reduce="sum", window=3).peek() == 12


def test_ema_default_and_explicit():
    stats = _stats([1.0, 2.0, 3.0])
    assert stats.ema_coeff == 0.01
    expected = 1.0
    for value in (2.0, 3.0):
        expected = 0.99 * expected + 0.01 * value
    assert stats.peek() == pytest.approx(expected)
    assert _stats([0.0, 10.0], ema_coeff=0.5).peek() == pytest.approx(5.0)


def test_inf_window_is_plain_mean():
    stats = _stats([0.0, 10.0], window=float("inf"))
    assert stats.ema_coeff is None
    assert stats.peek() == 5.0


def test_empty_peeks():
    assert math.isnan(Stats().peek())
    assert math.isnan(Stats(reduce="max").peek())
    assert Stats(reduce="sum").peek() == 0
    assert Stats(reduce=None).peek() == []


def test_push_converts_numpy_and_tensors():
    stats = Stats(reduce="sum")
    stats.push(np.float32(1.5))
    stats.push(np.array([2]))
    stats.push(torch.tensor(3.0, requires_grad=True) * 2)
    stats.push(torch.tensor([0.5]))
    assert stats.peek() == pytest.approx(10.0)
    assert all(type(v) in (float, int) for v in stats.values())
    with pytest.raises(ValueError):
        stats.push(torch.ones(3))
    with pytest.raises(TypeError):
        stats.push("x")


def test_reduce_returns_stats_that_reduce_again():
    stats = _stats([2, 4], reduce="sum")
    reduced = stats.reduce()
    assert isinstance(reduced, Stats)
    assert reduced == 6
    assert reduced.reduce() == 6
    assert reduced.reduce_method == "sum"
    # Without clearing, sums continue from the reduced value.
    stats.push(1)
    assert stats.peek() == 7
    assert len(stats) == 2


def test_reduce_keeps_window_and_collapses_ema():
    windowed = _stats([1, 2, 3], window=2)
    assert windowed.reduce() == 2.5
    assert windowed.values() == [2, 3]
    ema = _stats([1.0, 2.0])
    value = ema.peek()
    assert ema.reduce() == value
    assert ema.values() == [value]


def test_clear_on_reduce():
    stats = _stats([1, 3], window=math.inf, clear_on_reduce=True)
    assert stats.reduce() == 2.0
    assert len(stats) == 0
    stats.push(10)
    assert stats.reduce() == 10.0


def test_reduce_none_returns_list():
    stats = _stats([1, 2], reduce=None, clear_on_reduce=True)
    reduced = stats.reduce()
    assert reduced.peek() == [1, 2]
    assert len(stats) == 0


def test_merge_parallel():
    means = Stats.merge([_stats([1, 3], window=10), _stats([5], window=10)])
    assert means == 3.5
    sums = Stats.merge([_stats([1, 2], reduce="sum"), _stats([3], reduce="sum")])
    assert sums == 6
    assert Stats.merge([_stats([1], reduce="min"), _stats([-2], reduce="min")]) == -2
    assert Stats.merge([_stats([1], reduce="max"), _stats([-2], reduce="max")]) == 1
    lists = Stats.merge([_stats([1], reduce=None), _stats([2, 3], reduce=None)])
    assert lists.peek() == [1, 2, 3]
    with pytest.raises(ValueError, match="merge"):
        Stats.merge([Stats(reduce="sum"), Stats(reduce="max")])


def test_merge_in_parallel_mutates_self_only():
    mine, other = _stats([4], reduce="sum"), _stats([6], reduce="sum")
    mine.merge_in_parallel(other)
    assert mine == 10
    assert other == 6


def test_conversions_and_repr():
    stats = _stats([1.5, 2.5], window=2)
    assert float(stats) == 2.0
    assert int(stats) == 2
    assert f"{stats:.1f}" == "2.0"
    assert stats == 2.0 and stats != 3.0
    assert "reduce='mean'" in repr(stats) and "len=2" in repr(stats)


def test_stats_state_roundtrip_through_json():
    for stats in (
        _stats([1.0, 2.0]),
        _stats([1, 2, 3], reduce="sum", window=2, clear_on_reduce=True),
        _stats([1.0, 3.0], window=math.inf),
        _stats(["a", "b"], reduce=None),
    ):
        restored = Stats.from_state(json.loads(json.dumps(stats.get_state())))
        assert restored.get_state() == stats.get_state()
        assert restored.peek() == stats.peek()


# ---------------------------------------------------------------------- MetricsLogger


def _learner_result(losses, steps) -> dict:
    logger = MetricsLogger()
    for loss in losses:
        logger.log_value(("default_policy", "total_loss"), loss, window=math.inf)
        logger.log_value("num_steps", steps, reduce="sum")
    return logger.reduce()


def test_log_value_nested_keys_and_peek():
    logger = MetricsLogger()
    logger.log_value(("p0", "loss"), 1.0, window=10)
    logger.log_value(("p0", "loss"), 3.0, window=10)
    logger.log_value(("p0", "kl"), 0.5, reduce="max")
    logger.log_value("steps", 4, reduce="sum")
    assert logger.peek(("p0", "loss")) == 2.0
    assert logger.peek("p0") == {"loss": 2.0, "kl": 0.5}
    assert logger.peek() == {"p0": {"loss": 2.0, "kl": 0.5}, "steps": 4}
    assert logger.peek("missing", default=None) is None
    assert ("p0", "kl") in logger and "p0" in logger and "kl" not in logger
    with pytest.raises(KeyError):
        logger.peek("missing")


def test_leaf_and_group_keys_conflict():
    logger = MetricsLogger()
    logger.log_value(("a", "b"), 1)
    with pytest.raises(KeyError):
        logger.log_value("a", 1)
    with pytest.raises(KeyError):
        logger.log_value(("a", "b", "c"), 1)


def test_log_dict():
    logger = MetricsLogger()
    logger.log_dict({"loss": 1.0, "info": {"kl": 0.1}}, key="p0", window=5)
    logger.log_dict({"loss": 3.0, "info": {"kl": 0.3}}, key="p0", window=5)
    assert logger.peek(("p0", "loss")) == 2.0
    assert logger.peek("p0")["info"]["kl"] == pytest.approx(0.2)


def test_reduce_returns_stats_tree():
    logger = MetricsLogger()
    logger.log_value(("p0", "loss"), 2.0, window=math.inf, clear_on_reduce=True)
    logger.log_value(("p0", "loss"), 4.0)
    results = logger.reduce()
    leaf = results["p0"]["loss"]
    assert isinstance(leaf, Stats) and leaf == 3.0
    assert stats_to_values(results) == {"p0": {"loss": 3.0}}
    assert logger.peek(("p0", "loss"), default=None) is not None
    assert len(logger.reduce(("p0", "loss"))) == 0  # cleared by the first reduce
    assert isinstance(logger.reduce("p0")["loss"], Stats)


def test_aggregate_two_learners():
    first = _learner_result([1.0, 3.0], steps=10)
    second = _learner_result([5.0], steps=20)
    collector = MetricsLogger()
    collector.aggregate([first, second])
    assert collector.peek(("default_policy", "total_loss")) == 3.5
    assert collector.peek("num_steps") == 20 + 20
    reduced = collector.reduce()
    assert stats_to_values(reduced) == {"default_policy": {"total_loss": 3.5}, "num_steps": 40}
    # The reduced leaves merge again (e.g. a further level of aggregation).
    again = MetricsLogger()
    again.aggregate([reduced, reduced], key="learners")
    assert again.peek(("learners", "num_steps")) == 80
    assert again.peek(("learners", "default_policy", "total_loss")) == 3.5


def test_aggregate_into_existing_key_continues_over_time():
    collector = MetricsLogger()
    collector.aggregate([_learner_result([1.0], 5), _learner_result([3.0], 5)])
    collector.aggregate([_learner_result([1.0], 5), _learner_result([1.0], 5)])
    assert collector.peek("num_steps") == 20
    with pytest.raises(TypeError):
        collector.aggregate([{"x": 1.0}])


def test_logger_state_roundtrip_through_json():
    logger = MetricsLogger()
    logger.log_value(("p0", "loss"), 1.0)
    logger.log_value(("p0", "loss"), 2.0)
    logger.log_value("steps", 7, reduce="sum", clear_on_reduce=True)
    logger.log_value("returns", 1.5, reduce=None, window=3)
    state = json.loads(json.dumps(logger.get_state()))
    restored = MetricsLogger()
    restored.set_state(state)
    assert restored.peek() == logger.peek()
    assert restored.get_state() == logger.get_state()
    restored.log_value("steps", 3)
    assert restored.peek("steps") == 10


def test_log_value_is_cheap():
    logger = MetricsLogger()
    for _ in range(300):
        for name in ("policy_loss", "vf_loss", "entropy", "kl"):
            logger.log_value(("default_policy", name), 0.5)
    assert len(logger.reduce()["default_policy"]["kl"]) == 1
