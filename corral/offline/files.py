"""Finding the files of an offline input: a folder, a glob, a file, or a list of them."""

from __future__ import annotations

import glob
import os
from typing import Any

from corral.offline.json_writer import local_path_of


def _local(pattern: str) -> str:
    """`pattern`, or the path of a local `file://` URI; other URIs are refused."""
    local = local_path_of(pattern)
    if local is None:
        raise ValueError(
            f"Input {pattern!r} is a URI; corral reads experiences from local files only "
            "(mount the remote storage and give its local path)."
        )
    return local


def expand_inputs(inputs: Any, suffixes: tuple[str, ...]) -> list[str]:
    """The files named by `inputs`: a folder (its files ending in one of `suffixes`), a
    glob pattern, a file, or a list/tuple of those. Sorted within each entry.

    Raises:
        ValueError: `inputs` has another type, names a URI, or matches no file.
    """
    if isinstance(inputs, str | os.PathLike):
        entries = [os.fspath(inputs)]
    elif isinstance(inputs, list | tuple) and all(isinstance(i, str | os.PathLike) for i in inputs):
        entries = [os.fspath(i) for i in inputs]
    else:
        raise ValueError(
            f"Offline input must be a path, glob or list of paths, got {type(inputs).__name__}: "
            f"{inputs!r}."
        )
    files: list[str] = []
    for entry in entries:
        path = os.path.abspath(os.path.expanduser(_local(entry)))
        if os.path.isdir(path):
            found = [
                os.path.join(path, name)
                for name in os.listdir(path)
                if name.endswith(suffixes) and os.path.isfile(os.path.join(path, name))
            ]
        elif glob.has_magic(path):
            found = [p for p in glob.glob(path, recursive=True) if os.path.isfile(p)]
        else:
            found = [path] if os.path.isfile(path) else []
            if not found and isinstance(inputs, list | tuple):
                raise ValueError(f"Offline input file {entry!r} does not exist.")
        files.extend(sorted(found))
    if not files:
        raise ValueError(
            f"No files found matching {inputs!r} (a folder is searched for {suffixes} files)."
        )
    return files
