"""The driver process's settings from a trainer's config, applied once at setup, and
the trainer's default logger."""

from __future__ import annotations

import logging
import os
import random
from typing import Any

import numpy as np


def prepare_driver(config: dict) -> None:
    """Applies `extra_python_environs_for_driver`, `log_level` (to corral's loggers),
    `seed` (Python's, numpy's and torch's global generators) and `num_cpus_for_driver`
    (torch's intra-op threads) to this process."""
    os.environ.update({k: str(v) for k, v in config["extra_python_environs_for_driver"].items()})
    if config.get("log_level"):
        logging.getLogger("corral").setLevel(config["log_level"])
    seed_driver(config.get("seed"))
    set_torch_threads(config["num_cpus_for_driver"])


def seed_driver(seed: int | None) -> None:
    """Seeds Python's, numpy's and torch's global generators (None: left as they are)."""
    if seed is None:
        return
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def set_torch_threads(num_cpus: float) -> None:
    """Gives torch in the driver `num_cpus_for_driver` threads (at least one).

    RL models are small: extra intra-op threads cost more in synchronisation
    than they gain, and on a loaded machine spinning threads slow every op
    down by an order of magnitude.
    """
    import torch

    torch.set_num_threads(max(1, int(num_cpus)))


def default_logger(
    trainer_name: str, env_id: str | None, config: dict, results_dir: str | None = None
) -> Any:
    """A trainer's logger when none is given: `logger_config["type"]` if set, else a
    `UnifiedLogger`, in a new `<Trainer>_<env>_<date>_<time>*` folder of `results_dir`
    (default: the results dir; `corral train --local-dir` passes its own)."""
    from corral.tune.logger import UnifiedLogger, logger_from_config
    from corral.tune.result import new_logdir

    env = (env_id or "NoEnv").replace("/", "_")
    logdir = new_logdir(f"{trainer_name}_{env}", results_dir)
    logger_config = config.get("logger_config") or {}
    if logger_config.get("type") is not None:
        return logger_from_config(logger_config, logdir)
    return UnifiedLogger(config, logdir, loggers=None)
