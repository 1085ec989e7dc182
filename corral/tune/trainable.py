"""``Trainable``: the train/save/restore/stop lifecycle RLlib 1.x's Trainer is built on.

Subclasses fill in ``setup``, ``step``, ``save_checkpoint``, ``load_checkpoint``
and ``cleanup``; this class adds what every trainable needs around them: result
bookkeeping (iteration, time and timestep counters), logging, and checkpoints
that are written atomically and load without unpickling anything.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import platform
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from corral.tune.logger import Logger, UnifiedLogger, to_jsonable
from corral.tune.result import (
    CONFIG,
    DATE,
    DEBUG_METRICS,
    DONE,
    EPISODES_THIS_ITER,
    EPISODES_TOTAL,
    EXPERIMENT_ID,
    HOSTNAME,
    ITERATIONS_SINCE_RESTORE,
    NODE_IP,
    PID,
    RESULT_DUPLICATE,
    SHOULD_CHECKPOINT,
    TIME_SINCE_RESTORE,
    TIME_THIS_ITER_S,
    TIME_TOTAL_S,
    TIMESTAMP,
    TIMESTEPS_SINCE_RESTORE,
    TIMESTEPS_THIS_ITER,
    TIMESTEPS_TOTAL,
    TRAINING_ITERATION,
    TRIAL_ID,
    WARMUP_TIME,
    new_logdir,
)
from corral.utils.error import CheckpointError

# `corral.utils.checkpoint_files` and `checkpoints` (numpy) are imported where a checkpoint
# is saved or read: `import corral.tune` (and `corral --help`) must stay cheap.

logger = logging.getLogger(__name__)

# What results' `node_ip` and `get_current_ip()` give: trials run on this machine.
_LOCAL_IP = "127.0.0.1"

CHECKPOINT_METADATA_FILE = ".tune_metadata.json"
CHECKPOINT_STATE_FILE = "checkpoint_state.json"
_METADATA_VERSION = 1
# What ``save_checkpoint`` returned, recorded so ``restore`` can hand
# ``load_checkpoint`` the same kind of thing.
_KIND_PATH, _KIND_DICT, _KIND_DIR = "path", "dict", "dir"


class ExportFormat:
    """The ``export_formats`` names ``Trainable.export_model`` understands (Ray's)."""

    CHECKPOINT = "checkpoint"
    MODEL = "model"
    ONNX = "onnx"
    H5 = "h5"
    ALL = (CHECKPOINT, MODEL, ONNX, H5)

    @staticmethod
    def validate(formats: Iterable[str]) -> None:
        """Raise ``ValueError`` naming any format that is not one of ``ALL``."""
        unknown = [f for f in formats if f not in ExportFormat.ALL]
        if unknown:
            raise ValueError(f"Unsupported export format(s) {unknown}; expected {ExportFormat.ALL}")


@dataclass(frozen=True)
class TrialInfo:
    """Name, id and resources of the trial a trainable runs as; set by ``tune.run``
    (``trial_resources``: its ``resources_per_trial``, None for the trainable's own
    ``default_resource_request``)."""

    name: str
    trial_id: str
    trial_resources: Any = None


class Trainable:
    """Base class of everything ``tune.run`` can train, including RLlib-style Trainers.

    Args:
        config: hyper-parameters; ``setup`` receives a deep copy.
        logger_creator: ``logger_creator(config) -> Logger``; by default a
            ``UnifiedLogger`` in a new directory under ``default_results_dir()``.
        remote_checkpoint_dir: Ray Tune's cloud folder for checkpoints: checkpoints are
            local here, so only None is taken (``uses_cloud_checkpointing`` is False).
        sync_function_tpl: Ray Tune's sync command template, kept as given; nothing is
            synced (no cloud folder).

    Raises:
        ValueError: a ``remote_checkpoint_dir``.
    """

    def __init__(
        self,
        config: dict | None = None,
        logger_creator: Callable[[dict], Logger] | None = None,
        remote_checkpoint_dir: str | None = None,
        sync_function_tpl: str | None = None,
    ) -> None:
        if remote_checkpoint_dir:
            raise ValueError(
                f"{type(self).__name__}(remote_checkpoint_dir={remote_checkpoint_dir!r}): "
                "corral writes checkpoints locally (no cloud checkpointing); pass None"
            )
        self.remote_checkpoint_dir = remote_checkpoint_dir
        self.sync_function_tpl = sync_function_tpl
        self._start_time = time.time()
        self._warmup_time: float | None = None
        self._local_ip = _LOCAL_IP
        self._last_result: dict = {}
        self.config: dict = config or {}
        # Serialises train/save/restore: from two threads they would interleave
        # their counter updates and state reads.
        self._lock = threading.RLock()
        self._experiment_id = uuid.uuid4().hex
        self._result_logger = (logger_creator or self._create_default_logger)(self.config)
        self._logdir: str = self._result_logger.logdir
        self._iteration = 0
        self._time_total = 0.0
        self._timesteps_total: int | None = None
        self._episodes_total: int | None = None
        self._restored = False
        self._reset_since_restore()
        self._trial_info: TrialInfo | None = None
        self._stopped = False
        try:
            self.setup(copy.deepcopy(self.config))
        except BaseException:
            # A bad config fails here; do not leave the logger's files open.
            self._result_logger.close()
            raise
        # setup() may complete the config (a Trainer merges in its defaults and
        # the env id); params.json should describe the run as it actually ran.
        self._result_logger.update_config(self.config)

    def _create_default_logger(self, config: dict) -> Logger:
        return UnifiedLogger(config, new_logdir(type(self).__name__))

    def _reset_since_restore(self) -> None:
        self._time_since_restore = 0.0
        self._timesteps_since_restore = 0
        self._iterations_since_restore = 0

    # -- methods subclasses override ------------------------------------------------

    def setup(self, config: dict) -> None:
        """Build models, envs, workers. ``config`` is a deep copy of ``self.config``."""

    def step(self) -> dict:
        """Run one iteration of training and return its results."""
        raise NotImplementedError(f"{type(self).__name__} must implement step()")

    def save_checkpoint(self, tmp_checkpoint_dir: str) -> str | dict | None:
        """Write state into ``tmp_checkpoint_dir`` and say what ``load_checkpoint`` needs.

        Return a path inside ``tmp_checkpoint_dir`` (it is handed back, relocated,
        to ``load_checkpoint``), a JSON-serialisable dict (stored as
        ``checkpoint_state.json`` and handed back as a dict: tuples come back as
        lists, non-string keys as strings), or ``None`` (``load_checkpoint``
        then gets the checkpoint directory). ``tmp_checkpoint_dir`` is temporary
        and renamed afterwards: never store absolute paths in the checkpoint.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement save_checkpoint()")

    def load_checkpoint(self, checkpoint: str | dict) -> None:
        """Restore state from what ``save_checkpoint`` returned (paths rebased)."""
        raise NotImplementedError(f"{type(self).__name__} must implement load_checkpoint()")

    def cleanup(self) -> None:
        """Release resources (worker processes, files); called once by ``stop()``."""

    def log_result(self, result: dict) -> None:
        """Hand one result to the result logger; override to alter or redirect it."""
        self._result_logger.on_result(result)

    def _export_model(self, export_formats: list[str], export_dir: str) -> dict[str, str]:
        """Export in each format to ``export_dir``; return ``{format: path}``."""
        raise NotImplementedError(f"{type(self).__name__} cannot export {export_formats}")

    @classmethod
    def default_resource_request(cls, config: dict) -> Any:
        """Resources a trial of this class needs; ``None`` means one CPU."""
        return None

    @classmethod
    def resource_help(cls, config: dict) -> str:
        """Advice on configuring resources, shown when a request cannot be met."""
        return ""

    # -- training -------------------------------------------------------------------

    def train(self) -> dict:
        """Run ``step()`` once, add the automatic result keys, log and return the result.

        Keys ``step()`` already set are kept; missing ones are filled in:
        ``training_iteration``, ``time_this_iter_s``, ``time_total_s``,
        ``timesteps_total`` and ``episodes_total`` (summed from the
        ``*_this_iter`` keys when ``step()`` reports only those), ``done``,
        ``timestamp``, ``date``, ``pid``, ``hostname``, ``node_ip``,
        ``experiment_id``, ``config`` and the ``*_since_restore`` counters.
        """
        with self._lock:
            return self._train()

    def _train(self) -> dict:
        if self._stopped:
            raise RuntimeError(f"train() called on a stopped {type(self).__name__}")
        if self._warmup_time is None:
            self._warmup_time = time.time() - self._start_time
        start = time.monotonic()
        result = self.step()
        if not isinstance(result, dict):
            raise TypeError(
                f"{type(self).__name__}.step() must return a dict of results, "
                f"got {type(result).__name__}: {result!r:.200}"
            )
        result = dict(result)
        time_this_iter = result.get(TIME_THIS_ITER_S)
        if time_this_iter is None:
            time_this_iter = time.monotonic() - start
        self._advance_counters(result, time_this_iter)
        self._fill_automatic_keys(result, time_this_iter)
        self.log_result(result)
        self._last_result = result
        return result

    def train_buffered(self, buffer_time_s: float, max_buffer_length: int = 1000) -> list[dict]:
        """Runs ``train()`` again and again for about ``buffer_time_s`` seconds and returns
        the results (at least one), as Ray Tune 1.13's.

        Stops early after a result that is ``done``, asks for a checkpoint
        (``should_checkpoint``) or is a function trainable's last (``__duplicate__``), or
        once ``max_buffer_length`` results are buffered.
        """
        results: list[dict] = []
        send_at = time.monotonic() + buffer_time_s
        while not results or time.monotonic() < send_at:
            result = self.train()
            results.append(result)
            if (
                result.get(DONE)
                or result.get(SHOULD_CHECKPOINT)
                or result.get(RESULT_DUPLICATE)
                or len(results) >= max_buffer_length
            ):
                break
        return results

    def get_auto_filled_metrics(
        self,
        now: datetime | None = None,
        time_this_iter: float | None = None,
        debug_metrics_only: bool = False,
    ) -> dict:
        """The result keys this trainable fills in itself (Ray Tune 1.13's set): ids,
        date and timestamp of ``now`` (default: now), ``time_this_iter`` and the totals,
        process, host, config, the ``*_since_restore`` counters and ``warmup_time``.
        ``debug_metrics_only``: only those that need no iteration (``DEBUG_METRICS``)."""
        now = now or datetime.today()
        filled = {
            TRIAL_ID: self.trial_id,
            EXPERIMENT_ID: self._experiment_id,
            DATE: now.strftime("%Y-%m-%d_%H-%M-%S"),
            TIMESTAMP: int(now.timestamp()),
            TIME_THIS_ITER_S: time_this_iter,
            TIME_TOTAL_S: self._time_total,
            PID: os.getpid(),
            HOSTNAME: platform.node(),
            NODE_IP: self._local_ip,
            CONFIG: self.config,
            TIME_SINCE_RESTORE: self._time_since_restore,
            TIMESTEPS_SINCE_RESTORE: self._timesteps_since_restore,
            ITERATIONS_SINCE_RESTORE: self._iterations_since_restore,
            WARMUP_TIME: self._warmup_time,
        }
        if debug_metrics_only:
            return {k: v for k, v in filled.items() if k in DEBUG_METRICS}
        return filled

    def _advance_counters(self, result: dict, time_this_iter: float) -> None:
        self._iteration += 1
        self._iterations_since_restore += 1
        self._time_total += time_this_iter
        self._time_since_restore += time_this_iter
        self._timesteps_since_restore += result.get(TIMESTEPS_THIS_ITER) or 0
        self._timesteps_total = _next_total(
            result, TIMESTEPS_TOTAL, TIMESTEPS_THIS_ITER, self._timesteps_total
        )
        self._episodes_total = _next_total(
            result, EPISODES_TOTAL, EPISODES_THIS_ITER, self._episodes_total
        )

    def _fill_automatic_keys(self, result: dict, time_this_iter: float) -> None:
        automatic = {
            TRAINING_ITERATION: self._iteration,
            TIMESTEPS_TOTAL: self._timesteps_total,
            EPISODES_TOTAL: self._episodes_total,
            DONE: False,
            **self.get_auto_filled_metrics(datetime.today(), time_this_iter),
        }
        for key, value in automatic.items():
            result.setdefault(key, value)

    # -- checkpoints ----------------------------------------------------------------

    def save(self, checkpoint_dir: str | None = None) -> str:
        """Write a checkpoint to ``<checkpoint_dir or logdir>/checkpoint_<iteration:06d>``.

        As in Ray, ``checkpoint_dir`` is the *parent* of the checkpoint folder.
        The checkpoint is built in a temporary sibling folder, its manifest
        (each file's size and SHA-256) written, everything fsynced, and then
        moved onto the target atomically: at every instant the path holds the
        previous complete checkpoint or the new one, whatever kills the process.
        Temporary folders of earlier killed saves are removed.

        Returns:
            what Ray Tune 1.13 returns, which ``restore`` accepts: the path
            ``save_checkpoint`` returned, moved into the checkpoint folder (a
            ``Trainer``'s ``checkpoint_<iteration>/checkpoint-<iteration>``), else the
            checkpoint folder.
        """
        from corral.utils import checkpoint_files, checkpoints

        with self._lock:
            parent = os.path.abspath(checkpoint_dir or self.logdir)
            target = os.path.join(parent, f"checkpoint_{self.iteration:06d}")
            tmp_dir = checkpoint_files.make_temp_dir(target)
            try:
                saved = self.save_checkpoint(tmp_dir)
                metadata = self._progress_metadata() | _describe_saved(saved, tmp_dir)
                checkpoints.write_json(
                    os.path.join(tmp_dir, CHECKPOINT_METADATA_FILE),
                    metadata,
                    indent=2,
                    sort_keys=True,
                )
                checkpoint_files.write_manifest(tmp_dir, self._checkpoint_algorithm())
                checkpoint_files.fsync_tree(tmp_dir)
                checkpoint_files.move_into_place(tmp_dir, target)
            finally:
                checkpoint_files.discard_temp_dir(tmp_dir)
            if metadata["checkpoint_kind"] == _KIND_PATH:
                return os.path.normpath(os.path.join(target, metadata["checkpoint_path"]))
            return target

    def _checkpoint_algorithm(self) -> str:
        """The algorithm a checkpoint's manifest records (``Trainer``: e.g. "PPO")."""
        return type(self).__name__

    def _progress_metadata(self) -> dict:
        return {
            "format_version": _METADATA_VERSION,
            "iteration": self._iteration,
            "timesteps_total": to_jsonable(self._timesteps_total),
            "time_total": self._time_total,
            "episodes_total": to_jsonable(self._episodes_total),
            "experiment_id": self._experiment_id,
        }

    def save_to_object(self) -> bytes:
        """A checkpoint in memory (Ray Tune's, e.g. for population-based training): the
        folder ``save`` writes, as the bytes of an uncompressed tar archive. It holds
        files only, no pickle; ``restore_from_object`` reads it as ``restore`` does."""
        import tempfile

        with tempfile.TemporaryDirectory(prefix="corral-save-to-object-") as parent:
            return checkpoint_to_object(checkpoint_folder(self.save(parent)))

    def restore_from_object(self, obj: bytes) -> None:
        """Restores a checkpoint made by ``save_to_object``.

        Raises:
            CheckpointError: ``obj`` is not such an archive, or holds anything but plain
                files and folders inside one checkpoint folder (a link, an absolute
                path, a path that leaves the folder); then nothing is written.
        """
        import io
        import tarfile
        import tempfile

        with tempfile.TemporaryDirectory(prefix="corral-restore-from-object-") as parent:
            try:
                with tarfile.open(fileobj=io.BytesIO(obj), mode="r:") as tar:
                    folder = _single_checkpoint_folder(tar.getmembers())
                    # (Members already checked; the "data" filter too where Python has it.)
                    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
                    tar.extractall(parent, **safe)  # type: ignore[arg-type]
            except (tarfile.TarError, TypeError) as e:
                raise CheckpointError(
                    f"restore_from_object: not an archive of save_to_object ({e})"
                ) from None
            self.restore(os.path.join(parent, folder))

    def restore(self, checkpoint_path: str, checkpoint_node_ip: str | None = None) -> None:
        """Restore counters and state from a checkpoint written by ``save``.

        The checkpoint's manifest is verified before any other file is read.

        Args:
            checkpoint_path: the checkpoint directory or any path inside it.
            checkpoint_node_ip: Ray Tune's node that holds the checkpoint; checkpoints
                are local here, so it is not used.

        Raises:
            CheckpointError: the path, its manifest, its metadata or a state
                file is missing, malformed or does not match the manifest; the
                message names the file.
        """
        from corral.utils import checkpoint_files

        with self._lock:
            checkpoint_dir = _find_checkpoint_dir(checkpoint_path)
            manifest = checkpoint_files.verify_manifest(checkpoint_dir)
            if manifest is not None:
                self._check_manifest(manifest, checkpoint_dir)
            metadata = _read_metadata(checkpoint_dir)
            checkpoint = _rebuild_saved(metadata, checkpoint_dir)
            self.load_checkpoint(checkpoint)
            self._iteration = metadata["iteration"]
            self._timesteps_total = metadata.get("timesteps_total")
            self._time_total = metadata.get("time_total", 0.0)
            self._episodes_total = metadata.get("episodes_total")
            self._experiment_id = metadata.get("experiment_id", self._experiment_id)
            self._reset_since_restore()
            self._restored = True

    def _check_manifest(self, manifest: dict, checkpoint_dir: str) -> None:
        """Refuse a verified checkpoint this trainable cannot load (e.g. another algorithm)."""
        from corral.utils import checkpoint_files

        written_by = manifest.get("algorithm")
        if written_by != self._checkpoint_algorithm():
            raise CheckpointError(
                f"Checkpoint {checkpoint_dir} was written by {written_by}, not "
                f"{self._checkpoint_algorithm()}: restore it with a {written_by} trainer "
                f"(its manifest, {checkpoint_files.MANIFEST}, says so)."
            )

    def delete_checkpoint(self, checkpoint_path: str) -> None:
        """Deletes the checkpoint folder ``checkpoint_path`` is (or lies in); nothing
        when there is no checkpoint there (as Ray Tune, which may have moved it)."""
        try:
            checkpoint_dir = _find_checkpoint_dir(checkpoint_path)
        except CheckpointError:
            logger.debug("No checkpoint to delete at %s", checkpoint_path)
            return
        shutil.rmtree(checkpoint_dir)

    def get_state(self) -> dict:
        """The trainable's progress (Ray Tune 1.13's): experiment id, iteration, totals,
        last result, and the corral version (where Ray Tune puts its own)."""
        from corral import __version__

        return {
            "experiment_id": self._experiment_id,
            "iteration": self._iteration,
            "timesteps_total": self._timesteps_total,
            "time_total": self._time_total,
            "episodes_total": self._episodes_total,
            "last_result": self._last_result,
            "corral_version": __version__,
        }

    # -- reuse with another config ------------------------------------------------------

    def reset(
        self, new_config: dict, logger_creator: Callable[[dict], Logger] | None = None
    ) -> bool:
        """Takes ``new_config`` without being built again (Ray Tune's actor reuse):
        sets ``config``, starts a new logger with ``logger_creator`` (else goes on
        logging where it did, with the new config), then asks ``reset_config``. When that
        returns True, the counters start from zero (a ``restore`` may follow); returns
        what it returned."""
        self.config = new_config
        if logger_creator is not None:
            self._result_logger.flush()
            self._result_logger.close()
            self._result_logger = logger_creator(copy.copy(new_config))
            self._logdir = self._result_logger.logdir
        else:
            self._result_logger.update_config(new_config)
        if not self.reset_config(new_config):
            return False
        self._iteration = 0
        self._time_total = 0.0
        self._timesteps_total = None
        self._episodes_total = None
        self._reset_since_restore()
        self._restored = False
        return True

    def reset_config(self, new_config: dict) -> bool:
        """Override to take ``new_config`` in place (and return True); by default a
        trainable cannot (False), as in Ray Tune."""
        return False

    # -- end of life, export, accessors ------------------------------------------------

    def stop(self) -> None:
        """Flush and close the logger, then ``cleanup()``; later calls do nothing."""
        if self._stopped:
            return
        self._stopped = True
        try:
            self._result_logger.flush()
            self._result_logger.close()
        finally:
            self.cleanup()

    def export_model(
        self, export_formats: str | list[str], export_dir: str | None = None
    ) -> dict[str, str]:
        """Export the model in the given formats (``ExportFormat`` names) to ``export_dir``.

        Returns:
            ``{format: path}`` of what was written.
        """
        if isinstance(export_formats, str):
            export_formats = [export_formats]
        return self._export_model(list(export_formats), export_dir or self.logdir)

    def get_config(self) -> dict:
        """The config this trainable runs with (after ``setup`` completed it)."""
        return self.config

    @property
    def logdir(self) -> str:
        """Directory of this trainable's results and default checkpoints."""
        return self._logdir

    @property
    def iteration(self) -> int:
        """Number of ``train()`` calls so far, including those before a restore."""
        return self._iteration

    @property
    def training_iteration(self) -> int:
        """Same as ``iteration`` (Ray's second name for it)."""
        return self._iteration

    @property
    def trial_name(self) -> str:
        """Name of the trial this runs as, ``"default"`` outside ``tune.run``."""
        return self._trial_info.name if self._trial_info else "default"

    @property
    def trial_id(self) -> str:
        """Id of the trial this runs as, ``"default"`` outside ``tune.run``."""
        return self._trial_info.trial_id if self._trial_info else "default"

    @property
    def trial_resources(self) -> Any:
        """The resources of the trial this runs as (``tune.run(resources_per_trial=...)``,
        else ``default_resource_request(config)``, else one CPU), ``"default"`` outside
        ``tune.run`` (Ray Tune's)."""
        if self._trial_info is None:
            return "default"
        if self._trial_info.trial_resources is not None:
            return self._trial_info.trial_resources
        request = type(self).default_resource_request(self.config)
        if request is None:
            from corral.tune.resources import resource_request

            request = resource_request([{"CPU": 1}])
        return request

    @property
    def uses_cloud_checkpointing(self) -> bool:
        """Whether checkpoints go to a cloud folder: never here (False)."""
        return bool(self.remote_checkpoint_dir)

    def get_current_ip(self) -> str:
        """The address of the node this runs on, as results' ``node_ip`` give it."""
        return self._local_ip

    def is_actor(self) -> bool:
        """Whether this runs inside a Ray actor (only possible when Ray is imported and
        initialised: ``"backend": "ray"``); False in corral's own trial loop."""
        ray = sys.modules.get("ray")
        if ray is None:
            return False
        try:
            return (
                bool(ray.is_initialized()) and ray.get_runtime_context().get_actor_id() is not None
            )
        except Exception:
            return False


def checkpoint_folder(path: str) -> str:
    """The checkpoint folder of a path ``Trainable.save`` returned: the path itself,
    or the checkpoint folder holding the file it names (a ``Trainer``'s
    ``checkpoint-<iteration>``; ``path`` as it is where no folder holds it)."""
    if not os.path.isfile(path):
        return path
    try:
        return _find_checkpoint_dir(path)
    except CheckpointError:
        return path


def checkpoint_to_object(checkpoint_dir: str) -> bytes:
    """The checkpoint folder ``checkpoint_dir`` (one ``save`` wrote) in memory, as
    ``save_to_object`` makes it: the bytes of an uncompressed tar archive of the folder."""
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(checkpoint_dir, arcname=os.path.basename(os.path.normpath(checkpoint_dir)))
    return buffer.getvalue()


def _next_total(result: dict, total_key: str, this_iter_key: str, current: Any) -> Any:
    """A running total: the one ``step()`` reported, else the old one plus this iteration's."""
    if result.get(total_key) is not None:
        return result[total_key]
    if result.get(this_iter_key) is not None:
        return (current or 0) + result[this_iter_key]
    return current


def _describe_saved(saved: Any, tmp_dir: str) -> dict:
    """Metadata recording what ``save_checkpoint`` returned, in a form that survives a move."""
    if saved is None:
        return {"checkpoint_kind": _KIND_DIR}
    if isinstance(saved, dict):
        try:
            text = json.dumps(saved)
        except (TypeError, ValueError) as e:
            raise TypeError(
                f"save_checkpoint() returned a dict that is not JSON-serialisable ({e}); "
                "write such state to files in checkpoint_dir and return their path"
            ) from e
        with open(os.path.join(tmp_dir, CHECKPOINT_STATE_FILE), "w") as f:
            f.write(text)
        return {"checkpoint_kind": _KIND_DICT}
    if isinstance(saved, str | os.PathLike):
        relative = os.path.relpath(os.path.realpath(saved), os.path.realpath(tmp_dir))
        if relative == os.pardir or relative.startswith(os.pardir + os.sep):
            raise ValueError(
                f"save_checkpoint() returned {os.fspath(saved)!r}, which is outside the "
                f"checkpoint_dir it was given ({tmp_dir!r})"
            )
        return {"checkpoint_kind": _KIND_PATH, "checkpoint_path": relative}
    raise TypeError(
        f"save_checkpoint() must return a path, a dict or None, got {type(saved).__name__}"
    )


def _single_checkpoint_folder(members: list) -> str:
    """The one top folder of a ``save_to_object`` archive's members (``tarfile.TarInfo``).

    Raises:
        CheckpointError: a member is a link or device, has an absolute path or ``..``,
            or lies outside one top folder.
    """
    tops = {m.name.split("/", 1)[0] for m in members}
    for member in members:
        if not (member.isfile() or member.isdir()):
            problem = "a link or device"
        elif member.name.startswith("/") or ".." in member.name.split("/") or len(tops) != 1:
            problem = "a path outside one checkpoint folder"
        else:
            continue
        raise CheckpointError(
            f"restore_from_object: the archive holds {member.name!r}, {problem}; expected "
            "the files of one checkpoint folder."
        )
    if len(tops) != 1:
        raise CheckpointError("restore_from_object: the archive holds no checkpoint folder.")
    return tops.pop()


def _find_checkpoint_dir(checkpoint_path: str | os.PathLike) -> str:
    """The folder holding ``.tune_metadata.json``: ``checkpoint_path`` or its nearest ancestor."""
    from corral.utils import checkpoints

    return checkpoints.find_checkpoint_dir(
        checkpoint_path,
        marker=CHECKPOINT_METADATA_FILE,
        expected="a directory written by Trainable.save()",
    )


def _read_metadata(checkpoint_dir: str) -> dict:
    path = os.path.join(checkpoint_dir, CHECKPOINT_METADATA_FILE)
    from corral.utils import checkpoints

    metadata = checkpoints.read_json(path, "the checkpoint metadata Trainable.save() writes")
    if not _is_valid_metadata(metadata):
        raise CheckpointError(
            f"{path} is not checkpoint metadata: expected a JSON object with an integer "
            f"'iteration' and 'checkpoint_kind' one of {(_KIND_PATH, _KIND_DICT, _KIND_DIR)}"
        )
    return metadata


def _is_valid_metadata(metadata: Any) -> bool:
    if not isinstance(metadata, dict) or not isinstance(metadata.get("iteration"), int):
        return False
    kind = metadata.get("checkpoint_kind")
    if kind == _KIND_PATH:
        return isinstance(metadata.get("checkpoint_path"), str)
    return kind in (_KIND_DICT, _KIND_DIR)


def _rebuild_saved(metadata: dict, checkpoint_dir: str) -> str | dict:
    """What ``save_checkpoint`` returned, with paths rebased onto ``checkpoint_dir``."""
    kind = metadata["checkpoint_kind"]
    if kind == _KIND_DIR:
        return checkpoint_dir
    if kind == _KIND_PATH:
        return os.path.normpath(os.path.join(checkpoint_dir, metadata["checkpoint_path"]))
    path = os.path.join(checkpoint_dir, CHECKPOINT_STATE_FILE)
    from corral.utils import checkpoints

    return checkpoints.read_json_object(path, "the dict save_checkpoint() returned")
