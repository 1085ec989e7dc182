"""What a `Trainer` saves and restores: the trainer side of its checkpoints.

The files and their checks are `corral.utils.checkpoints`'s (layout, weights +
state pairs, JSON) and `corral.utils.checkpoint_files`'s (manifest, atomic
placement); this module decides what goes in them: the counters, metrics
history, saved config, the policy-change ledger, the local worker's and the
learners' state, the algorithm's extra state (`_extra_checkpoint_state`, e.g. a
replay buffer) and every rollout worker's resume state (random generators and
unfinished episodes, for exact resumes).
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from corral.agents.policy_ledger import apply_policy_changes
from corral.evaluation.backend import wait_all
from corral.evaluation.metrics import RolloutMetrics
from corral.tune.trainable import ExportFormat
from corral.utils import checkpoint_config, checkpoints
from corral.utils.deprecation import DEPRECATED_VALUE
from corral.utils.error import CheckpointError

if TYPE_CHECKING:
    from corral.agents.trainer import Trainer

CHECKPOINT_FORMAT_VERSION = 1
# File stem of `_extra_checkpoint_state` in a checkpoint directory.
EXTRA_CHECKPOINT_STATE = "extra_state"
# Random generators and unfinished episodes of each rollout worker (exact resumes).
RESUME_CHECKPOINT_STATE = "resume_state"


def save(trainer: Trainer, checkpoint_dir: str) -> None:
    """`Trainer.save_checkpoint`: writes `trainer`'s state into `checkpoint_dir`."""
    local = trainer.workers.local_worker()
    checkpoints.write_trainer_state(
        checkpoint_dir,
        {
            "format_version": CHECKPOINT_FORMAT_VERSION,
            "trainer": trainer._name,
            "env": trainer._env_id,
            "config": checkpoint_config.config_to_json(trainer._checkpoint_config()),
            "counters": dict(trainer._counters),
            "episodes_total": trainer._episodes_total,
            "episode_history": [m.to_json() for m in trainer._episode_history],
            "policy_changes": trainer._policy_ledger.to_json(local.policies_to_train),
        },
        worker_state=local.get_state(),
        learner_state=trainer.learner_group.get_state(),
    )
    extra = trainer._extra_checkpoint_state()
    if extra:
        checkpoints.write_array_state(checkpoint_dir, EXTRA_CHECKPOINT_STATE, extra)
    checkpoints.write_array_state(checkpoint_dir, RESUME_CHECKPOINT_STATE, resume_state(trainer))


def write_rllib_marker(checkpoint_dir: str, iteration: int) -> str:
    """Writes `checkpoint-<iteration>` into `checkpoint_dir` and returns its path: the
    name RLlib 1.13's `Trainer.save()` returned. Its own file held a pickle; this one
    holds a line of JSON naming the folder as the checkpoint (nothing reads it back:
    restoring takes the folder the path lies in)."""
    path = os.path.join(checkpoint_dir, f"checkpoint-{iteration}")
    checkpoints.write_json(
        path, {"corral_checkpoint": "the files of this folder (see its manifest)"}
    )
    return path


def load(trainer: Trainer, checkpoint_path: str) -> None:
    """`Trainer.load_checkpoint`: restores what `save` wrote into `trainer`.

    Args:
        trainer: the trainer to restore.
        checkpoint_path: the checkpoint folder, or the file in it `save` returned.

    Raises:
        CheckpointError: the checkpoint is of another algorithm, or damaged.
    """
    if os.path.isfile(checkpoint_path):
        checkpoint_path = os.path.dirname(checkpoint_path)
    meta = checkpoints.read_trainer_meta(checkpoint_path)
    name = trainer._name
    if meta.get("trainer") != name:
        raise CheckpointError(
            f"Checkpoint {checkpoint_path} was written by {meta.get('trainer')}, not "
            f"{name} (expected {name}): restore it with a {meta.get('trainer')} trainer."
        )
    apply_policy_changes(trainer, meta.get("policy_changes") or {}, checkpoint_path)
    state, worker_state, learner_state = checkpoints.read_trainer_state(
        checkpoint_path, trainer.workers.local_worker().get_state()
    )
    trainer.__setstate__(
        {
            "worker": worker_state,
            "learner": learner_state,
            "counters": state.get("counters", {}),
            "episodes_total": state.get("episodes_total", 0),
            "episode_history": state.get("episode_history", []),
        }
    )
    if checkpoints.has_array_state(checkpoint_path, EXTRA_CHECKPOINT_STATE):
        trainer._set_extra_checkpoint_state(
            checkpoints.read_array_state(checkpoint_path, EXTRA_CHECKPOINT_STATE)
        )
    if checkpoints.has_array_state(checkpoint_path, RESUME_CHECKPOINT_STATE):
        set_resume_state(
            trainer, checkpoints.read_array_state(checkpoint_path, RESUME_CHECKPOINT_STATE)
        )


def get_state(trainer: Trainer) -> dict:
    """`Trainer.__getstate__`: the in-memory state (worker, learners, counters, metrics)."""
    return {
        "worker": trainer.workers.local_worker().get_state(),
        "learner": trainer.learner_group.get_state(),
        "counters": dict(trainer._counters),
        "episodes_total": trainer._episodes_total,
        "episode_history": [m.to_json() for m in trainer._episode_history],
    }


