"""corral Trainers as Ray Tune Trainables.

`as_ray_trainable(PPOTrainer)` is a `ray.tune.Trainable` subclass that runs a
`PPOTrainer` inside each trial: `step()` is the trainer's `train()`, checkpoints are
corral checkpoints (Tune's checkpoint folder *is* the corral checkpoint, so
`PPOTrainer.from_checkpoint(result.checkpoint.path)` restores it outside Tune), and the
trial's resources come from `Trainer.default_resource_request(config)` (a placement group
of the driver, the rollout and evaluation workers and the learners).

Passing the corral class itself (`ray.tune.run(PPOTrainer, ...)`,
`ray.tune.Tuner(PPOTrainer, ...)`) works too, through `corral._ray_tune_hook`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from corral._ray_tune_hook import _is_corral_trainable
from corral.tune.trainable import checkpoint_folder

_adapters: dict[type, type] = {}


def as_ray_trainable(trainer_class: type[Any]) -> type[Any]:
    """The Ray Tune Trainable class that runs `trainer_class` (cached per class).

    Args:
        trainer_class: a corral `Trainable` subclass (e.g. `PPOTrainer`).

    Raises:
        TypeError: `trainer_class` is not a corral Trainable class.
    """
    if not _is_corral_trainable(trainer_class):
        raise TypeError(
            f"as_ray_trainable needs a corral Trainable class (e.g. PPOTrainer), got "
            f"{trainer_class!r}."
        )
    adapter = _adapters.get(trainer_class)
    if adapter is None:
        adapter = _adapters[trainer_class] = _make_adapter(trainer_class)
    return adapter


def _make_adapter(trainer_class: type[Any]) -> type[Any]:
    from ray import tune

    from corral.tune.logger import NoopLogger

    class CorralTrainable(tune.Trainable):
        """Runs one corral trainer per Ray Tune trial."""

        corral_class = trainer_class
        # Tune names trials after `_name` ("PPO_<env>_..."), as for RLlib's trainers.
        _name = getattr(trainer_class, "_name", None) or trainer_class.__name__

        def setup(self, config: dict) -> None:
            logdir = getattr(self, "logdir", None) or tempfile.mkdtemp(prefix="corral_trial_")
            # Tune writes the trial's results (progress.csv, result.json, TensorBoard):
            # the corral trainer inside logs nothing of its own.
            self.trainer = trainer_class(
                config=config, logger_creator=lambda cfg: NoopLogger(cfg, logdir)
            )

        def step(self) -> dict:
            result = dict(self.trainer.train())
            # Tune fills these itself (and would refuse a "config" it did not set).
            for key in ("config", "date", "timestamp", "pid", "hostname", "node_ip", "trial_id"):
                result.pop(key, None)
            return result

        def save_checkpoint(self, checkpoint_dir: str) -> None:
            # corral writes a complete checkpoint folder (manifest, atomic); its files
            # become the contents of Tune's checkpoint folder.
            staging = tempfile.mkdtemp(prefix="corral_ckpt_")
            try:
                written = checkpoint_folder(self.trainer.save(staging))
                for name in os.listdir(written):
                    shutil.move(os.path.join(written, name), os.path.join(checkpoint_dir, name))
            finally:
                shutil.rmtree(staging, ignore_errors=True)

        def load_checkpoint(self, checkpoint: Any) -> None:
            self.trainer.restore(checkpoint)

        def cleanup(self) -> None:
            self.trainer.stop()

        def reset_config(self, new_config: dict) -> bool:
            return False

        @classmethod
        def default_resource_request(cls, config: dict) -> Any:
            return trainer_class.default_resource_request(config)

    CorralTrainable.__name__ = CorralTrainable.__qualname__ = f"Ray{trainer_class.__name__}"
    return CorralTrainable
