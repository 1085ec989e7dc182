"""Weights & Biases: every result of a trial logged to a W&B run (the `wandb` package).

    from corral.tune.integration.wandb import WandbLogger
    from corral.tune.logger import CSVLogger, JsonLogger, UnifiedLogger

    # W&B only:
    config = {"logger_config": {"type": WandbLogger, "project": "cartpole"}}
    # W&B next to result.json and progress.csv:
    config = {"logger_config": {"type": UnifiedLogger, "project": "cartpole",
                                "loggers": [JsonLogger, CSVLogger, WandbLogger]}}

The options (`project`, `group`, `name`, `entity`, `tags`, `mode` ("offline" logs
without an account), ... any keyword of `wandb.init`) come from `logger_config`,
or from a `"wandb"` entry of the trial's config. The run records the trainer's
config (classes and functions by name) and, per result, every numeric value,
nested keys joined by "/", at step `training_iteration`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral.tune.logger import Logger, flatten_dict, to_jsonable
from corral.tune.result import CONFIG, TRAINING_ITERATION

# Options that describe the logger, not arguments of `wandb.init`.
_OWN_OPTIONS = {"loggers", "type", "logdir"}


class WandbLogger(Logger):
    """Logs each result to a Weights & Biases run; `wandb.init` happens in `_init`."""

    def _init(self) -> None:
        try:
            import wandb
        except ImportError:
            raise ImportError(
                "WandbLogger needs the wandb package: pip install wandb (then `wandb login`, "
                "or set mode='offline' in logger_config)"
            ) from None
        options = dict(self.config.get("wandb") or self.config)
        kwargs = {k: v for k, v in options.items() if k not in _OWN_OPTIONS}
        kwargs.setdefault("dir", self.logdir)
        self._run = wandb.init(**kwargs)

    def update_config(self, config: dict) -> None:
        super().update_config(config)
        self._run.config.update(to_jsonable(_without_wandb(config)), allow_val_change=True)

    def on_result(self, result: dict) -> None:
        flat = flatten_dict({k: v for k, v in result.items() if k != CONFIG})
        values = {
            k: v for k, v in flat.items() if isinstance(v, int | float) and not isinstance(v, bool)
        }
        self._run.log(values, step=result.get(TRAINING_ITERATION))

    def close(self) -> None:
        self._run.finish()


def _without_wandb(config: Mapping[str, Any]) -> dict:
    return {k: v for k, v in config.items() if k != "wandb"}
