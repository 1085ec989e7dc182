"""The trainer side of evaluation: the evaluation workers' config, what `evaluate()`
runs (a `custom_eval_function` or sampled episodes), and `env_task_fn` between
iterations. Sampling the episodes is `corral.evaluation.evaluation_episodes`'s."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from corral.agents.config import merge_trainer_configs
from corral.env.env_context import EnvContext
from corral.env.utils import make_env_creator
from corral.evaluation.evaluation_episodes import (
    evaluate_during,
    evaluate_episodes,
    evaluate_timesteps,
)
from corral.utils.deprecation import DEPRECATED_VALUE

if TYPE_CHECKING:
    from corral.agents.trainer import Trainer


def evaluation_config(trainer: Trainer) -> dict:
    """The evaluation workers' config: `evaluation_config` merged over the trainer's,
    validated, with whole episodes sampled one step per fragment.

    Raises:
        ValueError: `evaluation_config` sets `in_evaluation` to something but True.
    """
    config = trainer.config
    overrides = config["evaluation_config"] or {}
    if overrides.get("in_evaluation", True) is not True:
        raise ValueError("evaluation_config must not set `in_evaluation` to False.")
    eval_config = merge_trainer_configs(
        config,
        overrides,
        True,
        trainer._allow_unknown_subkeys,
        trainer._override_all_subkeys_if_type_changes,
    )
    # Deprecated keys the user left alone were resolved by validating the main
    # config; validating that resolved value again would warn about a setting
    # the user never made.
    # (Passing the whole DEFAULT_CONFIG back, as RLlib 1.x code often does, leaves
    # them at DEPRECATED_VALUE too.)
    for key, default in trainer.get_default_config().items():
        untouched = all(
            given.get(key, DEPRECATED_VALUE) == DEPRECATED_VALUE
            for given in (trainer.raw_user_config, overrides)
        )
        if type(default) is int and default == DEPRECATED_VALUE and untouched:
            eval_config[key] = DEPRECATED_VALUE
    trainer._validate_config(eval_config, trainer_obj_or_none=trainer)
    if config["evaluation_duration_unit"] == "timesteps":
        # RLlib 1.13: fragments that share the steps out among the workers (10 steps
        # with "auto", so that evaluation can stop soon after training).
        eval_config.update(
            batch_mode="truncate_episodes",
            rollout_fragment_length=_timesteps_fragment(config),
            in_evaluation=True,
        )
        return eval_config
    # Evaluation runs whole episodes; fragments of one step make each
    # sample() end with the first finished episode, so a round of remote
    # sampling yields one episode per worker and no steps are wasted.
    eval_config.update(
        batch_mode="complete_episodes", rollout_fragment_length=1, in_evaluation=True
    )
    return eval_config


def _timesteps_fragment(config: dict) -> int:
    """An evaluation worker's fragment with `evaluation_duration_unit: "timesteps"`."""
    duration = config["evaluation_num_episodes"]
    if duration == "auto":
        return 10
    return max(1, math.ceil(int(duration) / (config["evaluation_num_workers"] or 1)))


def _units_per_round(config: dict) -> int:
    """With `evaluation_duration: "auto"`: the episodes (or steps) of one round of the
    evaluation workers."""
    workers = config["evaluation_num_workers"] or 1
    if config["evaluation_duration_unit"] == "timesteps":
        envs = int(
            (config["evaluation_config"] or {}).get("num_envs_per_worker")
            or config["num_envs_per_worker"]
        )
        return workers * _timesteps_fragment(config) * envs
    return workers


def evaluation_env_creator(trainer: Trainer, eval_config: dict) -> Callable:
    """The evaluation workers' env creator: the trainer's, unless `evaluation_config["env"]`
    gives them an env of their own (RLlib 1.13; an offline trainer may have none)."""
    eval_env = (trainer.config["evaluation_config"] or {}).get("env")
    if eval_env is None:
        return trainer.env_creator
    return make_env_creator(
        eval_env, eval_config.get("preprocessor_pref"), eval_config.get("model")
    )


def evaluate_synced(trainer: Trainer, episodes_left_fn: Callable[[int], int] | None) -> dict:
    """`{"evaluation": metrics}` of the `custom_eval_function`, or of
    `evaluation_num_episodes` sampled episodes (`"auto"`: one per evaluation worker) or,
    with `evaluation_duration_unit: "timesteps"`, env steps, with weights already synced
    to the evaluation workers.

    Raises:
        ValueError: the custom function returned no dict of metrics.
    """
    config = trainer.config
    if config["custom_eval_function"]:
        metrics = config["custom_eval_function"](trainer, trainer.evaluation_workers)
        if not metrics or not isinstance(metrics, dict):
            raise ValueError(f"Custom eval function must return dict of metrics, got {metrics}.")
        return {"evaluation": metrics}
    duration = config["evaluation_num_episodes"]
    if duration == "auto":
        duration = _units_per_round(config)
    evaluate = (
        evaluate_timesteps
        if config["evaluation_duration_unit"] == "timesteps"
        else evaluate_episodes
    )
    metrics = evaluate(
        trainer.workers.local_worker(),
        trainer.evaluation_workers,
        duration,
        episodes_left_fn,
        keep_custom_metrics=config["keep_per_episode_custom_metrics"],
    )
    return {"evaluation": metrics}


def train_and_evaluate_in_parallel(trainer: Trainer) -> tuple[dict, dict]:
    """Runs the training iteration in a thread while evaluating in this one.

    The remote evaluation workers sample while the training workers and
    the learner work, so the two really overlap. Weights are synced before
    training starts: evaluation sees one consistent set of weights, never
    one that the learner is half-way through updating.

    Returns:
        (training result, `{"evaluation": metrics}`).
    """
    trainer._before_evaluate()
    trainer._sync_evaluation_workers()
    auto = trainer.config["evaluation_num_episodes"] == "auto"
    return evaluate_during(
        trainer._train_iteration,
        functools.partial(evaluate_synced, trainer),
        _units_per_round(trainer.config) if auto else None,
    )


def update_env_tasks(trainer: Trainer, results: dict) -> None:
    """Lets `env_task_fn(results, env, env_context)` pick the next task of every rollout
    worker's envs (task-settable envs: `get_task` / `set_task`).

    Raises:
        ValueError: `env_task_fn` is set but not callable.
    """
    task_fn = trainer.config["env_task_fn"]
    if task_fn is None:
        return
    if not callable(task_fn):
        raise ValueError(
            "`env_task_fn` must be None or a callable taking [train_results, env, env_ctx] as args!"
        )
    trainer.workers.foreach_env_with_context(
        functools.partial(_set_env_task, task_fn=task_fn, results=results)
    )


def _set_env_task(env: Any, env_context: EnvContext, task_fn: Callable, results: dict) -> None:
    new_task = task_fn(results, env, env_context)
    if env.get_task() != new_task:
        env.set_task(new_task)
