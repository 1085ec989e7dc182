"""`DatasetWriter`: sampled steps written through Ray Data (``output="dataset"``).

RLlib 1.13's Ray Data output: ``output="dataset"`` with ``output_config={"format": "json" |
"parquet", "path": <folder>, "max_num_samples_per_file": <n>}``. The writer buffers the
batches it is given and, once it holds ``max_num_samples_per_file`` of them (default
100000; RLlib 1.13's rule: a "sample" is one `write()`'s batch, whatever its length),
writes their steps as one file into ``path`` with Ray Data (``write_json`` /
``write_parquet``); `close()` (the worker's `stop()`) writes what is left, which RLlib
1.13 dropped. Ray (``ray[data]``) is needed.

The files are read back by ``input="dataset"`` (one step per row) and by the file readers:
Parquet files use `ParquetWriter`'s layout (row shapes in the ``corral.shapes`` metadata,
so `ParquetReader` reads them too); each JSON line is a one-step RLlib record
(``{"type": "SampleBatch", <column>: [<value>], ...}``), so `JsonReader` reads them too.
Multi-agent batches are refused (``input="dataset"`` reads single-agent steps): write
them with ``output=<folder>`` instead.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from corral.offline.columns import batch_to_json
from corral.offline.input_reader import SampleBatchType
from corral.offline.io_context import IOContext
from corral.offline.json_writer import local_output_dir
from corral.offline.output_writer import OutputWriter
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch, concat_samples

logger = logging.getLogger(__name__)

DEFAULT_MAX_NUM_SAMPLES_PER_FILE = 100000


def _ray_data() -> Any:
    try:
        import ray.data
    except ImportError as err:
        raise ImportError(
            "output='dataset' writes through Ray Data and needs Ray: pip install 'corral[ray]'."
        ) from err
    return ray.data


class DatasetWriter(OutputWriter):
    """Writes sampled steps as JSON or Parquet files through Ray Data (RLlib 1.13's
    `DatasetWriter`; see the module docstring for the layout).

    Args:
        ioctx: the worker's IO context; its ``output_config`` holds ``format``
            ("json" or "parquet"), ``path`` (the output folder, created if missing) and
            ``max_num_samples_per_file`` (batches, i.e. `write()` calls, per file).
        compress_columns: accepted for RLlib's signature; the dataset files are not
            compressed per column (Parquet compresses every column itself, and the JSON
            rows stay plain so that Ray Data can read them).
    """

    def __init__(self, ioctx: IOContext | None = None, compress_columns: Any = None) -> None:
        self.ioctx = ioctx or IOContext()
        config = self.ioctx.output_config or {}
        fmt = config.get("format", "json")
        if fmt not in ("json", "parquet"):
            raise ValueError(
                f"output='dataset': output_config['format']={fmt!r}, expected 'json' or 'parquet'."
            )
        if "path" not in config:
            raise ValueError(
                "output='dataset' needs output_config={'format': 'json' or 'parquet', "
                f"'path': <folder>}}, got {config!r}."
            )
        limit = config.get("max_num_samples_per_file", DEFAULT_MAX_NUM_SAMPLES_PER_FILE)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(
                "output_config['max_num_samples_per_file'] must be a positive number of "
                f"batches (write() calls) per file, got {limit!r}."
            )
        _ray_data()
        self.format: str = fmt
        self.path = local_output_dir(config["path"], "output_config['path']")
        self.max_num_samples_per_file: int = limit
        self.compress_columns = compress_columns
        self.samples: list[SampleBatch] = []

    def write(self, sample_batch: SampleBatchType) -> None:
        if isinstance(sample_batch, MultiAgentBatch):
            raise ValueError(
                "output='dataset' writes single-agent steps (input='dataset' reads them); "
                "write multi-agent batches with output=<folder> (output_config={'format': "
                "'parquet'} for Parquet)."
            )
        # An empty batch counts too (RLlib 1.13 counted every write); it adds no rows.
        self.samples.append(sample_batch)
        if len(self.samples) >= self.max_num_samples_per_file:
            self._flush()

    def close(self) -> None:
        """Writes the buffered batches (a last file holding fewer of them)."""
        if self.samples:
            self._flush()

    def _flush(self) -> None:
        """Writes the buffered batches' steps as one file and empties the buffer."""
        batches = [b for b in self.samples if b.count]
        n = len(self.samples)
        self.samples = []
        if not batches:
            return
        data = _ray_data()
        rows = concat_samples(batches) if len(batches) > 1 else batches[0]
        if self.format == "parquet":
            from corral.offline.parquet import batch_to_table

            ds = data.from_arrow(batch_to_table(rows))
            ds.repartition(1).write_parquet(self.path)
        else:
            records = [
                json.loads(batch_to_json(rows.slice(i, i + 1), ())) for i in range(rows.count)
            ]
            data.from_items(records).repartition(1).write_json(self.path)
        logger.info("Wrote %d batches (%d steps) to %s (%s)", n, rows.count, self.path, self.format)
