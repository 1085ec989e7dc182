"""LZ4 compression of observations, row by row (`compress_observations`).

Image observations dominate the memory of a replay buffer; most of their
bytes compress several-fold with LZ4 at a cost far below a forward pass. Rows
are compressed one by one (not the whole column) so that a replay buffer can
store, overwrite and sample single transitions without touching the others.

A packed row is `bytes`: a short header (magic, dtype, shape) then the LZ4
block of the raw array bytes. The header makes `unpack` self-contained (no
pickle: a packed row can come from another process or a checkpoint and is
never executed). A packed column is a 1-D numpy array of dtype object whose
items are packed rows.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from corral.utils.keyword_aliases import keyword_aliases

try:
    import lz4.block as _lz4_block
except ImportError:  # pragma: no cover - lz4 is a required dependency
    _lz4_block = None

# Marks corral's packed rows, so `is_compressed` never mistakes other bytes for one.
_MAGIC = b"CLZ4"
_HEADER = struct.Struct("<4sB")  # magic, length of the dtype string
_DIM = struct.Struct("<q")


def _require_lz4() -> Any:
    if _lz4_block is None:
        raise ImportError(
            "compress_observations needs the `lz4` package (a dependency of corral): "
            "pip install 'lz4>=4.0'."
        )
    return _lz4_block


@keyword_aliases(data="array")
def pack(array: Any) -> bytes:
    """One array (e.g. one observation) as LZ4-compressed bytes with its dtype and shape
    (`data`: RLlib 1.13's name of `array`)."""
    lz4_block = _require_lz4()
    arr = np.asarray(array)  # not ascontiguousarray: it turns 0-d arrays into 1-d ones
    if arr.dtype == object:
        raise TypeError("pack() compresses numeric arrays only, got an array of dtype object.")
    dtype = arr.dtype.str.encode("ascii")
    header = _HEADER.pack(_MAGIC, len(dtype)) + dtype + bytes([arr.ndim])
    header += b"".join(_DIM.pack(d) for d in arr.shape)
    return header + lz4_block.compress(arr.tobytes(order="C"), store_size=True)


def unpack(data: bytes) -> np.ndarray:
    """The array `pack` compressed into `data` (a new, writable array)."""
    lz4_block = _require_lz4()
    if not is_compressed(data):
        raise ValueError("unpack() got bytes that pack() did not produce (no corral header).")
    view = memoryview(data)
    _, dtype_len = _HEADER.unpack_from(view, 0)
    offset = _HEADER.size
    dtype = np.dtype(bytes(view[offset : offset + dtype_len]).decode("ascii"))
    offset += dtype_len
    ndim = view[offset]
    offset += 1
    shape = tuple(_DIM.unpack_from(view, offset + i * _DIM.size)[0] for i in range(ndim))
    offset += ndim * _DIM.size
    raw = lz4_block.decompress(view[offset:])
    return np.frombuffer(bytearray(raw), dtype=dtype).reshape(shape)


def pack_column(column: Any) -> np.ndarray:
    """Each row of `column` packed on its own: a 1-D object array of `bytes`.

    A column that is already packed is returned as it is, so packing twice is harmless.
    """
    if is_compressed(column):
        return column
    arr = np.asarray(column)
    out = np.empty(len(arr), dtype=object)
    for i in range(len(arr)):
        out[i] = pack(arr[i])
    return out


def unpack_column(column: Any) -> np.ndarray:
    """The stacked rows of a packed column (`[n, *row_shape]`); other columns pass through."""
    if not is_compressed(column):
        return column
    if len(column) == 0:
        return np.zeros(0, np.float32)
    return np.stack([unpack(row) for row in column])


@keyword_aliases(data="value")
def is_compressed(value: Any) -> bool:
    """Whether `value` (RLlib 1.13: `data`) is a packed row (bytes) or a packed column
    (object array of them)."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value[: len(_MAGIC)]) == _MAGIC
    if isinstance(value, np.ndarray) and value.dtype == object and value.ndim == 1:
        return len(value) > 0 and isinstance(value[0], bytes) and value[0][:4] == _MAGIC
    return False


# The columns `compress_observations` compresses (RLlib's choice: the observations
# are the large ones; actions, rewards and flags are a few bytes per row).
COMPRESSED_COLUMNS = ("obs", "new_obs")


def compress_batch(batch: Any, columns: tuple[str, ...] = COMPRESSED_COLUMNS) -> Any:
    """Packs `columns` of a `SampleBatch` (or of each policy batch of a
    `MultiAgentBatch`) in place and returns the batch."""
    policy_batches = getattr(batch, "policy_batches", None)
    for sub in policy_batches.values() if policy_batches is not None else [batch]:
        for key in columns:
            if key in sub:
                sub[key] = pack_column(sub[key])
    return batch


def decompress_batch(batch: Any, columns: tuple[str, ...] = COMPRESSED_COLUMNS) -> Any:
    """Unpacks the packed ones of `columns` in place (a no-op for plain batches)."""
    policy_batches = getattr(batch, "policy_batches", None)
    for sub in policy_batches.values() if policy_batches is not None else [batch]:
        for key in columns:
            if key in sub and is_compressed(sub[key]):
                sub[key] = unpack_column(sub[key])
    return batch


def compression_supported() -> bool:
    """Whether ``lz4`` (which :func:`pack` needs) is installed."""
    return _lz4_block is not None


def pack_if_needed(data: Any) -> Any:
    """:func:`pack` for a numpy array; anything else unchanged (RLlib's helper)."""
    return pack(data) if isinstance(data, np.ndarray) else data


def unpack_if_needed(data: Any) -> Any:
    """:func:`unpack` for a packed row; anything else unchanged."""
    if isinstance(data, (bytes, bytearray)) and is_compressed(data):
        return unpack(data)
    return data
