"""Sampling the episodes of an evaluation (`Trainer.evaluate`'s worker side).

Evaluation samples whole episodes with the evaluation workers' settings
(`evaluation_config`) and reports only their metrics: in-process on one worker
(exactly the episodes asked for), or in rounds of one episode per remote worker
(at least the episodes asked for; the batches never travel back). With
`evaluation_duration_unit: "timesteps"` it samples env steps instead (fragments of
`evaluation_duration / workers` steps) and reports the episodes finished in them.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any

from corral.evaluation.backend import wait_all
from corral.evaluation.metrics import RolloutMetrics, summarize_episodes

NO_EVALUATION_ENV = (
    "Cannot evaluate w/o an evaluation worker set in the Trainer or w/o an env on the "
    "local worker!\nTry one of the following:\n1) Set `evaluation_interval` >= 0 to force "
    "creating a separate evaluation worker set.\n2) Set `create_env_on_driver=True` to "
    "force the local (non-eval) worker to have an environment to evaluate on."
)


def evaluate_episodes(
    rollout_worker: Any,
    evaluation_workers: Any,
    num_episodes: int,
    episodes_left_fn: Callable[[int], int] | None = None,
    keep_custom_metrics: bool = False,
) -> dict:
    """Samples evaluation episodes and summarises them (`summarize_episodes`).

    Args:
        rollout_worker: the trainer's local rollout worker, used (without a
            reset: its episodes continue) when there are no evaluation workers.
        evaluation_workers: the evaluation `WorkerSet`, or None.
        num_episodes: how many episodes to evaluate.
        episodes_left_fn: `fn(num_episodes_done) -> num_episodes_left`; sampling
            stops once it returns <= 0. Default: `num_episodes` minus those done,
            and exactly `num_episodes` are reported where one worker samples.
        keep_custom_metrics: custom metrics as per-episode lists
            (`keep_per_episode_custom_metrics`).

    Raises:
        ValueError: there are no evaluation workers and the local worker has no env.
    """
    exact = episodes_left_fn is None
    if episodes_left_fn is None:

        def episodes_left_fn(num_episodes_done: int) -> int:
            return num_episodes - num_episodes_done

    if evaluation_workers is None:
        if rollout_worker.sampler is None:
            raise ValueError(NO_EVALUATION_ENV)
        episodes = sample_episodes_locally(rollout_worker, episodes_left_fn, reset=False)
    elif not evaluation_workers.remote_workers():
        episodes = sample_episodes_locally(evaluation_workers.local_worker(), episodes_left_fn)
    else:
        episodes = sample_episodes_remotely(evaluation_workers.remote_workers(), episodes_left_fn)
        exact = False  # whole rounds: at least the episodes asked for
    if exact:
        episodes = episodes[:num_episodes]
    return summarize_episodes(episodes, keep_custom_metrics=keep_custom_metrics)


def evaluate_timesteps(
    rollout_worker: Any,
    evaluation_workers: Any,
    num_timesteps: int,
    steps_left_fn: Callable[[int], int] | None = None,
    keep_custom_metrics: bool = False,
) -> dict:
    """Samples `num_timesteps` evaluation env steps (`evaluation_duration_unit:
    "timesteps"`) and summarises the episodes that finished in them, with the steps
    taken as `timesteps_this_iter`.

    Args:
        rollout_worker: the trainer's local rollout worker, used (without a reset)
            when there are no evaluation workers.
        evaluation_workers: the evaluation `WorkerSet`, or None.
        num_timesteps: how many env steps to sample (at least; whole fragments).
        steps_left_fn: `fn(num_steps_done) -> num_steps_left`; sampling stops once it
            returns <= 0. Default: `num_timesteps` minus those done.
        keep_custom_metrics: custom metrics as per-episode lists
            (`keep_per_episode_custom_metrics`).

    Raises:
        ValueError: there are no evaluation workers and the local worker has no env.
    """
    if steps_left_fn is None:

        def steps_left_fn(num_steps_done: int) -> int:
            return num_timesteps - num_steps_done

    if evaluation_workers is None:
        if rollout_worker.sampler is None:
            raise ValueError(NO_EVALUATION_ENV)
        steps, episodes = sample_steps_locally(rollout_worker, steps_left_fn, reset=False)
    elif not evaluation_workers.remote_workers():
        steps, episodes = sample_steps_locally(evaluation_workers.local_worker(), steps_left_fn)
    else:
        steps, episodes = sample_steps_remotely(evaluation_workers.remote_workers(), steps_left_fn)
    metrics = summarize_episodes(episodes, keep_custom_metrics=keep_custom_metrics)
    return {**metrics, "timesteps_this_iter": steps}


def evaluate_during(
    train_fn: Callable[[], dict],
    evaluate_fn: Callable[[Callable[[int], int] | None], dict],
    episodes_per_round: int | None,
) -> tuple[dict, dict]:
    """Runs `train_fn()` in a thread while `evaluate_fn(episodes_left_fn)` runs in this one.

    Args:
        train_fn: one training iteration.
        evaluate_fn: the evaluation, given its `episodes_left_fn`.
        episodes_per_round: with `evaluation_num_episodes: "auto"`, the episodes of
            one round (the number of evaluation workers): evaluation runs at least
            one round, then rounds until training is done. None: `evaluate_fn`'s
            own count.

    Returns:
        (training result, evaluation result).
    """
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="corral-train") as pool:
        training = pool.submit(train_fn)
        episodes_left_fn = None
        if episodes_per_round is not None:
            per_round = episodes_per_round

            def episodes_left_fn(num_episodes_done: int) -> int:
                # At least one round, then rounds until training is done.
                if num_episodes_done > 0 and training.done():
                    return 0
                return per_round

        evaluation = evaluate_fn(episodes_left_fn)
        return training.result(), evaluation


def sample_episodes_locally(
    worker: Any, episodes_left_fn: Callable[[int], int], reset: bool = True
) -> list[RolloutMetrics]:
    """Finished episodes of one in-process worker until `episodes_left_fn` says stop."""
    if reset:
        worker.reset_sampler()
    worker.get_metrics()  # drop episodes finished before this evaluation
    episodes: list[RolloutMetrics] = []
    while episodes_left_fn(len(episodes)) > 0:
        worker.sample()
        episodes.extend(worker.get_metrics())
    return episodes


def sample_episodes_remotely(
    workers: list, episodes_left_fn: Callable[[int], int]
) -> list[RolloutMetrics]:
    """Rounds of one episode per remote worker until `episodes_left_fn` says stop.

    Only the episode metrics travel back, not the sampled batches.
    """
    wait_all([w.apply(_reset_for_evaluation) for w in workers])
    episodes: list[RolloutMetrics] = []
    while (left := episodes_left_fn(len(episodes))) > 0:
        for metrics in wait_all([w.apply(_sample_metrics) for w in workers[:left]]):
            episodes.extend(metrics)
    return episodes


def sample_steps_locally(
    worker: Any, steps_left_fn: Callable[[int], int], reset: bool = True
) -> tuple[int, list[RolloutMetrics]]:
    """Fragments of one in-process worker until `steps_left_fn` says stop: the env steps
    taken and the episodes finished."""
    if reset:
        worker.reset_sampler()
    worker.get_metrics()
    steps, episodes = 0, []
    while steps_left_fn(steps) > 0:
        steps += _env_steps(worker.sample())
        episodes.extend(worker.get_metrics())
    return steps, episodes


def sample_steps_remotely(
    workers: list, steps_left_fn: Callable[[int], int]
) -> tuple[int, list[RolloutMetrics]]:
    """Rounds of one fragment per remote worker (as many workers as the steps left need)
    until `steps_left_fn` says stop; only step counts and episode metrics travel back."""
    wait_all([w.apply(_reset_for_evaluation) for w in workers])
    steps, episodes = 0, []
    per_worker: int | None = None  # steps of one worker's fragment, once seen
    while (left := steps_left_fn(steps)) > 0:
        asked = workers if per_worker is None else workers[: max(1, -(-left // per_worker))]
        for count, metrics in wait_all([w.apply(_sample_steps) for w in asked]):
            steps += count
            episodes.extend(metrics)
            per_worker = max(per_worker or 0, count)
    return steps, episodes


def _env_steps(batch: Any) -> int:
    return int(batch.env_steps()) if hasattr(batch, "env_steps") else int(batch.count)


def _sample_steps(worker: Any) -> tuple[int, list[RolloutMetrics]]:
    return _env_steps(worker.sample()), worker.get_metrics()


def _reset_for_evaluation(worker: Any) -> None:
    worker.reset_sampler()
    worker.get_metrics()


def _sample_metrics(worker: Any) -> list[RolloutMetrics]:
    worker.sample()
    return worker.get_metrics()
