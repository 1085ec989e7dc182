"""RLlib's own JSON files (fixtures written by a real RLlib) and the restricted unpickler."""

from __future__ import annotations

import base64
import glob
import json
import os
import pickle

import lz4.frame
import numpy as np
import pytest

from corral.offline import JsonReader
from corral.offline.safe_pickle import RefusedPickleError, restricted_loads
from corral.policy.sample_batch import SampleBatch

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "rllib_json")


def _rllib_pack(obj: object, protocol: int = 5) -> str:
    """RLlib's `pack`: base64 of an LZ4 frame of a pickle."""
    return base64.b64encode(lz4.frame.compress(pickle.dumps(obj, protocol=protocol))).decode()


def _files(kind: str) -> list[str]:
    files = sorted(glob.glob(os.path.join(FIXTURES, kind, "*.json")))
    assert files, f"no RLlib fixtures in {kind}/"
    return files


def test_rllib_compressed_and_plain_files_hold_the_same_kind_of_data():
    for kind in ("compressed", "uncompressed"):
        batches = list(JsonReader(_files(kind)).read_all_files())
        assert len(batches) == 3
        for batch in batches:  # RLlib 2.x writes one-policy MultiAgentBatches
            assert isinstance(batch, SampleBatch) and batch.count >= 100
            assert batch["obs"].shape == (batch.count, 4) and batch["obs"].dtype == np.float32
            assert batch["actions"].dtype == np.int64
            assert set(np.unique(batch["actions"])) <= {0, 1}

            ends = batch["dones"]
            assert ends[-1] and (batch["dones"] == batch["terminateds"] | batch["truncateds"]).all()
            # Within an episode the next observation is the following row's observation.
            same = ~ends[:-1]
            np.testing.assert_array_equal(batch["new_obs"][:-1][same], batch["obs"][1:][same])


def test_rllib_compressed_columns_decode_to_what_rllib_sampled():
    (path,) = _files("compressed")
    with open(path) as f:
        raw = json.loads(f.readline())["policy_batches"]["default_policy"]
    assert isinstance(raw["obs"], str)  # RLlib's base64(lz4(pickle))
    (first, *_) = JsonReader(path).read_all_files()
    # RLlib kept the plain columns of the same batch: the decoded obs fit them.
    assert first.count == len(raw["actions"])
    np.testing.assert_allclose(first["rewards"], np.asarray(raw["rewards"], dtype=np.float32))
    assert np.isfinite(first["obs"]).all() and np.abs(first["obs"][:, 2]).max() < 0.25


def _crafted(marker: str) -> str:
    class Exploit:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    return _rllib_pack(Exploit())


def test_restricted_unpickler_refuses_a_payload_that_would_run_code(tmp_path):
    marker = tmp_path / "pwned"
    record = {"type": "SampleBatch", "obs": _crafted(str(marker)), "actions": [0]}
    path = tmp_path / "evil.json"
    path.write_text(
        json.dumps({"type": "SampleBatch", "actions": [1]}) + "\n" + json.dumps(record) + "\n"
    )
    reader = JsonReader(str(path))
    reader.next()
    with pytest.raises(RefusedPickleError) as err:
        reader.next()
    message = str(err.value)
    assert "evil.json, line 2" in message and "column 'obs'" in message
    assert "posix.system" in message or "os.system" in message
    assert not marker.exists()


@pytest.mark.parametrize(
    "payload",
    [
        ("builtins", "eval"),
        ("subprocess", "Popen"),
        ("numpy", "load"),
        ("copyreg", "_reconstructor"),
        ("numpy.testing", "runstring"),
    ],
)
def test_restricted_unpickler_refuses_other_globals(payload, tmp_path):
    module, name = payload
    data = f"c{module}\n{name}\n(S'x'\ntR.".encode()  # protocol 0: GLOBAL, call with ('x',)
    with pytest.raises(RefusedPickleError, match=rf"here: refused to unpickle `{module}\.{name}`"):
        restricted_loads(data, "here")


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
@pytest.mark.parametrize(
    "value",
    [
        np.arange(12, dtype=np.float32).reshape(3, 4),
        np.array([True, False]),
        np.arange(5)[::2],  # not contiguous
        np.array([{"a": [1, 2]}, None], dtype=object),
        np.float32(2.5),
        {"a": [1, (2, 3)], "b": {4}},
    ],
)
def test_restricted_unpickler_rebuilds_numpy_data(protocol, value):
    back = restricted_loads(pickle.dumps(value, protocol=protocol), "here")
    if isinstance(value, np.ndarray):
        assert back.dtype == value.dtype
        if value.dtype != object:
            np.testing.assert_array_equal(back, value)
        else:
            assert back.tolist() == value.tolist()
    else:
        assert back == value


def test_restricted_unpickler_refuses_out_of_band_buffers():
    data = pickle.dumps(pickle.PickleBuffer(b"abc"), protocol=5, buffer_callback=lambda b: False)
    with pytest.raises(RefusedPickleError, match="not a readable pickle"):
        restricted_loads(data, "here")


def test_rllib_1x_records_with_only_dones_get_terminateds(tmp_path):
    # RLlib 1.x's layout (hand-written here, not RLlib output): `dones`, no terminateds.
    obs = np.arange(6, dtype=np.float32).reshape(3, 2)
    record = {
        "type": "SampleBatch",
        "obs": _rllib_pack(obs, protocol=4),
        "actions": [0, 1, 0],
        "dones": [False, False, True],
        "eps_id": [7, 7, 7],
    }
    path = tmp_path / "old.json"
    path.write_text(json.dumps(record) + "\n")
    batch = JsonReader(str(path)).next()
    np.testing.assert_array_equal(batch["obs"], obs)
    assert batch["terminateds"].tolist() == [False, False, True]
    assert not batch["truncateds"].any()
