import json
import os
import pickle
from pathlib import Path

import pytest

from corral.tune import CheckpointError, Trainable
from corral.tune.result import default_results_dir
from corral.tune.trainable import CHECKPOINT_METADATA_FILE, checkpoint_folder


@pytest.fixture(autouse=True)
def results_dir(tmp_path_factory, monkeypatch):
    path = tmp_path_factory.mktemp("results")
    monkeypatch.setenv("CORRAL_RESULTS_DIR", str(path))
    return path


class Counter(Trainable):
    """Counts by ``config["increment"]``; saves its count to a file it names."""

    def setup(self, config):
        self.count = config.get("start", 0)
        self.cleanups = 0
        config["mutated"] = True  # must not leak into self.config
        self.config = dict(self.config, completed_in_setup=True)

    def step(self):
        self.count += self.config.get("increment", 1)
        return {"count": self.count, "timesteps_this_iter": 10, "episodes_this_iter": 2}

    def save_checkpoint(self, checkpoint_dir):
        path = os.path.join(checkpoint_dir, "state", "count.json")
        os.makedirs(os.path.dirname(path))
        with open(path, "w") as f:
            json.dump({"count": self.count}, f)
        return path

    def load_checkpoint(self, checkpoint):
        with open(checkpoint) as f:
            self.count = json.load(f)["count"]

    def cleanup(self):
        self.cleanups += 1


class DictCounter(Counter):
    def save_checkpoint(self, checkpoint_dir):
        return {"count": self.count}

    def load_checkpoint(self, checkpoint):
        assert isinstance(checkpoint, dict)
        self.count = checkpoint["count"]


class DirCounter(Counter):
    def save_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "count.txt"), "w") as f:
            f.write(str(self.count))

    def load_checkpoint(self, checkpoint):
        with open(os.path.join(checkpoint, "count.txt")) as f:
            self.count = int(f.read())


class FailingSave(Counter):
    def save_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "partial"), "w") as f:
            f.write("half")
        raise RuntimeError("disk full")


def test_default_logdir_is_under_results_dir(results_dir):
    trainable = Counter()
    assert default_results_dir() == str(results_dir)
    assert os.path.dirname(trainable.logdir) == str(results_dir)
    assert os.path.basename(trainable.logdir).startswith("Counter_")
    trainable.stop()


def test_train_fills_automatic_keys():
    trainable = Counter({"increment": 2})
    first = trainable.train()
    second = trainable.train()
    trainable.stop()
    assert second["count"] == 4
    assert (first["training_iteration"], second["training_iteration"]) == (1, 2)
    assert (first["timesteps_total"], second["timesteps_total"]) == (10, 20)
    assert second["episodes_total"] == 4
    assert second["done"] is False
    assert second["time_total_s"] >= second["time_this_iter_s"] >= 0
    assert second["config"] is trainable.config
    for key in ("timestamp", "date", "pid", "hostname", "node_ip", "experiment_id"):
        assert key in second
    assert second["iterations_since_restore"] == 2
    assert trainable.iteration == trainable.training_iteration == 2


def test_keys_set_by_step_are_kept():
    class Reporting(Counter):
        def step(self):
            return {"timesteps_total": 1234, "done": True, "time_this_iter_s": 5.0}

    trainable = Reporting()
    result = trainable.train()
    result = trainable.train()
    trainable.stop()
    assert result["timesteps_total"] == 1234 and result["done"] is True
    assert result["time_total_s"] == 10.0


def test_setup_gets_a_copy_and_params_json_shows_the_completed_config():
    config = {"start": 5}
    trainable = Counter(config)
    trainable.stop()
    assert "mutated" not in trainable.config and config == {"start": 5}
    params = json.loads(Path(trainable.logdir, "params.json").read_text())
    assert params == {"start": 5, "completed_in_setup": True}


def test_step_must_return_a_dict():
    class Bad(Counter):
        def step(self):
            return 3

    trainable = Bad()
    with pytest.raises(TypeError, match=r"Bad.step\(\) must return a dict.*int"):
        trainable.train()
    trainable.stop()


