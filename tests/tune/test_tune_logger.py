import csv
import importlib.util
import json
import os
import pathlib
import struct
import time

import numpy as np
import pytest

from corral.tune import logger as logger_module
from corral.tune.logger import (
    CSVLogger,
    JsonLogger,
    TBXLogger,
    UnifiedLogger,
    flatten_dict,
    to_jsonable,
)


class Callbacks:
    pass


def make_result(**extra):
    result = {
        "training_iteration": np.int64(1),
        "episode_reward_mean": np.float32(1.5),
        "info": {"learner": {"default_policy": {"learner_stats": {"total_loss": 0.25}}}},
        "hist_stats": {"episode_reward": [1.0, 2.0]},
        "weights": np.arange(3),
        "custom_metrics": {},
        "config": {"callbacks": Callbacks, "fn": lambda x: x, "lr": 0.1},
    }
    result.update(extra)
    return result


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_flatten_dict_joins_nested_keys():
    nested = {"a": {"b": {"c": 1}, "d": [1, 2]}, "e": 2, "empty": {}}
    assert flatten_dict(nested) == {"a/b/c": 1, "a/d": [1, 2], "e": 2}
    assert flatten_dict(nested, delimiter=".") == {"a.b.c": 1, "a.d": [1, 2], "e": 2}


def test_to_jsonable_converts_numpy_classes_and_unknown_objects():
    out = to_jsonable(
        {1: np.float32(0.5), "arr": np.ones(2), "cls": Callbacks, "obj": object(), "t": (1, 2)}
    )
    json.dumps(out)
    assert out["1"] == 0.5
    assert out["arr"] == [1.0, 1.0]
    assert out["cls"].endswith("test_tune_logger.Callbacks")
    assert out["obj"].startswith("<object object")
    assert out["t"] == [1, 2]


def test_json_logger_writes_one_line_per_result_and_params(tmp_path):
    logger = JsonLogger({"callbacks": Callbacks, "lr": np.float64(0.1)}, str(tmp_path))
    logger.on_result(make_result())
    # Flushed per result: readable before close.
    lines = (tmp_path / "result.json").read_text().splitlines()
    assert len(lines) == 1
    row = json.loads(lines[0])
    assert row["episode_reward_mean"] == 1.5
    assert row["weights"] == [0, 1, 2]
    assert row["config"]["callbacks"].endswith("Callbacks")
    logger.on_result(make_result(training_iteration=2))
    logger.close()
    assert len((tmp_path / "result.json").read_text().splitlines()) == 2
    params = json.loads((tmp_path / "params.json").read_text())
    assert params["lr"] == 0.1 and params["callbacks"].endswith("Callbacks")


def test_json_logger_update_config_rewrites_params(tmp_path):
    logger = JsonLogger({"lr": 1}, str(tmp_path))
    logger.update_config({"lr": 2, "env": "CartPole-v1"})
    logger.close()
    assert json.loads((tmp_path / "params.json").read_text()) == {"lr": 2, "env": "CartPole-v1"}


def test_csv_logger_flattens_and_skips_config_and_lists(tmp_path):
    logger = CSVLogger({}, str(tmp_path))
    logger.on_result(make_result())
    rows = read_csv(tmp_path / "progress.csv")
    logger.close()
    assert len(rows) == 1
    row = rows[0]
    assert row["info/learner/default_policy/learner_stats/total_loss"] == "0.25"
    assert row["episode_reward_mean"] == "1.5"
    assert row["training_iteration"] == "1"
    assert not any(key.startswith("config") for key in row)
    assert "hist_stats/episode_reward" not in row and "weights" not in row


