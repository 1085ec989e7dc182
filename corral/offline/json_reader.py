"""`JsonReader`: batches from JSON-lines experience files (corral's and RLlib's)."""

from __future__ import annotations

import io
import logging
import zipfile
from collections.abc import Iterator
from typing import IO, Any

import numpy as np

from corral.offline.adapt import adapt_batch, postprocess_if_needed
from corral.offline.columns import MalformedRecordError, batch_from_json, batch_from_json_data
from corral.offline.files import expand_inputs
from corral.offline.input_reader import InputReader, SampleBatchType
from corral.offline.io_context import IOContext
from corral.offline.json_writer import WINDOWS_DRIVES

logger = logging.getLogger(__name__)

__all__ = ["WINDOWS_DRIVES", "JsonReader", "from_json_data"]

# Blank lines in a row before a file counts as holding no records.
_MAX_BLANK_LINES = 100


def from_json_data(json_data: Any, worker: Any) -> SampleBatchType:
    """A batch from one parsed JSON record (RLlib 1.13's `from_json_data`).

    Args:
        json_data: the record (a dict with a ``"type"``).
        worker: the `RolloutWorker` the batch is for, or None.
    """
    batch = batch_from_json_data(json_data, "JSON record")
    ioctx = IOContext(worker=worker, config=getattr(worker, "config", {}))
    return adapt_batch(batch, ioctx, "JSON record")


def rng_for(ioctx: IOContext) -> np.random.Generator:
    """The reader's random stream: reproducible per worker when the config has a seed."""
    seed = ioctx.config.get("seed")
    return np.random.default_rng(None if seed is None else [int(seed), ioctx.worker_index])


class JsonReader(InputReader):
    """Reads batches, one per line, from JSON files written by `JsonWriter` or by RLlib.

    Files are read whole, one after the other: the first chosen by the worker's index
    (so parallel workers start on different files), the next ones at random, forever.
    A line that is not a batch record (e.g. the cut-off last line of a writer that
    crashed) is skipped with a warning naming the file, line and fault, once per line, as
    RLlib 1.x's reader skipped corrupt records; `next()` raises `ValueError` when over
    100 lines in a row hold no batch. RLlib's pickled columns are read with a restricted
    unpickler.

    Args:
        inputs: a folder (its ``*.json`` and ``*.zip`` files), a glob, a file, or a list.
        ioctx: the worker's IO context (config, worker, worker index).
    """

    def __init__(self, inputs: Any, ioctx: IOContext | None = None) -> None:
        self.ioctx = ioctx or IOContext()
        self.files = expand_inputs(inputs, (".json", ".zip"))
        self._rng = rng_for(self.ioctx)
        self.cur_file: str | None = None
        self._lines: Iterator[tuple[int, str]] | None = None
        self._skipped: set[str] = set()  # the corrupt lines warned about

    def next(self) -> SampleBatchType:
        blank = 0
        while True:
            if self._lines is None:
                self._open(self._pick_file())
            assert self._lines is not None
            item = next(self._lines, None)
            if item is None:
                self._lines = None
                blank += 1
            else:
                line_no, line = item
                batch = self._parse(line, f"{self.cur_file}, line {line_no}")
                if batch is not None:
                    return batch
                blank += 1
            if blank > _MAX_BLANK_LINES:
                raise ValueError(
                    f"Failed to read a valid experience batch from {self.cur_file}: over "
                    f"{_MAX_BLANK_LINES} lines in a row were blank or corrupt records."
                )

    def read_all_files(self) -> Iterator[SampleBatchType]:
        """Every batch of every file, once, in file order (corrupt lines skipped)."""
        for path in self.files:
            for line_no, line in _lines_of(path):
                batch = self._parse(line, f"{path}, line {line_no}")
                if batch is not None:
                    yield batch

    def _parse(self, line: str, where: str) -> SampleBatchType | None:
        """The line's batch, adapted to the worker; None for a blank line or a corrupt
        record (warned about once). A record that parses but does not fit the worker's
        policies (`adapt_batch`) is an error: that is the config's fault, not the file's."""
        if not line.strip():
            return None
        try:
            batch = batch_from_json(line, where)
        except MalformedRecordError as err:
            if where not in self._skipped:
                self._skipped.add(where)
                logger.warning("Skipping a corrupt experience record: %s", err)
            return None
        return postprocess_if_needed(adapt_batch(batch, self.ioctx, where), self.ioctx)

    def _pick_file(self) -> str:
        worker = self.ioctx.worker
        if self.cur_file is None and worker is not None:
            total = getattr(worker, "num_workers", 0) or 1
            share = self.ioctx.worker_index / total
            return self.files[round((len(self.files) - 1) * share)]
        return self.files[int(self._rng.integers(len(self.files)))]

    def _open(self, path: str) -> None:
        self.cur_file = path
        self._lines = _lines_of(path)


def _lines_of(path: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, line) of a JSON-lines file, or of each file in a zip."""
    if path.endswith(".zip"):
        with zipfile.ZipFile(path) as archive:
            for member in archive.namelist():
                with archive.open(member) as raw:
                    yield from enumerate(_text(io.TextIOWrapper(raw, encoding="utf-8")), 1)
        return
    with open(path, encoding="utf-8") as f:
        yield from enumerate(_text(f), 1)


def _text(f: IO[str]) -> Iterator[str]:
    try:
        yield from f
    except UnicodeDecodeError as err:
        raise MalformedRecordError(f"{getattr(f, 'name', f)}: not UTF-8 text ({err}).") from err