def test_results_are_logged_to_the_logdir():
    trainable = Counter()
    trainable.train()
    trainable.train()
    trainable.stop()
    lines = Path(trainable.logdir, "result.json").read_text().splitlines()
    assert [json.loads(line)["count"] for line in lines] == [1, 2]
    header = Path(trainable.logdir, "progress.csv").read_text().splitlines()[0]
    assert "count" in header and "config" not in header


@pytest.mark.parametrize("cls", [Counter, DictCounter, DirCounter])
def test_save_then_restore_in_a_fresh_instance_continues(cls, monkeypatch):
    trainable = cls({"increment": 3})
    trainable.train()
    trainable.train()
    path = trainable.save()
    trainable.stop()
    folder = checkpoint_folder(path)
    assert folder == os.path.join(trainable.logdir, "checkpoint_000002")
    assert os.path.isfile(os.path.join(folder, CHECKPOINT_METADATA_FILE))

    def refuse(*args, **kwargs):
        raise AssertionError("restore must not unpickle")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    fresh = cls({"increment": 3})
    fresh.restore(path)
    assert fresh.count == 6 and fresh.iteration == 2
    result = fresh.train()
    fresh.stop()
    assert result["count"] == 9
    assert result["training_iteration"] == 3
    assert result["timesteps_total"] == 30 and result["episodes_total"] == 6
    assert result["iterations_since_restore"] == 1
    assert result["experiment_id"] == trainable._experiment_id


def test_save_places_checkpoint_in_given_parent_and_restore_accepts_a_file_inside(tmp_path):
    trainable = Counter()
    trainable.train()
    path = trainable.save(str(tmp_path / "ckpts"))
    trainable.stop()
    # Ray Tune 1.13's return value: the path save_checkpoint returned, moved in place.
    assert path == str(tmp_path / "ckpts" / "checkpoint_000001" / "state" / "count.json")
    for restore_from in (path, checkpoint_folder(path)):
        fresh = Counter()
        fresh.restore(restore_from)
        fresh.stop()
        assert fresh.count == 1 and fresh.iteration == 1


def test_save_replaces_an_existing_checkpoint_and_leaves_nothing_else(tmp_path):
    trainable = Counter()
    trainable.train()
    first = trainable.save(str(tmp_path))
    trainable.count = 100
    second = trainable.save(str(tmp_path))
    trainable.stop()
    assert first == second
    assert os.listdir(tmp_path) == ["checkpoint_000001"]
    fresh = Counter()
    fresh.restore(second)
    fresh.stop()
    assert fresh.count == 100


def test_failed_save_leaves_no_checkpoint_and_no_temporary_dir(tmp_path):
    trainable = FailingSave()
    trainable.train()
    before = sorted(os.listdir(trainable.logdir))
    with pytest.raises(RuntimeError, match="disk full"):
        trainable.save()
    with pytest.raises(RuntimeError, match="disk full"):
        trainable.save(str(tmp_path / "elsewhere"))
    trainable.stop()
    assert sorted(os.listdir(trainable.logdir)) == before
    assert os.listdir(tmp_path / "elsewhere") == []


def test_failed_save_keeps_the_previous_checkpoint(tmp_path):
    trainable = Counter()
    trainable.train()
    path = checkpoint_folder(trainable.save(str(tmp_path)))
    trainable.__class__ = FailingSave
    with pytest.raises(RuntimeError):
        trainable.save(str(tmp_path))
    trainable.stop()
    assert os.listdir(tmp_path) == ["checkpoint_000001"]
    assert os.path.isfile(os.path.join(path, "state", "count.json"))


@pytest.mark.parametrize(
    ("saved", "error", "match"),
    [
        ("/somewhere/else", ValueError, "outside the checkpoint_dir"),
        ({"obj": object()}, TypeError, "not JSON-serialisable"),
        (42, TypeError, "path, a dict or None"),
    ],
)
def test_bad_save_checkpoint_return_values_are_rejected(tmp_path, saved, error, match):
    class Bad(Counter):
        def save_checkpoint(self, checkpoint_dir):
            return saved

    trainable = Bad()
    with pytest.raises(error, match=match):
        trainable.save(str(tmp_path))
    trainable.stop()
    assert os.listdir(tmp_path) == []


def saved_checkpoint(tmp_path, cls=Counter):
    trainable = cls()
    trainable.train()
    path = checkpoint_folder(trainable.save(str(tmp_path)))
    trainable.stop()
    return path


