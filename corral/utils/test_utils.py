"""RLlib 1.13's test helpers (``ray.rllib.utils.test_utils``), on torch.

``framework_iterator`` yields "torch" only: corral runs on PyTorch, so the TF frameworks
RLlib also iterates over are skipped with RLlib's warning for a framework that is not
installed (asking only for them yields nothing, as RLlib 1.13 without TF did). ``check``
compares nested structures of numbers, arrays and tensors as RLlib's.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

__all__ = [
    "check",
    "check_compute_single_action",
    "check_learning_achieved",
    "check_same_batch",
    "check_train_results",
    "framework_iterator",
    "run_learning_tests_from_yaml",
]

logger = logging.getLogger(__name__)

_TF_FRAMEWORKS = ("tf", "tf2", "tfe", "jax")


def framework_iterator(
    config: Any = None,
    frameworks: Sequence[str] | str = ("tf2", "tf", "tfe", "torch"),
    session: bool = False,
    with_eager_tracing: bool = False,
    time_iterations: dict | None = None,
) -> Iterator[Any]:
    """Sets ``config["framework"]`` to each of `frameworks` corral runs, and yields it.

    Only "torch" runs; "tf", "tf2", "tfe" and "jax" are skipped with a warning, as RLlib
    skips a framework that is not installed (so with none but them, nothing is yielded).

    Args:
        config: a config dict (or a ``TrainerConfig``: its ``framework()`` is called).
        frameworks: the frameworks to go through.
        session: yield ``(framework, None)`` pairs (RLlib's TF session slot).
        with_eager_tracing: unused (TF only).
        time_iterations: if given, gets the seconds each framework's loop body took.

    Raises:
        ValueError: a name that is not a framework.
    """
    config = config if config is not None else {}
    frameworks = [frameworks] if isinstance(frameworks, str) else list(frameworks)
    runnable = [fw for fw in frameworks if fw == "torch"]
    for fw in frameworks:
        if fw == "jax":
            logger.warning("framework_iterator skipping JAX (not installed)!")
        elif fw in _TF_FRAMEWORKS:
            # (RLlib's words for a missing TF: corral runs on PyTorch only.)
            logger.warning("framework_iterator skipping %s (tf not installed)!", fw)
        elif fw != "torch":
            raise ValueError(f"Unknown framework {fw!r}; corral runs 'torch'.")
    for fw in runnable:
        if isinstance(config, dict):
            config["framework"] = fw
        else:
            config.framework(fw)
        started = time.time()
        yield (fw, None) if session else fw
        if time_iterations is not None:
            time_iterations[fw] = time.time() - started


def _to_numpy(x: Any) -> Any:
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return x


def check(
    x: Any,
    y: Any,
    decimals: int = 5,
    atol: float | None = None,
    rtol: float | None = None,
    false: bool = False,
) -> None:
    """Asserts that `x` equals `y` (``false=True``: that it does not).

    Dicts must have the same keys, sequences the same length; numbers, arrays and tensors
    are compared to `decimals` places, or with `atol`/`rtol` when either is given; bools,
    ints, strings and None exactly.

    Raises:
        AssertionError: they differ (or, with ``false=True``, they are the same).
    """
    if isinstance(x, dict):
        assert isinstance(y, dict), "ERROR: If x is dict, y needs to be a dict as well!"
        y_keys = set(y.keys())
        for key, value in x.items():
            assert key in y, f"ERROR: y does not have x's key='{key}'! y={y}"
            check(value, y[key], decimals=decimals, atol=atol, rtol=rtol, false=false)
            y_keys.discard(key)
        assert not y_keys, f"ERROR: y contains keys ({list(y_keys)}) that are not in x! y={y}"
    elif isinstance(x, (tuple, list)):
        assert isinstance(y, (tuple, list)), "ERROR: If x is tuple, y needs to be a tuple as well!"
        assert len(y) == len(x), (
            f"ERROR: y does not have the same length as x ({len(y)} vs {len(x)})!"
        )
        for i, value in enumerate(x):
            check(value, y[i], decimals=decimals, atol=atol, rtol=rtol, false=false)
    elif isinstance(x, (np.bool_, bool)):
        if false:
            assert bool(x) is not bool(y), f"ERROR: x ({x}) is y ({y})!"
        else:
            assert bool(x) is bool(y), f"ERROR: x ({x}) is not y ({y})!"
    elif x is None or y is None or isinstance(x, (str, int)):
        if false:
            assert x != y, f"ERROR: x ({x}) is the same as y ({y})!"
        else:
            assert x == y, f"ERROR: x ({x}) is not the same as y ({y})!"
    elif hasattr(x, "dtype") and (x.dtype == object or str(x.dtype).startswith("<U")):
        try:
            np.testing.assert_array_equal(x, y)
        except AssertionError:
            if not false:
                raise
        else:
            assert not false, f"ERROR: x ({x}) is the same as y ({y})!"
    else:
        x, y = _to_numpy(x), _to_numpy(y)
        try:
            if atol is None and rtol is None:
                np.testing.assert_almost_equal(x, y, decimal=decimals)
            else:
                np.testing.assert_allclose(
                    x, y, atol=0 if atol is None else atol, rtol=1e-7 if rtol is None else rtol
                )
        except AssertionError:
            if not false:
                raise
        else:
            assert not false, f"ERROR: x ({x}) is the same as y ({y})!"


def check_learning_achieved(tune_results: Any, min_reward: float, evaluation: bool = False) -> None:
    """Raises unless some trial of `tune_results` reached `min_reward` (its last
    ``episode_reward_mean``, or ``evaluation/episode_reward_mean`` with `evaluation`).

    Raises:
        ValueError: ``"`stop-reward` of <min_reward> not reached!"``.
    """
    rewards = [
        trial.last_result["evaluation"]["episode_reward_mean"]
        if evaluation
        else trial.last_result["episode_reward_mean"]
        for trial in tune_results.trials
    ]
    if not rewards or max(rewards) < min_reward:
        raise ValueError(f"`stop-reward` of {min_reward} not reached!")
    print("ok")


def check_compute_single_action(
    trainer: Any, include_state: bool = False, include_prev_action_reward: bool = False
) -> None:
    """Calls ``compute_single_action`` of the trainer and of its (first trainable) policy
    in every combination of ``explore``/``full_fetch``/``unsquash_action``/``clip_action``
    and checks what comes back (an action of the env's space where it must be one).

    Raises:
        ValueError: an action outside the action space (or not normalized when it should be).
    """
    import gymnasium as gym

    from corral.policy.sample_batch import DEFAULT_POLICY_ID

    pid = DEFAULT_POLICY_ID
    with contextlib.suppress(AttributeError, StopIteration, TypeError):
        pid = next(iter(trainer.workers.local_worker().get_policies_to_train()))
    pol = trainer.get_policy(pid)
    model = pol.model
    action_space = pol.action_space

    def one(what: Any, obs_space: gym.Space, full_fetch: bool, explore: bool, unsquash: Any,
            clip: Any) -> None:  # fmt: skip
        kwargs: dict[str, Any] = {}
        if what is trainer:
            kwargs = {"full_fetch": full_fetch, "policy_id": pid}
        obs = obs_space.sample()
        if isinstance(obs_space, gym.spaces.Box):
            obs = np.clip(obs, -1.0, 1.0)
        state_in = model.get_initial_state() if include_state else None
        state_in = [np.asarray(_to_numpy(s)) for s in state_in] if state_in else None
        action_in = action_space.sample() if include_prev_action_reward else None
        reward_in = 1.0 if include_prev_action_reward else None
        action = what.compute_single_action(
            obs,
            state_in,
            prev_action=action_in,
            prev_reward=reward_in,
            explore=explore,
            timestep=random.randint(0, 100000),
            unsquash_action=unsquash,
            clip_action=clip,
            **kwargs,
        )
        state_out = None
        if state_in or full_fetch or what is pol:
            action, state_out, _ = action
        if state_out:
            for si, so in zip(state_in or [], state_out):
                check(list(np.shape(si)), list(np.shape(_to_numpy(so))))
        if unsquash is None:
            unsquash = what.config["normalize_actions"]
        if clip is None:
            clip = what.config["clip_actions"]
        if what is trainer:
            if not action_space.contains(action) and (
                clip or unsquash or not isinstance(action_space, gym.spaces.Box)
            ):
                raise ValueError(
                    f"Returned action ({action}) of trainer/policy {what} not in Env's "
                    f"action_space {action_space}"
                )
            if (
                isinstance(action_space, gym.spaces.Box)
                and not unsquash
                and what.config.get("normalize_actions")
                and np.any(np.abs(action) > 15.0)
            ):
                raise ValueError(
                    f"Returned action ({action}) of trainer/policy {what} should be in "
                    "normalized space, but seems too large/small for that!"
                )

    for what in (pol, trainer):
        obs_space = pol.observation_space
        obs_space = getattr(obs_space, "original_space", obs_space)
        for explore in (True, False):
            for full_fetch in (False, True) if what is trainer else (False,):
                for unsquash in (True, False, None):
                    for clip in (False,) if unsquash else (True, False, None):
                        one(what, obs_space, full_fetch, explore, unsquash, clip)


_RESULT_KEYS = (
    "agent_timesteps_total",
    "config",
    "custom_metrics",
    "episode_len_mean",
    "episode_reward_max",
    "episode_reward_mean",
    "episode_reward_min",
    "episodes_total",
    "hist_stats",
    "info",
    "iterations_since_restore",
    "num_healthy_workers",
    "perf",
    "policy_reward_max",
    "policy_reward_mean",
    "policy_reward_min",
    "sampler_perf",
    "time_since_restore",
    "time_this_iter_s",
    "timesteps_since_restore",
    "timesteps_total",
    # RLlib 1.13 also requires "timers" (its per-phase timer means); corral's results do not
    # report those yet, so it is not asked for here.
    "time_total_s",
    "training_iteration",
)


def check_train_results(train_results: dict) -> dict:
    """Asserts that a ``Trainer.train()`` result has RLlib 1.13's keys and learner info
    layout (``info/learner/<policy_id>/learner_stats``); returns the result."""
    from corral.policy.sample_batch import DEFAULT_POLICY_ID
    from corral.utils.metrics.learner_info import LEARNER_INFO, LEARNER_STATS_KEY

    missing = [key for key in _RESULT_KEYS if key not in train_results]
    assert not missing, f"{missing} not found in `train_results` (keys: {sorted(train_results)})!"
    config = train_results["config"]
    is_multi_agent = bool((config.get("multiagent") or {}).get("policies"))
    info = train_results["info"]
    assert LEARNER_INFO in info, f"'learner' not in train_results['infos'] ({info})!"
    assert "num_steps_trained" in info or "num_env_steps_trained" in info, (
        f"'num_(env_)?steps_trained' not in train_results['infos'] ({info})!"
    )
    learner_info = info[LEARNER_INFO]
    if not is_multi_agent:
        assert len(learner_info) == 0 or DEFAULT_POLICY_ID in learner_info, (
            f"'{DEFAULT_POLICY_ID}' not found in train_results['infos']['learner'] "
            f"({learner_info})!"
        )
    for pid, policy_stats in learner_info.items():
        if pid == "batch_count":
            continue
        assert LEARNER_STATS_KEY in policy_stats, (pid, policy_stats)
        for key, value in policy_stats[LEARNER_STATS_KEY].items():
            if key.startswith(("min_", "max_")):
                assert np.isscalar(value), f"'{key}' value not a scalar ({value})!"
    return train_results


def check_same_batch(batch1: Any, batch2: Any) -> None:
    """Asserts that two SampleBatches (or MultiAgentBatches) hold the same data
    (``unroll_id`` compared only when both have one)."""
    from corral.policy.sample_batch import MultiAgentBatch, SampleBatch

    assert type(batch1) is type(batch2), (
        f"Input batches are of different types {type(batch1)} and {type(batch2)}"
    )

    def same(b1: Any, b2: Any, policy_id: Any = None) -> None:
        u1, u2 = b1.get("unroll_id"), b2.get("unroll_id")
        if u1 is not None and u2 is not None:
            check(u1, u2)
        keys1 = {k for k in b1 if k != "unroll_id"}
        keys2 = {k for k in b2 if k != "unroll_id"}
        for k in keys1 & keys2:
            check(b1[k], b2[k])
        difference = keys1 ^ keys2
        where = f" for policy {policy_id}" if policy_id is not None else ""
        assert not difference, f"SampleBatches{where} differ in columns {difference}"

    if isinstance(batch1, MultiAgentBatch):
        assert batch1.count == batch2.count
        assert set(batch1.policy_batches) == set(batch2.policy_batches)
        for pid, b in batch1.policy_batches.items():
            same(b, batch2.policy_batches[pid], pid)
    elif isinstance(batch1, SampleBatch):
        same(batch1, batch2)
    else:
        raise ValueError(f"Unsupported batch type {type(batch1)}")


# The `pass_criteria` keys of RLlib 1.13's learning-test YAML files that
# `run_learning_tests_from_yaml` checks.
PASS_CRITERIA = ("episode_reward_mean", "evaluation/episode_reward_mean", "timesteps_total")


def run_learning_tests_from_yaml(
    yaml_files: Sequence[str],
    *,
    max_num_repeats: int = 2,
    smoke_test: bool = False,
) -> dict[str, Any]:
    """Runs RLlib tuned-example YAML files as learning tests (RLlib 1.13's).

    Each file maps experiment names to specs as ``corral train -f`` reads them (``run``,
    ``env``, ``config``, ``stop``, ...; read with ``yaml.safe_load``, nothing in it is
    run as code), plus two test keys:

    - ``pass_criteria``: what its trials must reach. ``episode_reward_mean`` (or
      ``evaluation/episode_reward_mean``): the mean over its trials of each trial's best
      value; it is also added to ``stop``, so a trial ends once it gets there.
      ``timesteps_total``: with a ``time_total_s`` stop, the trials must sample at least
      ``timesteps_total / time_total_s`` steps a second (RLlib's throughput check: the
      steps within the time); without one, their last ``timesteps_total`` must reach it.
    - ``frameworks``: the frameworks to run it on; corral runs "torch" only (the
      default), the others are skipped with a warning.

    Each experiment runs with ``corral.tune.run_experiments`` as ``<name>-torch``; one
    that errs or misses a criterion runs again, up to `max_num_repeats` times in all.

    Args:
        yaml_files: paths of the YAML files.
        max_num_repeats: how many times an experiment may run until it passes.
        smoke_test: run one iteration of each experiment (``stop: {time_total_s: 0}``
            added) and pass every one that does not err, without checking criteria.

    Returns:
        RLlib's result dict: ``time_taken`` (seconds), ``trial_states`` (status ->
        number of trials), ``last_update`` (a Unix time), ``stats`` (experiment ->
        ``{"episode_reward_mean", "throughput"}`` of its last checked run), ``passed``
        (the names of the experiments that passed) and ``failures`` (experiment -> how
        many of its runs failed, for those with any).

    Raises:
        ValueError: `max_num_repeats` < 1, or a ``pass_criteria`` / ``frameworks`` entry
            that is not as described.
        corral.cli.ExperimentFileError: a file that cannot be read or is not laid out as
            experiments.
    """
    from collections import Counter

    from corral.cli.experiments import load_experiments
    from corral.tune.experiment import run_experiments

    if isinstance(max_num_repeats, bool) or not isinstance(max_num_repeats, int):
        raise ValueError(f"max_num_repeats must be an int >= 1, got {max_num_repeats!r}")
    if max_num_repeats < 1:
        raise ValueError(f"max_num_repeats must be an int >= 1, got {max_num_repeats!r}")
    if isinstance(yaml_files, str):
        yaml_files = [yaml_files]
    start = time.monotonic()
    experiments: dict[str, dict] = {}
    criteria: dict[str, dict[str, float]] = {}
    for path in yaml_files:
        logger.info("Learning tests of %s", path)
        for name, spec in load_experiments(
            path, extra_keys=("pass_criteria", "frameworks")
        ).items():
            where = f"{path}: experiment {name!r}"
            pass_criteria = _pass_criteria(where, spec.pop("pass_criteria", None))
            if not _runs_on_torch(where, spec.pop("frameworks", None)):
                continue
            spec = {key: value for key, value in spec.items() if value is not None}
            stop = dict(spec.get("stop") or {})
            if smoke_test:
                stop["time_total_s"] = 0  # one iteration
            else:
                for key in ("episode_reward_mean", "evaluation/episode_reward_mean"):
                    if key in pass_criteria:
                        stop[key] = pass_criteria[key]
            spec["stop"] = stop
            spec["config"] = {**spec.get("config", {}), "framework": "torch"}
            experiments[f"{name}-torch"] = spec
            criteria[f"{name}-torch"] = pass_criteria

    to_run = dict(experiments)
    all_trials: list[Any] = []
    stats: dict[str, dict[str, float]] = {}
    failures: Counter[str] = Counter()
    passed: list[str] = []
    for attempt in range(max_num_repeats):
        if not to_run:
            break
        logger.info("Learning tests, round %d: %s", attempt + 1, list(to_run))
        for name, spec in list(to_run.items()):
            trials = run_experiments({name: spec}, raise_on_failed_trial=False)
            all_trials.extend(trials)
            if not trials or any(t.status == "ERROR" for t in trials):
                logger.warning("Learning test %s: a trial failed.", name)
                failures[name] += 1
                continue
            if smoke_test:
                ok = True
            else:
                ok, stats[name] = _check_pass_criteria(name, trials, criteria[name], spec["stop"])
            if ok:
                passed.append(name)
                del to_run[name]
            else:
                failures[name] += 1
    return {
        "time_taken": float(time.monotonic() - start),
        "trial_states": dict(Counter(t.status for t in all_trials)),
        "last_update": float(time.time()),
        "stats": stats,
        "passed": passed,
        "failures": dict(failures),
    }


def _pass_criteria(where: str, given: Any) -> dict[str, float]:
    if given is None:
        return {}
    if not isinstance(given, dict):
        raise ValueError(f"{where}: 'pass_criteria' must be a mapping, got {given!r}")
    unknown = sorted(set(given) - set(PASS_CRITERIA))
    if unknown:
        raise ValueError(
            f"{where}: unsupported pass_criteria {unknown}; supported: {list(PASS_CRITERIA)}"
        )
    for key, value in given.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{where}: pass_criteria {key!r} must be a number, got {value!r}")
    return {key: float(value) for key, value in given.items()}


def _runs_on_torch(where: str, frameworks: Any) -> bool:
    """Whether the experiment's ``frameworks`` (None: all) include "torch"."""
    if frameworks is None:
        return True
    if isinstance(frameworks, str):
        frameworks = [frameworks]
    if not isinstance(frameworks, list) or not all(isinstance(f, str) for f in frameworks):
        raise ValueError(f"{where}: 'frameworks' must be a list of names, got {frameworks!r}")
    skipped = [f for f in frameworks if f != "torch"]
    if skipped:
        logger.warning("%s: skipping frameworks %s (corral runs on PyTorch only).", where, skipped)
    return "torch" in frameworks


def _check_pass_criteria(
    name: str, trials: Sequence[Any], criteria: dict[str, float], stop: dict
) -> tuple[bool, dict[str, float]]:
    """Whether `trials` met `criteria`, and their stats (RLlib's: mean best reward,
    throughput)."""
    reward_key = (
        "evaluation/episode_reward_mean"
        if "evaluation/episode_reward_mean" in criteria
        else "episode_reward_mean"
    )
    best = [t.metric_analysis.get(reward_key, {}).get("max") for t in trials]
    rewards = [r for r in best if r is not None and np.isfinite(r)]
    reward = float(np.mean(rewards)) if len(rewards) == len(best) else float("nan")
    timesteps = float(np.mean([t.last_result.get("timesteps_total", 0) for t in trials]))
    seconds = float(np.mean([t.last_result.get("time_total_s", 0.0) for t in trials]))
    throughput = timesteps / (seconds or 1.0)
    stats = {"episode_reward_mean": reward, "throughput": throughput}
    problems = []
    if reward_key in criteria and not reward >= criteria[reward_key]:
        problems.append(f"{reward_key} {reward} < {criteria[reward_key]}")
    if "timesteps_total" in criteria:
        budget = stop.get("time_total_s")
        if budget:
            wanted = criteria["timesteps_total"] / budget
            if throughput < wanted:
                problems.append(f"throughput {throughput:.1f} < {wanted:.1f} steps/s")
        elif timesteps < criteria["timesteps_total"]:
            problems.append(f"timesteps_total {timesteps} < {criteria['timesteps_total']}")
    if problems:
        logger.warning("Learning test %s did not pass: %s", name, "; ".join(problems))
    else:
        logger.info("Learning test %s passed: %s", name, stats)
    return not problems, stats
