"""RLlib 1.13's test helpers (``ray.rllib.utils.test_utils``), on torch.

``framework_iterator`` yields "torch" only: corral runs on PyTorch, so the TF frameworks
RLlib also iterates over are skipped with a warning (and asking for none that can run
raises). ``check`` compares nested structures of numbers, arrays and tensors as RLlib's.
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
    skips a framework that is not installed.

    Args:
        config: a config dict (or a ``TrainerConfig``: its ``framework()`` is called).
        frameworks: the frameworks to go through.
        session: yield ``(framework, None)`` pairs (RLlib's TF session slot).
        with_eager_tracing: unused (TF only).
        time_iterations: if given, gets the seconds each framework's loop body took.

    Raises:
        ValueError: none of `frameworks` is one corral runs.
    """
    config = config if config is not None else {}
    frameworks = [frameworks] if isinstance(frameworks, str) else list(frameworks)
    runnable = [fw for fw in frameworks if fw == "torch"]
    for fw in frameworks:
        if fw in _TF_FRAMEWORKS:
            logger.warning("framework_iterator skipping %s (corral runs on PyTorch only)!", fw)
        elif fw != "torch":
            raise ValueError(f"Unknown framework {fw!r}; corral runs 'torch'.")
    if not runnable:
        raise ValueError(
            f"framework_iterator(frameworks={frameworks}): corral runs on PyTorch only; "
            "add 'torch'."
        )
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
            for si, so in zip(state_in, state_out):
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
