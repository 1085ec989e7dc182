"""`JsonWriter`: sampled batches as JSON lines, RLlib 1.x's files and layout."""

from __future__ import annotations

import contextlib
import logging
import os
from datetime import datetime
from typing import IO, Any
from urllib.parse import unquote, urlparse

from corral.offline.columns import batch_to_json
from corral.offline.input_reader import SampleBatchType
from corral.offline.io_context import IOContext
from corral.offline.output_writer import OutputWriter

logger = logging.getLogger(__name__)

# Drive letters, so that "c:/data" is read as a Windows path and not as a URI scheme.
WINDOWS_DRIVES = [chr(i) for i in range(ord("c"), ord("z") + 1)]

DEFAULT_COMPRESS_COLUMNS = frozenset(["obs", "new_obs"])


def local_path_of(path: str) -> str | None:
    """`path` as a local path: itself, or the path of a local `file://` URI (RLlib's
    readers and writers took those); None for another URI (remote storage)."""
    parsed = urlparse(path)
    if parsed.scheme in ("", *WINDOWS_DRIVES):
        return path
    if parsed.scheme == "file" and parsed.netloc in ("", "localhost"):
        return unquote(parsed.path)
    return None


def local_output_dir(path: str, what: str) -> str:
    """`path` (or a `file://` URI) as an absolute local folder (created); other URIs are
    refused (no remote storage)."""
    if not isinstance(path, str) or not path:
        raise ValueError(f"{what} must be a folder path, got {path!r}.")
    local = local_path_of(path)
    if local is None:
        raise ValueError(
            f"{what}={path!r} is a URI; corral writes experiences to local folders only "
            "(mount the remote storage and give its local path)."
        )
    path = os.path.abspath(os.path.expanduser(local))
    os.makedirs(path, exist_ok=True)
    return path


def _to_json(batch: SampleBatchType, compress_columns: Any) -> str:
    """RLlib 1.x's module-level `_to_json`: one batch as its JSON line (no newline), the
    columns in `compress_columns` compressed. Kept for 1.x code that writes files by hand."""
    return batch_to_json(batch, frozenset(compress_columns or ()))


class JsonWriter(OutputWriter):
    """Writes each batch as one JSON line, into ``output-<date>_worker-<i>_<n>.json`` files.

    A new file starts when the next line would take the current one past
    `max_file_size` bytes, so every file stays within it (unless one batch alone is
    larger: that line gets a file of its own). Columns in `compress_columns` are stored
    compressed (``npy-lz4:``, see `corral.offline.columns`).

    Args:
        path: the output folder (created if missing).
        ioctx: the worker's IO context (its `worker_index` names the files).
        max_file_size: bytes per file before rolling over to the next.
        compress_columns: the columns to compress.
    """

    def __init__(
        self,
        path: str,
        ioctx: IOContext | None = None,
        max_file_size: int = 64 * 1024 * 1024,
        compress_columns: Any = DEFAULT_COMPRESS_COLUMNS,
    ) -> None:
        if not isinstance(max_file_size, int | float) or max_file_size < 1:
            raise ValueError(
                f"max_file_size must be a positive number of bytes, got {max_file_size!r}."
            )
        self.ioctx = ioctx or IOContext()
        self.path = local_output_dir(path, "The JSON output path")
        self.max_file_size = int(max_file_size)
        self.compress_columns = frozenset(compress_columns or ())
        self.file_index = 0
        self.bytes_written = 0
        self.cur_file: IO[str] | None = None
        self.cur_path: str | None = None

    def write(self, sample_batch: SampleBatchType) -> None:
        line = batch_to_json(sample_batch, self.compress_columns) + "\n"
        size = len(line.encode("utf-8"))
        if self.cur_file is None or (
            self.bytes_written > 0 and self.bytes_written + size > self.max_file_size
        ):
            self._next_file()
        if size > self.max_file_size:
            logger.warning(
                "One batch (%d bytes) is larger than output_max_file_size (%d): %s holds it alone.",
                size,
                self.max_file_size,
                self.cur_path,
            )
        assert self.cur_file is not None
        self.cur_file.write(line)
        self.cur_file.flush()
        self.bytes_written += size

    def _next_file(self) -> None:
        self.close()
        stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
        while True:
            name = f"output-{stamp}_worker-{self.ioctx.worker_index}_{self.file_index}.json"
            path = os.path.join(self.path, name)
            self.file_index += 1
            try:
                # Exclusive: a second writer of the same worker index in the same second
                # (e.g. an evaluation worker) must not truncate this writer's file.
                self.cur_file = open(path, "x", encoding="utf-8")  # noqa: SIM115 - kept open
            except FileExistsError:
                continue
            break
        self.cur_path = path
        self.bytes_written = 0
        logger.info("Writing experiences to %s", path)

    def close(self) -> None:
        if self.cur_file is not None:
            self.cur_file.close()
            self.cur_file = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown
            self.close()
