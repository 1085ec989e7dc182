"""The parts of ``ray.tune`` that RLlib 1.x code uses, so ``from ray import tune``
ports as ``from corral import tune``.

Importing this package must stay cheap (no torch): the command line and
plain scripts import it before deciding what to build.
"""

from corral.tune import track
from corral.tune.callback import Callback
from corral.tune.durable_trainable import (
    DurableTrainable,
    durable,
    make_checkpoint_dir,
    save_checkpoint,
)
from corral.tune.error import TuneError
from corral.tune.experiment import Experiment, run_experiments
from corral.tune.progress_reporter import CLIReporter, JupyterNotebookReporter, ProgressReporter
from corral.tune.registry import register_env, register_input, register_trainable

# Ray Tune's name of a trial's resource request (``resources_per_trial=...``): corral's
# stand-in, which takes the same ``bundles`` and ``strategy``.
from corral.tune.resources import ResourceRequest as PlacementGroupFactory
from corral.tune.schedulers import create_scheduler
from corral.tune.search import (
    choice,
    function,
    lograndint,
    loguniform,
    qlograndint,
    qloguniform,
    qrandint,
    qrandn,
    quniform,
    randint,
    randn,
    sample_from,
    uniform,
)
from corral.tune.session import (
    checkpoint_dir,
    get_trial_dir,
    get_trial_id,
    get_trial_name,
    get_trial_resources,
    is_session_enabled,
    report,
)
from corral.tune.stopper import Stopper
from corral.tune.suggest import create_searcher
from corral.tune.syncer import SyncConfig
from corral.tune.trainable import CheckpointError, ExportFormat, Trainable
from corral.tune.tune import Analysis, ExperimentAnalysis, Trial, grid_search, run
from corral.tune.with_parameters import with_parameters

__all__ = [
    "Analysis",
    "CLIReporter",
    "Callback",
    "CheckpointError",
    "DurableTrainable",
    "Experiment",
    "ExperimentAnalysis",
    "ExportFormat",
    "JupyterNotebookReporter",
    "PlacementGroupFactory",
    "ProgressReporter",
    "Stopper",
    "SyncConfig",
    "Trainable",
    "Trial",
    "TuneError",
    "checkpoint_dir",
    "choice",
    "create_scheduler",
    "create_searcher",
    "durable",
    "function",
    "get_trial_dir",
    "get_trial_id",
    "get_trial_name",
    "get_trial_resources",
    "grid_search",
    "is_session_enabled",
    "make_checkpoint_dir",
    "lograndint",
    "loguniform",
    "qlograndint",
    "qloguniform",
    "qrandint",
    "qrandn",
    "quniform",
    "randint",
    "randn",
    "sample_from",
    "track",
    "uniform",
    "register_env",
    "register_input",
    "register_trainable",
    "report",
    "run",
    "run_experiments",
    "save_checkpoint",
    "with_parameters",
]
