"""Names of the keys ``Trainable.train()`` fills in, and where results go by default.

The key strings are Ray Tune's, so stop criteria, plots and scripts written
against RLlib 1.x result dicts keep working unchanged.
"""

from __future__ import annotations

import os

TRAINING_ITERATION = "training_iteration"
TIME_THIS_ITER_S = "time_this_iter_s"
TIME_TOTAL_S = "time_total_s"
TIMESTEPS_THIS_ITER = "timesteps_this_iter"
TIMESTEPS_TOTAL = "timesteps_total"
EPISODES_THIS_ITER = "episodes_this_iter"
EPISODES_TOTAL = "episodes_total"
DONE = "done"
TIMESTAMP = "timestamp"
DATE = "date"
PID = "pid"
HOSTNAME = "hostname"
NODE_IP = "node_ip"
EXPERIMENT_ID = "experiment_id"
CONFIG = "config"
TIME_SINCE_RESTORE = "time_since_restore"
TIMESTEPS_SINCE_RESTORE = "timesteps_since_restore"
ITERATIONS_SINCE_RESTORE = "iterations_since_restore"

EXPR_PARAM_FILE = "params.json"
EXPR_RESULT_FILE = "result.json"
EXPR_PROGRESS_FILE = "progress.csv"


def default_results_dir() -> str:
    """Where trials write when no logdir is given: ``$CORRAL_RESULTS_DIR`` or ``~/corral_results``.

    Read at call time, not import time, so a test (or a user) can point it
    elsewhere after corral has been imported.
    """
    return os.path.expanduser(os.environ.get("CORRAL_RESULTS_DIR", "~/corral_results"))


def __getattr__(name: str) -> str:
    # Ray exposes ``DEFAULT_RESULTS_DIR`` as a constant; here the module attribute
    # is computed on each access so it follows ``CORRAL_RESULTS_DIR`` (a
    # ``from ... import DEFAULT_RESULTS_DIR`` still binds the value of that moment).
    if name == "DEFAULT_RESULTS_DIR":
        return default_results_dir()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
