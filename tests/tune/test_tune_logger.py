import csv
import json
import os

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


class FakeWriter:
    instances: list["FakeWriter"] = []

    def __init__(self, logdir):
        self.logdir = logdir
        self.scalars = []
        self.histograms = []
        self.closed = False
        FakeWriter.instances.append(self)

    def add_scalar(self, tag, value, global_step):
        self.scalars.append((tag, value, global_step))

    def add_histogram(self, tag, values, global_step):
        self.histograms.append((tag, list(values), global_step))

    def flush(self):
        pass

    def close(self):
        self.closed = True


def test_tbx_logger_writes_scalars_at_timesteps_total(tmp_path, monkeypatch):
    monkeypatch.setattr(logger_module, "summary_writer_class", lambda: FakeWriter)
    logger = TBXLogger({}, str(tmp_path))
    logger.on_result(make_result(timesteps_total=np.int64(400), nan_value=float("nan")))
    logger.close()
    writer = FakeWriter.instances[-1]
    scalars = {tag: (value, step) for tag, value, step in writer.scalars}
    assert scalars["ray/tune/episode_reward_mean"] == (1.5, 400)
    assert "ray/tune/info/learner/default_policy/learner_stats/total_loss" in scalars
    assert "ray/tune/nan_value" not in scalars
    assert not any("config" in tag for tag in scalars)
    assert ("ray/tune/hist_stats/episode_reward", [1.0, 2.0], 400) in writer.histograms
    assert writer.closed


def test_tbx_logger_uses_training_iteration_without_timesteps(tmp_path, monkeypatch):
    monkeypatch.setattr(logger_module, "summary_writer_class", lambda: FakeWriter)
    logger = TBXLogger({}, str(tmp_path))
    logger.on_result({"training_iteration": 7, "x": 1.0})
    assert FakeWriter.instances[-1].scalars == [("ray/tune/x", 1.0, 7)]


def test_tbx_logger_is_a_no_op_without_tensorboard(tmp_path, monkeypatch):
    monkeypatch.setattr(logger_module, "summary_writer_class", lambda: None)
    logger = TBXLogger({}, str(tmp_path))
    logger.on_result(make_result())
    logger.flush()
    logger.close()


@pytest.mark.parametrize("available", [True, False])
def test_unified_logger_fans_out(tmp_path, monkeypatch, available):
    writer = FakeWriter if available else None
    monkeypatch.setattr(logger_module, "summary_writer_class", lambda: writer)
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
