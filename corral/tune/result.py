"""Names of the keys ``Trainable.train()`` fills in, and where results go by default.

The key strings are Ray Tune's, so stop criteria, plots and scripts written
against RLlib 1.x result dicts keep working unchanged.
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime

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
TRIAL_ID = "trial_id"
# Seconds from the trainable's construction to its first `train()` (Ray Tune 1.13's).
WARMUP_TIME = "warmup_time"
# The keys `Trainable.get_auto_filled_metrics(debug_metrics_only=True)` gives: those that
# need no iteration (Ray Tune 1.13's).
DEBUG_METRICS = (TRIAL_ID, EXPERIMENT_ID, DATE, TIMESTAMP, PID, HOSTNAME, NODE_IP, CONFIG)
# A result that asks the trial's loop to save a checkpoint now (Ray Tune's key).
SHOULD_CHECKPOINT = "should_checkpoint"
# A function trainable's marker that its function returned after its last result, which
# is thereby the trial's final one; it carries no new metrics (Ray Tune's key).
RESULT_DUPLICATE = "__duplicate__"

# The figures RLlib's ``Trainer.train()`` adds (``Trainer._compile_results``).
EPISODE_REWARD_MEAN = "episode_reward_mean"
EPISODE_REWARD_MIN = "episode_reward_min"
EPISODE_REWARD_MAX = "episode_reward_max"
EPISODE_LEN_MEAN = "episode_len_mean"
AGENT_TIMESTEPS_TOTAL = "agent_timesteps_total"
NUM_HEALTHY_WORKERS = "num_healthy_workers"
NUM_ENV_STEPS_SAMPLED = "num_env_steps_sampled"
NUM_ENV_STEPS_TRAINED = "num_env_steps_trained"
NUM_AGENT_STEPS_SAMPLED = "num_agent_steps_sampled"
NUM_AGENT_STEPS_TRAINED = "num_agent_steps_trained"

# Nested sections of a trainer result. What lies below them depends on the run
# (evaluation settings, custom metrics, policy ids) and on the iteration (an
# evaluation every N iterations, learner stats once learning has started).
EVALUATION = "evaluation"
INFO = "info"
CUSTOM_METRICS = "custom_metrics"
POLICY_REWARD_MEAN = "policy_reward_mean"
POLICY_REWARD_MIN = "policy_reward_min"
POLICY_REWARD_MAX = "policy_reward_max"
SAMPLER_PERF = "sampler_perf"
HIST_STATS = "hist_stats"

# Nested keys are named by their path, joined by "/" (as in ``progress.csv``, stop
# criteria and ``checkpoint_score_attr``).
EVALUATION_REWARD_MEAN = f"{EVALUATION}/{EPISODE_REWARD_MEAN}"
EVALUATION_EPISODES_THIS_ITER = f"{EVALUATION}/{EPISODES_THIS_ITER}"

# Top-level keys every trainer result has (``Trainer._compile_results`` and
# ``Trainable.train``): what a stop criterion on a trainer can name without a section.
TRAINER_RESULT_KEYS = frozenset(
    {
        EPISODE_REWARD_MEAN,
        EPISODE_REWARD_MIN,
        EPISODE_REWARD_MAX,
        EPISODE_LEN_MEAN,
        EPISODES_THIS_ITER,
        EPISODES_TOTAL,
        TIMESTEPS_THIS_ITER,
        TIMESTEPS_TOTAL,
        AGENT_TIMESTEPS_TOTAL,
        TRAINING_ITERATION,
        TIME_THIS_ITER_S,
        TIME_TOTAL_S,
        TIME_SINCE_RESTORE,
        TIMESTEPS_SINCE_RESTORE,
        ITERATIONS_SINCE_RESTORE,
        NUM_HEALTHY_WORKERS,
        NUM_ENV_STEPS_SAMPLED,
        NUM_ENV_STEPS_TRAINED,
        NUM_AGENT_STEPS_SAMPLED,
        NUM_AGENT_STEPS_TRAINED,
    }
)
RESULT_SECTIONS = frozenset(
    {
        EVALUATION,
        INFO,
        CUSTOM_METRICS,
        POLICY_REWARD_MEAN,
        POLICY_REWARD_MIN,
        POLICY_REWARD_MAX,
        SAMPLER_PERF,
        HIST_STATS,
    }
)

EXPR_PARAM_FILE = "params.json"
EXPR_RESULT_FILE = "result.json"
EXPR_PROGRESS_FILE = "progress.csv"


def default_results_dir() -> str:
    """Where trials write when no logdir is given: ``$CORRAL_RESULTS_DIR`` or ``~/corral_results``.

    Read at call time, not import time, so a test (or a user) can point it
    elsewhere after corral has been imported.
    """
    return os.path.expanduser(os.environ.get("CORRAL_RESULTS_DIR", "~/corral_results"))


def new_logdir(prefix: str, parent: str | None = None) -> str:
    """Creates a fresh trial folder ``<parent>/<prefix>_<date>_<time><random>`` and returns it.

    The one namer of trial folders (a trainable's default, ``tune.run``'s trials,
    ``corral train --local-dir``). The date makes folders sort by start time; the random
    tail (``tempfile.mkdtemp``) keeps two trials started in the same second apart.

    Args:
        prefix: what the trial is, e.g. ``"PPO_CartPole-v1"``.
        parent: the folder to create it in (made if missing); default
            ``default_results_dir()``.
    """
    parent = parent or default_results_dir()
    os.makedirs(parent, exist_ok=True)
    timestr = datetime.today().strftime("%Y-%m-%d_%H-%M-%S")
    return tempfile.mkdtemp(prefix=f"{prefix}_{timestr}", dir=parent)


def __getattr__(name: str) -> str:
    # Ray exposes ``DEFAULT_RESULTS_DIR`` as a constant; here the module attribute
    # is computed on each access so it follows ``CORRAL_RESULTS_DIR`` (a
    # ``from ... import DEFAULT_RESULTS_DIR`` still binds the value of that moment).
    if name == "DEFAULT_RESULTS_DIR":
        return default_results_dir()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
