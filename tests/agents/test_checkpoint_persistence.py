"""`corral.utils.checkpoints`: the folder finder, JSON files, the weights + state pair."""

import os

import numpy as np
import pytest

from corral.utils import checkpoint_files, checkpoints
from corral.utils.checkpoints import (
    TRAINER_STATE,
    find_checkpoint_dir,
    read_json,
    read_json_object,
    read_weights_and_state,
    write_json,
    write_weights_and_state,
)
from corral.utils.error import CheckpointError


def _checkpoint(tmp_path):
    folder = tmp_path / "checkpoint_000003"
    inner = folder / "policies" / "0"
    inner.mkdir(parents=True)
    write_json(str(folder / TRAINER_STATE), {"iteration": 3})
    return folder, inner


def test_find_checkpoint_dir_walks_up_from_a_file_or_folder_inside(tmp_path):
    folder, inner = _checkpoint(tmp_path)
    (inner / "weights.safetensors").write_bytes(b"")
    assert find_checkpoint_dir(str(folder)) == str(folder)
    assert find_checkpoint_dir(inner) == str(folder)
    assert find_checkpoint_dir(str(inner / "weights.safetensors")) == str(folder)


def test_find_checkpoint_dir_names_the_missing_path_and_marker(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        find_checkpoint_dir(str(tmp_path / "nope"))
    with pytest.raises(CheckpointError, match="is not a checkpoint: no trainer_state.json"):
        find_checkpoint_dir(str(tmp_path))
    with pytest.raises(CheckpointError, match=r"\.tune_metadata\.json not found; expected X"):
        find_checkpoint_dir(str(tmp_path), marker=".tune_metadata.json", expected="X")


def test_json_round_trip_numpy_values_and_errors_naming_the_file(tmp_path):
    path = str(tmp_path / "state.json")
    write_json(path, {"a": np.float32(1.5), "b": np.arange(3), "c": object}, sort_keys=True)
    back = read_json(path, "a state")
    assert back["a"] == 1.5 and back["b"] == [0, 1, 2]
    assert isinstance(back["c"], str)  # repr: never an object again
    with pytest.raises(CheckpointError, match=r"missing\.json is missing \(expected a state"):
        read_json(str(tmp_path / "missing.json"), "a state")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="bad.json is not valid JSON"):
        read_json(str(tmp_path / "bad.json"), "a state")
    (tmp_path / "list.json").write_text("[1]")
    with pytest.raises(CheckpointError, match="list.json holds list; expected a state as a JSON"):
        read_json_object(str(tmp_path / "list.json"), "a state")


def test_weights_and_state_pair_round_trips_and_checks(tmp_path):
    state = {"weights": {"w": np.ones((2, 3), np.float32)}, "seq": 4}
    write_weights_and_state(str(tmp_path / "p"), state, weights_file="m.safetensors")
    assert sorted(os.listdir(tmp_path / "p")) == ["m.safetensors", "policy_state.json"]
    back = read_weights_and_state(
        str(tmp_path / "p"), weights_file="m.safetensors", expected_weights=state["weights"]
    )
    assert back["seq"] == 4 and np.array_equal(back["weights"]["w"], state["weights"]["w"])
    with pytest.raises(CheckpointError, match="wrong shapes"):
        read_weights_and_state(
            str(tmp_path / "p"),
            weights_file="m.safetensors",
            expected_weights={"w": np.ones((3, 2))},
        )
    nan = {"weights": {"w": np.full(2, np.nan, np.float32)}}
    write_weights_and_state(str(tmp_path / "n"), nan)
    with pytest.raises(CheckpointError, match="NaN or infinite"):
        read_weights_and_state(str(tmp_path / "n"))
    assert np.isnan(
        read_weights_and_state(str(tmp_path / "n"), check_finite=False)["weights"]["w"]
    ).all()
    with pytest.raises(CheckpointError, match="weights.safetensors is missing"):
        read_weights_and_state(str(tmp_path / "empty"))


def test_old_import_paths_still_work():
    assert checkpoint_files.read_json is checkpoints.read_json
    assert checkpoint_files.inside is checkpoints.inside
    from corral.tune.trainable import CheckpointError as FromTune

    assert FromTune is CheckpointError
