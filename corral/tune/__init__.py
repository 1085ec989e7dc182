"""The parts of ``ray.tune`` that RLlib 1.x code uses, so ``from ray import tune``
ports as ``from corral import tune``.

Importing this package must stay cheap (no torch): the command line and
plain scripts import it before deciding what to build.
"""

from corral.tune.callback import Callback
from corral.tune.registry import register_env, register_input, register_trainable
from corral.tune.search import choice, loguniform, randint, sample_from, uniform
from corral.tune.trainable import CheckpointError, ExportFormat, Trainable
from corral.tune.tune import ExperimentAnalysis, Trial, grid_search, run

__all__ = [
    "Callback",
    "CheckpointError",
    "ExperimentAnalysis",
    "ExportFormat",
    "Trainable",
    "Trial",
    "choice",
    "grid_search",
    "loguniform",
    "randint",
    "sample_from",
    "uniform",
    "register_env",
    "register_input",
    "register_trainable",
    "run",
]