def test_restore_of_missing_metadata_names_the_file(tmp_path):
    path = saved_checkpoint(tmp_path)
    os.remove(os.path.join(path, CHECKPOINT_METADATA_FILE))
    with pytest.raises(CheckpointError, match=CHECKPOINT_METADATA_FILE + " not found"):
        Counter().restore(path)


@pytest.mark.parametrize(
    "content", ['{"iteration": 1, "checkp', "[1, 2]", '{"iteration": "1"}', "\xff"]
)
def test_restore_of_corrupted_metadata_names_the_file(tmp_path, content):
    path = saved_checkpoint(tmp_path)
    metadata = os.path.join(path, CHECKPOINT_METADATA_FILE)
    with open(metadata, "w", encoding="latin-1") as f:
        f.write(content)
    with pytest.raises(CheckpointError, match=metadata):
        Counter().restore(path)


def test_restore_of_truncated_dict_state_names_the_file(tmp_path):
    path = saved_checkpoint(tmp_path, DictCounter)
    state = os.path.join(path, "checkpoint_state.json")
    with open(state, "w") as f:
        f.write('{"count": ')
    trainable = DictCounter()
    with pytest.raises(CheckpointError, match=state):
        trainable.restore(path)
    assert trainable.iteration == 0  # nothing restored from a bad checkpoint


def test_restore_of_nonexistent_path_raises(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        Counter().restore(str(tmp_path / "nope"))


def test_stop_is_idempotent_and_ends_training():
    trainable = Counter()
    trainable.train()
    trainable.stop()
    trainable.stop()
    assert trainable.cleanups == 1
    with pytest.raises(RuntimeError, match="stopped Counter"):
        trainable.train()


def test_failing_setup_closes_the_logger(tmp_path):
    from corral.tune.logger import JsonLogger

    loggers = []

    def creator(config):
        loggers.append(JsonLogger(config, str(tmp_path)))
        return loggers[-1]

    class BadConfig(Counter):
        def setup(self, config):
            raise ValueError("unknown key 'lrr'")

    with pytest.raises(ValueError, match="lrr"):
        BadConfig(logger_creator=creator)
    assert loggers[0]._file.closed


def test_defaults_of_the_base_class():
    trainable = Counter()
    trainable.stop()
    assert trainable.trial_name == "default" and trainable.trial_id == "default"
    assert trainable.get_config() is trainable.config
    assert Counter.default_resource_request({}) is None
    with pytest.raises(NotImplementedError, match="cannot export"):
        trainable.export_model("model")


def test_logger_creator_is_used(tmp_path):
    from corral.tune.logger import JsonLogger

    created = []

    def creator(config):
        created.append(config)
        return JsonLogger(config, str(tmp_path / "mine"))

    trainable = Counter({"start": 1}, logger_creator=creator)
    trainable.stop()
    assert created == [{"start": 1}]
    assert trainable.logdir == str(tmp_path / "mine")


def test_save_to_object_and_restore_from_object(tmp_path):
    import io
    import tarfile

    source = Counter({"increment": 3})
    source.train()
    source.train()
    obj = source.save_to_object()
    assert isinstance(obj, bytes)
    target = Counter({"increment": 3})
    target.restore_from_object(obj)
    assert target.count == 6 and target.iteration == 2
    assert target.train()["count"] == 9

    def archive(*entries):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            for name, kind in entries:
                info = tarfile.TarInfo(name)
                if kind == "link":
                    info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
                    tar.addfile(info)
                else:
                    tar.addfile(info, io.BytesIO(b""))
        return buffer.getvalue()

    for entries, problem in [
        ([("checkpoint_000001/../../evil", "file")], "outside one checkpoint folder"),
        ([("checkpoint_000001/link", "link")], "a link or device"),
        ([("a/x", "file"), ("b/y", "file")], "outside one checkpoint folder"),
    ]:
        with pytest.raises(CheckpointError, match=problem):
            target.restore_from_object(archive(*entries))
    with pytest.raises(CheckpointError, match="not an archive"):
        target.restore_from_object(b"not a tar")
    assert not os.path.exists(tmp_path / "evil")
