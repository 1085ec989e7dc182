"""Column codecs of the JSON experience files: corral's compressed format and RLlib's.

A batch is one JSON object per line, RLlib 1.x's layout: ``{"type": "SampleBatch",
<column>: <values>, ...}`` or ``{"type": "MultiAgentBatch", "count": <env steps>,
"policy_batches": {<policy id>: {<column>: <values>, ...}}}``. A plain column is a JSON
list. A column named in ``output_compress_columns`` is one string:

- corral writes ``"npy-lz4:" + base64(LZ4 frame(NumPy .npy bytes))``. The ``.npy`` format
  keeps dtype, shape and bytes exactly (a bit-exact round trip) and is read with
  ``allow_pickle=False``: no pickle is involved on either side. Columns NumPy cannot
  store without pickle (dtype object, e.g. ``infos``) are written as plain lists.
- RLlib wrote ``base64(LZ4 frame(pickle of the array))``; those are read with
  :func:`corral.offline.safe_pickle.restricted_loads`, never the stock unpickler.

Plain lists carry no dtype: float lists are read as float32 (corral's batches are
float32 throughout), integer lists as int64, booleans as bool.

The ``infos`` column (one env info dict a row, ``output_config={"store_infos": True}``)
is a JSON list of objects, read back as a list of dicts. Its values are written as JSON
has them: NumPy scalars as Python numbers (bools, strings), NumPy arrays as (nested)
lists, tuples as lists; dict keys must be strings (ints, floats, bools and None are
written as JSON writes them: as strings). Any other value (a set, bytes, an object of
one's own) is refused with a `TypeError` naming its row and key: it is neither
stringified nor pickled.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
from collections.abc import Mapping
from typing import Any, NoReturn

import numpy as np

from corral.offline.safe_pickle import RefusedPickleError, restricted_loads
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch, with_flat_columns

try:
    import lz4.frame as _lz4_frame
except ImportError:  # pragma: no cover - lz4 is a dependency of corral
    _lz4_frame = None

NPY_LZ4_PREFIX = "npy-lz4:"
# The LZ4 frame magic number, base64-encoded: how RLlib's compressed columns begin.
_RLLIB_PREFIX = base64.b64encode(b"\x04\x22\x4d\x18")[:5].decode("ascii")


class MalformedRecordError(ValueError):
    """A line of an experience file is not a batch record; names the file and line."""


def _lz4() -> Any:
    if _lz4_frame is None:
        raise ImportError("Compressed offline columns need the `lz4` package: pip install lz4.")
    return _lz4_frame


def compress_column(array: np.ndarray) -> str:
    """One column as ``npy-lz4:`` text (bit-exact; see the module docstring)."""
    buf = io.BytesIO()
    np.save(buf, np.asarray(array), allow_pickle=False)
    packed = _lz4().compress(buf.getvalue())
    return NPY_LZ4_PREFIX + base64.b64encode(packed).decode("ascii")


def decompress_column(text: str, where: str) -> np.ndarray:
    """The array of a compressed column, corral's format or RLlib's.

    Raises:
        MalformedRecordError: the text is neither format (`where` names the source).
        RefusedPickleError: an RLlib column's pickle names anything but numpy data.
    """
    try:
        if text.startswith(NPY_LZ4_PREFIX):
            raw = _lz4().decompress(base64.b64decode(text[len(NPY_LZ4_PREFIX) :]))
            return np.load(io.BytesIO(raw), allow_pickle=False)
        if text.startswith(_RLLIB_PREFIX):
            raw = _lz4().decompress(base64.b64decode(text))
            value = restricted_loads(raw, where)
            return value if isinstance(value, np.ndarray) else np.asarray(value)
    except RefusedPickleError:
        raise
    except (binascii.Error, RuntimeError, ValueError) as err:
        raise MalformedRecordError(f"{where}: corrupt compressed column: {err}") from err
    raise MalformedRecordError(
        f"{where}: a string where a column was expected, and not a compressed column "
        f"(starts with {text[:16]!r}; expected {NPY_LZ4_PREFIX!r} or RLlib's base64 LZ4)."
    )


def _plain(values: Any) -> Any:
    arr = np.asarray(values)
    if arr.dtype == np.float64:
        return arr.astype(np.float32)
    return arr


def encode_column(name: str, value: Any, compress: bool) -> Any:
    """A column as JSON-ready data: compressed text, or a (nested) list (`infos`: a list
    of JSON objects, see `infos_to_json`)."""
    if name == SampleBatch.INFOS:
        return infos_to_json(value)
    if isinstance(value, np.ndarray):
        if compress and value.dtype != object:
            return compress_column(value)
        return value.tolist()
    return value


def infos_to_json(infos: Any) -> list[Any]:
    """The `infos` column (a list or object array, one info dict a row) as JSON-ready
    rows: NumPy scalars as Python numbers, NumPy arrays and tuples as lists, the rest
    as it is (see the module docstring).

    Raises:
        TypeError: a value JSON cannot store (a set, bytes, an object of one's own), or a
            dict key that is not a string, number, bool or None; names its row and key.
    """
    return [_json_ready(info, f"row {i}") for i, info in enumerate(infos)]


# (Their subclasses too, e.g. an IntEnum or NumPy's float64: JSON writes them as these.)
_JSON_SCALARS = (str, int, float, bool, type(None))


def _json_ready(value: Any, path: str) -> Any:
    """`value` of an info dict as JSON data (`infos_to_json`); `path` locates it."""
    if isinstance(value, _JSON_SCALARS):
        return value
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "biuf":  # numbers: lists of Python numbers as they are
            return value.tolist()
        return _json_ready(value.tolist(), path)
    if isinstance(value, np.generic):  # a NumPy scalar: its Python value
        item = value.item()
        if isinstance(item, np.generic):  # (no Python value of its own)
            _not_json(value, path)
        return _json_ready(item, path)
    if isinstance(value, Mapping):
        out = {}
        for key, v in value.items():
            k = key.item() if isinstance(key, np.generic) else key
            if not isinstance(k, _JSON_SCALARS):
                raise TypeError(
                    f"The `infos` column's {path} has the key {key!r} ({type(key).__name__}), "
                    "which a JSON object cannot have: expected a str (int, float, bool and "
                    "None keys are written as strings)."
                )
            out[k] = _json_ready(v, f"{path}, key {key!r}")
        return out
    if isinstance(value, list | tuple):
        return [_json_ready(v, f"{path}[{j}]") for j, v in enumerate(value)]
    _not_json(value, path)


def _not_json(value: Any, path: str) -> NoReturn:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    raise TypeError(
        f"The `infos` column's {path} holds {text} (type {type(value).__name__}), which "
        "JSON cannot store: info values written to experience files must be strings, numbers, "
        "bools, None, lists, tuples, dicts or NumPy arrays/scalars. Convert it in the env "
        "(e.g. to a str or a list), or set output_config={'store_infos': False}."
    )


def decode_column(name: str, value: Any, where: str) -> Any:
    """The inverse of `encode_column` (RLlib's compressed columns included)."""
    if isinstance(value, str):
        return decompress_column(value, f"{where}, column {name!r}")
    if name == SampleBatch.INFOS:
        return list(value)
    return _plain(value)


def _json_default(obj: Any) -> Any:
    # RLlib's SafeFallbackEncoder: numpy scalars as numbers, anything else as its str().
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return str(obj)


def batch_to_json(batch: SampleBatch | MultiAgentBatch, compress_columns: Any) -> str:
    """One batch as one JSON line (without the newline), RLlib 1.x's record layout."""
    compress = set(compress_columns or ())
    out: dict[str, Any]
    if isinstance(batch, MultiAgentBatch):
        out = {
            "type": "MultiAgentBatch",
            "count": int(batch.count),
            "policy_batches": {
                str(pid): {
                    k: encode_column(k, v, k in compress) for k, v in with_flat_columns(b).items()
                }
                for pid, b in batch.policy_batches.items()
            },
        }
    else:
        # Nested columns (`_disable_action_flattening`'s actions) as flat rows: the files
        # are the same either way; readers nest them again for such a policy.
        out = {"type": "SampleBatch"}
        out.update(
            {k: encode_column(k, v, k in compress) for k, v in with_flat_columns(batch).items()}
        )
    return json.dumps(out, default=_json_default)


def _with_done_columns(columns: dict[str, Any]) -> dict[str, Any]:
    """RLlib 1.x wrote only ``dones``, 2.x ``terminateds``/``truncateds``: fill in the rest."""
    dones = columns.get(SampleBatch.DONES)
    terms = columns.get(SampleBatch.TERMINATEDS)
    if dones is not None and terms is None:
        columns[SampleBatch.TERMINATEDS] = np.asarray(dones, dtype=bool)
        columns.setdefault(SampleBatch.TRUNCATEDS, np.zeros(len(dones), dtype=bool))
    elif terms is not None and dones is None:
        truncs = columns.get(SampleBatch.TRUNCATEDS)
        done = np.asarray(terms, dtype=bool)
        if truncs is not None:
            done = done | np.asarray(truncs, dtype=bool)
        columns[SampleBatch.DONES] = done
    return columns


def _sample_batch(columns: dict[str, Any], where: str) -> SampleBatch:
    decoded = {k: decode_column(k, v, where) for k, v in columns.items()}
    try:
        return SampleBatch(_with_done_columns(decoded))
    except ValueError as err:
        raise MalformedRecordError(f"{where}: {err}") from err


def batch_from_json(line: str | bytes, where: str) -> SampleBatch | MultiAgentBatch:
    """Parses one JSON record (RLlib 1.x/2.x or corral) into a batch.

    Args:
        line: the record's text.
        where: names the source in errors, e.g. ``"out.json, line 7"``.

    Raises:
        MalformedRecordError: not JSON, no known ``type``, or columns of unequal length.
    """
    try:
        data = json.loads(line)
    except json.JSONDecodeError as err:
        raise MalformedRecordError(f"{where}: not a JSON record ({err.msg}).") from err
    return batch_from_json_data(data, where)


def batch_from_json_data(data: Any, where: str) -> SampleBatch | MultiAgentBatch:
    """A batch from an already parsed JSON record (see `batch_from_json`)."""
    if not isinstance(data, dict) or "type" not in data:
        raise MalformedRecordError(f"{where}: a batch record must be an object with a 'type'.")
    data = dict(data)
    kind = data.pop("type")
    if kind == "SampleBatch":
        return _sample_batch(data, where)
    if kind == "MultiAgentBatch":
        policy_batches = data.get("policy_batches")
        if not isinstance(policy_batches, dict) or "count" not in data:
            raise MalformedRecordError(
                f"{where}: a MultiAgentBatch record needs 'count' and 'policy_batches'."
            )
        return MultiAgentBatch(
            {
                pid: _sample_batch(cols, f"{where}, policy {pid!r}")
                for pid, cols in policy_batches.items()
            },
            int(data["count"]),
        )
    raise MalformedRecordError(
        f"{where}: unknown record type {kind!r}; expected 'SampleBatch' or 'MultiAgentBatch'."
    )