def test_csv_logger_adds_a_column_for_a_key_that_appears_later(tmp_path):
    logger = CSVLogger({}, str(tmp_path))
    logger.on_result({"a": 1, "b": 2})
    logger.on_result({"a": 3, "evaluation": {"episode_reward_mean": 4}})
    logger.on_result({"a": 5, "b": 6, "evaluation": {"episode_reward_mean": 7}})
    logger.close()
    assert read_csv(tmp_path / "progress.csv") == [
        {"a": "1", "b": "2", "evaluation/episode_reward_mean": ""},
        {"a": "3", "b": "", "evaluation/episode_reward_mean": "4"},
        {"a": "5", "b": "6", "evaluation/episode_reward_mean": "7"},
    ]
    assert sorted(os.listdir(tmp_path)) == ["progress.csv"]


def test_csv_logger_continues_existing_file_with_its_header(tmp_path):
    first = CSVLogger({}, str(tmp_path))
    first.on_result({"a": 1, "b": 2})
    first.close()
    second = CSVLogger({}, str(tmp_path))
    second.on_result({"b": 3, "a": 4})
    second.close()
    text = (tmp_path / "progress.csv").read_text().splitlines()
    assert text == ["a,b", "1,2", "4,3"]


def tensorboard_libraries():
    """The writer libraries `tensorboard_api` can use, each skipped when not installed."""
    params = []
    for index, (package, *_rest) in enumerate(logger_module._TENSORBOARD_LIBRARIES):
        installed = importlib.util.find_spec(package) is not None
        reason = f"the {package} package is not installed (the `test` extra has it)"
        params.append(
            pytest.param(index, id=package, marks=pytest.mark.skipif(not installed, reason=reason))
        )
    return params


@pytest.fixture(params=tensorboard_libraries())
def tensorboard_library(request, monkeypatch):
    """Makes `tensorboard_api` use one library only."""
    chosen = logger_module._TENSORBOARD_LIBRARIES[request.param]
    monkeypatch.setattr(logger_module, "_TENSORBOARD_LIBRARIES", (chosen,))
    return chosen[0]


def read_events(logdir):
    """Every event in the TensorBoard event files under `logdir` (TFRecord framing:
    length, its CRC, the record, its CRC), as `(step, [summary values])`."""
    try:
        from tensorboardX.proto.event_pb2 import Event
    except ImportError:
        from tensorboard.compat.proto.event_pb2 import Event

    events = []
    for name in sorted(os.listdir(logdir)):
        if "tfevents" not in name:
            continue
        data = (pathlib.Path(logdir) / name).read_bytes()
        offset = 0
        while offset + 12 <= len(data):
            (length,) = struct.unpack("<Q", data[offset : offset + 8])
            if offset + 12 + length + 4 > len(data):
                break  # a record still being written
            record = data[offset + 12 : offset + 12 + length]
            offset += 12 + length + 4
            event = Event.FromString(record)
            if event.HasField("summary"):
                events.append((event.step, list(event.summary.value)))
    return events


def test_tbx_logger_writes_one_event_per_result_at_timesteps_total(tmp_path, tensorboard_library):
    logger = TBXLogger({}, str(tmp_path))
    logger.on_result(make_result(timesteps_total=np.int64(400), nan_value=float("nan")))
    logger.on_result(make_result(timesteps_total=np.int64(800), **{"odd name!": 2.0}))
    logger.close()
    events = read_events(tmp_path)
    assert [step for step, _ in events] == [400, 800]
    scalars = {
        value.tag: value.simple_value for value in events[0][1] if value.HasField("simple_value")
    }
    assert scalars["ray/tune/episode_reward_mean"] == 1.5
    assert scalars["ray/tune/info/learner/default_policy/learner_stats/total_loss"] == 0.25
    assert scalars["ray/tune/timesteps_total"] == 400
    assert "ray/tune/nan_value" not in scalars
    assert not any("config" in tag or "training_iteration" in tag for tag in scalars)
    histograms = {value.tag: value.histo for value in events[0][1] if value.HasField("histo")}
    assert set(histograms) == {"ray/tune/hist_stats/episode_reward", "ray/tune/weights"}
    reward_histogram = histograms["ray/tune/hist_stats/episode_reward"]
    assert (reward_histogram.num, reward_histogram.min, reward_histogram.max) == (2, 1.0, 2.0)
    # Tags as `add_scalar` cleans them.
    assert "ray/tune/odd_name_" in {value.tag for value in events[1][1]}