def set_state(trainer: Trainer, state: dict) -> None:
    """`Trainer.__setstate__`: applies `get_state`'s dict to `trainer` and its workers."""
    local = trainer.workers.local_worker()
    local.set_state(state["worker"])
    for policy in local.policy_map.values():
        # New weights everywhere: the next sync must send them to the workers.
        policy.bump_weights_seq()
    wait_all([w.call("set_state", state["worker"]) for w in trainer.workers.remote_workers()])
    if state.get("learner"):
        trainer.learner_group.set_state(state["learner"])
    trainer._counters = defaultdict(int, state.get("counters", {}))
    trainer._episodes_total = state.get("episodes_total", 0)
    trainer._episode_history = [
        RolloutMetrics.from_json(m) for m in state.get("episode_history", [])
    ]


def resume_state(trainer: Trainer) -> dict:
    """Each rollout worker's random generators and unfinished episodes, by worker
    index (0: the driver's), so that a restored trainer continues exactly as this
    one would (see `corral.evaluation.resume_state` for what can be replayed)."""
    remote = trainer.workers.remote_workers()
    states = wait_all([w.call("get_resume_state") for w in remote])
    out = {str(w.worker_index): state for w, state in zip(remote, states)}
    out["0"] = trainer.workers.local_worker().get_resume_state()
    return {"workers": out}


def set_resume_state(trainer: Trainer, state: dict) -> None:
    """Applies `resume_state` to the workers with the same indices (others start
    fresh episodes); the driver's generators are set last."""
    saved = state.get("workers") or {}
    remote = [w for w in trainer.workers.remote_workers() if str(w.worker_index) in saved]
    wait_all([w.call("set_resume_state", saved[str(w.worker_index)]) for w in remote])
    if "0" in saved:
        trainer.workers.local_worker().set_resume_state(saved["0"])


def export_model(trainer: Trainer, export_formats: list[str], export_dir: str) -> dict[str, str]:
    """`Trainable.export_model`'s work: writes each of `export_formats` (`checkpoint`,
    `model`, `onnx` with opset `$ONNX_OPSET`, default 11) of the default policy under
    `export_dir`; returns format -> path.

    Raises:
        NotImplementedError: `h5` was asked for (corral imports h5, never exports it).
    """
    ExportFormat.validate(export_formats)
    if ExportFormat.H5 in export_formats:
        raise NotImplementedError("Exporting to h5 is not supported; h5 is import-only.")
    exported = {}
    if ExportFormat.CHECKPOINT in export_formats:
        exported[ExportFormat.CHECKPOINT] = os.path.join(export_dir, ExportFormat.CHECKPOINT)
        trainer.export_policy_checkpoint(exported[ExportFormat.CHECKPOINT])
    if ExportFormat.MODEL in export_formats:
        exported[ExportFormat.MODEL] = os.path.join(export_dir, ExportFormat.MODEL)
        trainer.export_policy_model(exported[ExportFormat.MODEL])
    if ExportFormat.ONNX in export_formats:
        exported[ExportFormat.ONNX] = os.path.join(export_dir, ExportFormat.ONNX)
        opset = int(os.getenv("ONNX_OPSET", "11"))
        trainer.export_policy_model(exported[ExportFormat.ONNX], onnx=opset)
    return exported


def from_checkpoint(
    cls: type[Trainer],
    checkpoint_path: str,
    config_overrides: dict | None,
    logger_creator: Callable | None,
) -> Any:
    """`Trainer.from_checkpoint` (its docstring says what it does and raises)."""
    from corral.agents.trainer import Trainer
    from corral.tune.trainable import CHECKPOINT_METADATA_FILE

    checkpoint_dir = checkpoints.find_checkpoint_dir(
        checkpoint_path,
        CHECKPOINT_METADATA_FILE,
        "a directory written by Trainable.save() (it writes the metadata file "
        f"{CHECKPOINT_METADATA_FILE} into every checkpoint directory)",
    )
    name, config = checkpoints.read_saved_config(checkpoint_dir)
    trainer_cls = cls
    if cls._name != name:
        if cls is not Trainer:
            raise CheckpointError(
                f"Checkpoint {checkpoint_dir} was written by {name}, not {cls._name}: "
                f"use the {name} trainer (or Trainer.from_checkpoint)."
            )
        from corral.agents.registry import get_trainer_class

        try:
            trainer_cls = get_trainer_class(name)
        except (ValueError, NotImplementedError) as e:
            raise CheckpointError(
                f"Checkpoint {checkpoint_dir} was written by {name!r}, which is not an "
                f"algorithm known in this process ({e}); register it or call "
                "from_checkpoint on its class."
            ) from None
    config = checkpoint_config.apply_overrides(config, config_overrides or {})
    checkpoint_config.check_resolved(config, checkpoint_dir)
    for key, default in trainer_cls.get_default_config().items():
        # A deprecated key's value already moved to its successor when the
        # checkpoint's trainer was built; passing it back would warn again.
        if type(default) is int and default == DEPRECATED_VALUE:
            config.pop(key, None)
    trainer = trainer_cls(config=config, logger_creator=logger_creator)
    try:
        trainer.restore(checkpoint_dir)
    except BaseException:
        trainer.stop()
        raise
    return trainer
