"""The file layer of checkpoints: manifest, atomic placement, safe reads.

Whatever a checkpoint holds (see `corral.utils.checkpoints` for a trainer's
layout), these rules apply to every file in it:

* **Manifest.** `manifest.json` lists the format version, corral's version, the
  algorithm, and each file's size and SHA-256. `verify_manifest` checks all of
  it before anything else is read: a flipped byte, a truncated or swapped file,
  an added file or a path leading out of the checkpoint is a `CheckpointError`
  naming the file. A checkpoint written before manifests existed loads with a
  warning.
* **Atomic placement.** A checkpoint is written into a temporary sibling
  folder, every file and the folder are fsynced, and only then is it moved onto
  the target path: by one `rename` when the path is free, by an atomic exchange
  of the two folders (Linux `renameat2(RENAME_EXCHANGE)`) when an older
  checkpoint is there. At every instant the path holds the previous complete
  checkpoint or the new one. Temporary folders left by a killed save are
  removed by the next save into the same parent.
* **Reads stay inside.** Paths named by a checkpoint's own files are resolved
  with `corral.utils.checkpoints.inside`, which refuses anything that leaves the checkpoint folder.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import hashlib
import os
import re
import shutil
import sys
import tempfile
import uuid
import warnings

# `inside` and `read_json` live with the rest of checkpoint persistence; imported here
# (and so still importable from here) for the manifest's checks.
from corral.utils.checkpoints import inside, read_json, write_json
from corral.utils.error import CheckpointError

MANIFEST = "manifest.json"
MANIFEST_FORMAT_VERSION = 1

_TMP_MARK = ".tmp-"
_OLD_MARK = ".old-"
# `.<target name>.tmp-<pid>-<random>`: the pid tells a later save whether the
# folder's writer is still alive (a concurrent save) or was killed (stale).
_TEMP_NAME = re.compile(r"^\..+\.(?:tmp|old)-(\d+)-[0-9a-z_]+$")
# Temporary folders of saves running in this process (other threads' included).
_in_progress: set[str] = set()


# -- manifest ---------------------------------------------------------------------------


def write_manifest(checkpoint_dir: str, algorithm: str) -> None:
    """Writes `manifest.json` describing every file now under `checkpoint_dir`."""
    from corral import __version__

    files = {}
    for relative in _files_under(checkpoint_dir):
        if relative == MANIFEST:
            continue
        path = os.path.join(checkpoint_dir, relative)
        files[relative] = {"size": os.path.getsize(path), "sha256": _sha256(path)}
    manifest = {
        "format_version": MANIFEST_FORMAT_VERSION,
        "corral_version": __version__,
        "algorithm": algorithm,
        "files": files,
    }
    write_json(os.path.join(checkpoint_dir, MANIFEST), manifest, indent=1, sort_keys=True)


def verify_manifest(checkpoint_dir: str) -> dict | None:
    """Checks every file of the checkpoint against its manifest; returns the manifest.

    Returns:
        The manifest, or None for a checkpoint written before manifests existed
        (with a warning: its files cannot be checked).

    Raises:
        CheckpointError: the manifest is malformed, or a file is missing, has
            another size or hash, is not listed, or lies outside the folder.
    """
    manifest_path = os.path.join(checkpoint_dir, MANIFEST)
    if not os.path.exists(manifest_path):
        warnings.warn(
            f"Checkpoint {checkpoint_dir} has no {MANIFEST} (written before corral checked "
            "checkpoints): its files are loaded without an integrity check. Save it again "
            "to add one.",
            UserWarning,
            stacklevel=3,
        )
        return None
    manifest = read_json(manifest_path, "the checkpoint's manifest")
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or not isinstance(manifest.get("format_version"), int):
        raise CheckpointError(
            f"{manifest_path} is not a checkpoint manifest: expected a JSON object with an "
            "integer 'format_version' and a 'files' mapping of path -> {size, sha256}."
        )
    if manifest["format_version"] > MANIFEST_FORMAT_VERSION:
        raise CheckpointError(
            f"{manifest_path} has format version {manifest['format_version']}; this corral "
            f"reads up to {MANIFEST_FORMAT_VERSION}: upgrade corral to load it."
        )
    for relative, entry in files.items():
        path = inside(checkpoint_dir, relative, manifest_path)
        if not isinstance(entry, dict) or not {"size", "sha256"} <= set(entry):
            raise CheckpointError(
                f"{manifest_path}: the entry of {relative!r} must be {{size, sha256}}."
            )
        if not os.path.isfile(path) or os.path.islink(path):
            raise CheckpointError(
                f"{path} is missing (the manifest lists it: expected a file of "
                f"{entry['size']} bytes)."
            )
        size = os.path.getsize(path)
        if size != entry["size"]:
            raise CheckpointError(
                f"{path} is {size} bytes, but the manifest says {entry['size']}: the file is "
                "truncated or was changed after the checkpoint was written."
            )
        if _sha256(path) != entry["sha256"]:
            raise CheckpointError(
                f"{path} does not match its SHA-256 in the manifest: the file is corrupted or "
                "was changed after the checkpoint was written."
            )
    unlisted = sorted(set(_files_under(checkpoint_dir)) - set(files) - {MANIFEST})
    if unlisted:
        raise CheckpointError(
            f"{os.path.join(checkpoint_dir, unlisted[0])} is not in the manifest "
            f"({manifest_path}): files added to a checkpoint after it was written are "
            f"refused (unlisted: {unlisted})."
        )
    return manifest


def _files_under(directory: str) -> list[str]:
    out = []
    for root, dirs, names in os.walk(directory):
        dirs.sort()
        for name in sorted(names):
            out.append(os.path.relpath(os.path.join(root, name), directory).replace(os.sep, "/"))
    return out


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# -- atomic placement -------------------------------------------------------------------


def make_temp_dir(target: str) -> str:
    """A new temporary sibling folder of `target` to build a checkpoint in.

    Stale temporary folders of earlier, killed saves into the same parent are
    removed first.
    """
    parent, name = os.path.split(target)
    os.makedirs(parent, exist_ok=True)
    remove_stale_temp_dirs(parent)
    tmp_dir = tempfile.mkdtemp(prefix=f".{name}{_TMP_MARK}{os.getpid()}-", dir=parent)
    _in_progress.add(tmp_dir)
    return tmp_dir


def discard_temp_dir(tmp_dir: str) -> None:
    """Removes a temporary folder of `make_temp_dir` (after a failed or finished save)."""
    _in_progress.discard(tmp_dir)
    shutil.rmtree(tmp_dir, ignore_errors=True)


def remove_stale_temp_dirs(parent: str) -> list[str]:
    """Removes `.<name>.tmp-<pid>-*` / `.old-` folders whose writing process is gone."""
    removed = []
    with contextlib.suppress(FileNotFoundError):
        for entry in os.listdir(parent):
            match = _TEMP_NAME.match(entry)
            path = os.path.join(parent, entry)
            if match and path not in _in_progress and not _pid_alive(int(match.group(1))):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(entry)
    return removed


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # ours, and not in `_in_progress`: left over from a failed save
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def fsync_tree(directory: str) -> None:
    """Flushes every file and folder under `directory` (itself included) to disk."""
    for root, dirs, names in os.walk(directory):
        for name in names:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        for name in dirs:
            _fsync_dir(os.path.join(root, name))
    _fsync_dir(directory)


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. Windows cannot open folders; nothing to flush there
        return
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.EBADF):  # file systems without dir fsync
            raise
    finally:
        os.close(fd)


def move_into_place(tmp_dir: str, target: str) -> None:
    """Moves the complete folder `tmp_dir` onto `target`, atomically.

    `tmp_dir` must already be flushed (`fsync_tree`). Where the platform cannot
    exchange two folders atomically, the old checkpoint is first renamed aside
    (`.<name>.old-<pid>-*`) and renamed back if the second rename fails.
    """
    parent, name = os.path.split(target)
    try:
        os.rename(tmp_dir, target)  # atomic while nothing is at `target`
    except OSError as e:
        if e.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.EISDIR, errno.ENOTDIR):
            raise
        if _exchange(tmp_dir, target):
            shutil.rmtree(tmp_dir, ignore_errors=True)  # now holds the old checkpoint
        else:
            old = os.path.join(parent, f".{name}{_OLD_MARK}{os.getpid()}-{uuid.uuid4().hex[:8]}")
            os.rename(target, old)
            try:
                os.rename(tmp_dir, target)
            except BaseException:
                os.rename(old, target)
                raise
            shutil.rmtree(old, ignore_errors=True)
    _fsync_dir(parent)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: str, b: str) -> bool:
    """Swaps the paths `a` and `b` in one step (Linux >= 3.15); False when unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:  # glibc < 2.28
        return False
    result = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if result == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):  # kernel or file system lacks it
        return False
    raise OSError(err, os.strerror(err), b)