def test_tbx_logger_uses_training_iteration_without_timesteps(tmp_path, tensorboard_library):
    logger = TBXLogger({}, str(tmp_path))
    logger.on_result({"training_iteration": 7, "x": 1.0})
    logger.close()
    [(step, values)] = read_events(tmp_path)
    assert step == 7
    assert [(value.tag, value.simple_value) for value in values] == [("ray/tune/x", 1.0)]


def test_tbx_logger_events_reach_the_file_without_flush_or_close(tmp_path, tensorboard_library):
    """The writer's thread flushes within `FLUSH_SECS`: a live TensorBoard sees each
    result although `on_result` itself never waits for a flush."""
    assert TBXLogger.FLUSH_SECS <= 2
    logger = TBXLogger({}, str(tmp_path))
    for iteration in (1, 2, 3):
        logger.on_result({"training_iteration": iteration, "x": 2.0})
        deadline = time.monotonic() + 10
        while len(read_events(tmp_path)) < iteration and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [step for step, _ in read_events(tmp_path)] == list(range(1, iteration + 1))
    logger.close()


def test_tbx_logger_is_a_no_op_without_tensorboard(tmp_path, monkeypatch):
    monkeypatch.setattr(logger_module, "tensorboard_api", lambda: None)
    logger = TBXLogger({}, str(tmp_path))
    logger.on_result(make_result())
    logger.flush()
    logger.close()
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("available", [True, False])
def test_unified_logger_fans_out(tmp_path, monkeypatch, available):
    if available:
        pytest.importorskip(
            "tensorboardX", reason="tensorboardX (the `tensorboard` extra) is not installed"
        )
    else:
        monkeypatch.setattr(logger_module, "tensorboard_api", lambda: None)
    logger = UnifiedLogger({"lr": 0.1}, str(tmp_path / "trial"))
    kinds = [type(sub) for sub in logger.loggers]
    assert kinds == ([JsonLogger, CSVLogger, TBXLogger] if available else [JsonLogger, CSVLogger])
    logger.on_result(make_result())
    logger.update_config({"lr": 0.2})
    logger.flush()
    logger.close()
    trial_dir = tmp_path / "trial"
    assert (trial_dir / "result.json").exists() and (trial_dir / "progress.csv").exists()
    assert json.loads((trial_dir / "params.json").read_text()) == {"lr": 0.2}


def test_logger_callbacks_run_per_trial_loggers_through_tune_run(tmp_path):
    # Tune 1.13's LegacyLoggerCallback / LoggerCallback (RLlib's custom_logger example).
    from corral import tune
    from corral.tune.logger import CSVLoggerCallback, LegacyLoggerCallback, Logger, LoggerCallback

    seen: list = []

    class PrintLogger(Logger):
        def _init(self):
            seen.append(("init", self.config["x"]))

        def on_result(self, result):
            seen.append(("result", result["training_iteration"]))

        def close(self):
            seen.append(("close", self.config["x"]))

    class Events(LoggerCallback):
        def log_trial_start(self, trial):
            seen.append(("start",))

        def log_trial_end(self, trial, failed=False):
            seen.append(("end", failed))

    def trainable(config):
        for _ in range(2):
            tune.report(score=config["x"])

    tune.run(
        trainable,
        config={"x": 3},
        local_dir=str(tmp_path),
        verbose=0,
        callbacks=[LegacyLoggerCallback(PrintLogger), CSVLoggerCallback(), Events()],
    )
    # (The callbacks in their order: the legacy one first.)
    assert seen == [
        ("init", 3),
        ("start",),
        ("result", 1),
        ("result", 2),
        ("close", 3),
        ("end", False),
    ]
    assert list(tmp_path.rglob("progress.csv"))
    with pytest.raises(TypeError, match="Logger subclasses"):
        LegacyLoggerCallback([dict])
