"""Parquet experience files (pyarrow): `ParquetWriter` and `ParquetReader`.

Each written batch is one row group, so a reader returns the batches as they were
written. Numeric and bool columns are stored natively; a column with rows of shape
``(d1, d2, ...)`` is a fixed-size list of the flattened row, its row shape kept in the
schema metadata (``corral.shapes``); columns of Python objects (``infos``) are JSON text
(``infos`` converted as in JSON files: `corral.offline.columns.infos_to_json`).
A multi-agent batch goes to one file per policy (``..._policy-<id>_<n>.parquet``;
metadata ``corral.policy_id``), read back as a `MultiAgentBatch` of that policy.
Parquet compresses every column itself (zstd), so ``output_compress_columns`` is not
used here.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import numpy as np

from corral.offline.adapt import adapt_batch, postprocess_if_needed
from corral.offline.columns import MalformedRecordError, infos_to_json
from corral.offline.files import expand_inputs
from corral.offline.input_reader import InputReader, SampleBatchType
from corral.offline.io_context import IOContext
from corral.offline.json_reader import rng_for
from corral.offline.json_writer import local_output_dir
from corral.offline.output_writer import OutputWriter
from corral.policy.sample_batch import (
    DEFAULT_POLICY_ID,
    MultiAgentBatch,
    SampleBatch,
    with_flat_columns,
)

logger = logging.getLogger(__name__)

_SHAPES = b"corral.shapes"
_JSON_COLUMNS = b"corral.json_columns"
_POLICY = b"corral.policy_id"


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as err:
        raise ImportError(
            "Parquet input/output needs pyarrow: pip install 'corral[parquet]'."
        ) from err
    return pa, pq


def batch_to_table(batch: SampleBatch, policy_id: str = DEFAULT_POLICY_ID) -> Any:
    """One `SampleBatch` as a pyarrow Table (see the module docstring for the layout)."""
    pa, _ = _pyarrow()
    arrays, names, shapes, json_columns = [], [], {}, []
    # Nested columns (`_disable_action_flattening`'s actions) as flat rows, as in JSON.
    for name, value in with_flat_columns(batch).items():
        arr = value if isinstance(value, np.ndarray) else None
        if arr is None or arr.dtype == object:
            json_columns.append(name)
            if name == SampleBatch.INFOS:  # (numpy values as JSON's, others refused)
                items = infos_to_json(value)
            else:
                items = value.tolist() if arr is not None else value
            rows = [json.dumps(v, default=str) for v in items]
            arrays.append(pa.array(rows, type=pa.string()))
        elif arr.ndim > 1:
            shapes[name] = list(arr.shape[1:])
            width = int(np.prod(arr.shape[1:]))
            flat = pa.array(np.ascontiguousarray(arr).reshape(-1))
            arrays.append(pa.FixedSizeListArray.from_arrays(flat, width))
        else:
            arrays.append(pa.array(arr))
        names.append(name)
    metadata = {
        _SHAPES: json.dumps(shapes),
        _JSON_COLUMNS: json.dumps(json_columns),
        _POLICY: policy_id,
    }
    return pa.Table.from_arrays(arrays, names=names, metadata=metadata)


def table_to_batch(table: Any, where: str) -> SampleBatch:
    """The inverse of `batch_to_table`."""
    meta = table.schema.metadata or {}
    try:
        shapes = json.loads(meta.get(_SHAPES, b"{}"))
        json_columns = set(json.loads(meta.get(_JSON_COLUMNS, b"[]")))
    except json.JSONDecodeError as err:
        raise MalformedRecordError(f"{where}: corrupt corral metadata ({err}).") from err
    columns: dict[str, Any] = {}
    for name in table.column_names:
        col = table.column(name).combine_chunks()
        if name in json_columns:
            values = [json.loads(v) for v in col.to_pylist()]
            is_infos = name == SampleBatch.INFOS
            columns[name] = values if is_infos else np.asarray(values, dtype=object)
        elif name in shapes:
            flat = col.flatten().to_numpy(zero_copy_only=False)
            columns[name] = flat.reshape(len(col), *shapes[name])
        else:
            columns[name] = col.to_numpy(zero_copy_only=False)
    return SampleBatch(columns)


class ParquetWriter(OutputWriter):
    """Writes each batch as one row group of ``output-<date>_worker-<i>_<n>.parquet``.

    A new file starts once the current one holds at least `max_file_size` bytes, or
    when a batch brings other columns (a Parquet file has one schema).

    Args:
        path: the output folder (created if missing).
        ioctx: the worker's IO context (its `worker_index` names the files).
        max_file_size: bytes per file before rolling over.
        compression: the Parquet codec ("zstd", "snappy", "none", ...).
    """

    def __init__(
        self,
        path: str,
        ioctx: IOContext | None = None,
        max_file_size: int = 64 * 1024 * 1024,
        compression: str = "zstd",
    ) -> None:
        _pyarrow()
        self.ioctx = ioctx or IOContext()
        self.path = local_output_dir(path, "The Parquet output path")
        self.max_file_size = int(max_file_size)
        self.compression = compression
        self._open: dict[str, tuple[Any, str]] = {}  # policy id -> (pq writer, file path)
        self.file_index = 0

    def write(self, sample_batch: SampleBatchType) -> None:
        if isinstance(sample_batch, MultiAgentBatch):
            for pid, batch in sample_batch.policy_batches.items():
                self._write(str(pid), batch, multi_agent=True)
        else:
            self._write(DEFAULT_POLICY_ID, sample_batch, multi_agent=False)

    def _write(self, pid: str, batch: SampleBatch, multi_agent: bool) -> None:
        _, pq = _pyarrow()
        table = batch_to_table(batch, pid)
        current = self._open.get(pid)
        if current is not None:
            writer, path = current
            full = os.path.getsize(path) >= self.max_file_size
            if full or not writer.schema.equals(table.schema):
                writer.close()
                current = None
        if current is None:
            path = self._new_path(pid if multi_agent else None)
            current = (pq.ParquetWriter(path, table.schema, compression=self.compression), path)
            self._open[pid] = current
        current[0].write_table(table, row_group_size=max(1, table.num_rows))

    def _new_path(self, pid: str | None) -> str:
        stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
        policy = f"_policy-{pid}" if pid is not None else ""
        while True:
            worker = self.ioctx.worker_index
            name = f"output-{stamp}_worker-{worker}{policy}_{self.file_index}.parquet"
            self.file_index += 1
            path = os.path.join(self.path, name)
            if not os.path.exists(path):
                return path

    def close(self) -> None:
        for writer, _ in self._open.values():
            writer.close()
        self._open.clear()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown
            self.close()


class ParquetReader(InputReader):
    """Reads the row groups of Parquet files written by `ParquetWriter`, one batch each.

    Files are visited as `JsonReader` visits its files (first by worker index, then at
    random, forever).

    Args:
        inputs: a folder (its ``*.parquet`` files), a glob, a file, or a list.
        ioctx: the worker's IO context.
    """

    def __init__(self, inputs: Any, ioctx: IOContext | None = None) -> None:
        _pyarrow()
        self.ioctx = ioctx or IOContext()
        self.files = expand_inputs(inputs, (".parquet",))
        self._rng = rng_for(self.ioctx)
        self.cur_file: str | None = None
        self._groups: Iterator[SampleBatchType] | None = None

    def next(self) -> SampleBatchType:
        for _ in range(len(self.files) + 100):
            if self._groups is None:
                self.cur_file = self._pick_file()
                self._groups = self._batches_of(self.cur_file)
            batch = next(self._groups, None)
            if batch is not None:
                return batch
            self._groups = None
        raise ValueError(f"No rows in the Parquet input files {self.files}.")

    def read_all_files(self) -> Iterator[SampleBatchType]:
        """Every batch of every file, once, in file order."""
        for path in self.files:
            yield from self._batches_of(path)

    def _pick_file(self) -> str:
        worker = self.ioctx.worker
        if self.cur_file is None and worker is not None:
            total = getattr(worker, "num_workers", 0) or 1
            return self.files[round((len(self.files) - 1) * self.ioctx.worker_index / total)]
        return self.files[int(self._rng.integers(len(self.files)))]

    def _batches_of(self, path: str) -> Iterator[SampleBatchType]:
        _, pq = _pyarrow()
        try:
            file = pq.ParquetFile(path)
        except Exception as err:  # noqa: BLE001 - pyarrow raises several kinds
            raise MalformedRecordError(f"{path}: not a readable Parquet file ({err}).") from err
        pid = (file.schema_arrow.metadata or {}).get(_POLICY, DEFAULT_POLICY_ID.encode()).decode()
        for i in range(file.num_row_groups):
            where = f"{path}, row group {i}"
            rows = table_to_batch(file.read_row_group(i), where)
            batch: SampleBatchType = (
                rows if pid == DEFAULT_POLICY_ID else MultiAgentBatch({pid: rows}, rows.count)
            )
            batch = adapt_batch(batch, self.ioctx, where)
            yield postprocess_if_needed(batch, self.ioctx)
