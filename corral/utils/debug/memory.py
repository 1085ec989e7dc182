"""RLlib 1.13's memory-leak checker: ``check_memory_leaks(trainer)``.

Each part of the trainer's local worker (its env, its policy, the policy's model and the
worker's sampling) is called over and over under :mod:`tracemalloc`, a snapshot after
each call. An allocation site (a traceback) whose memory keeps growing along a line
across the calls is a :class:`Suspect`. A site found in one round is watched again in a
longer round (``repeats * (trial + 1)`` calls, tracing restarted): only what grows in
every round is reported, so a cache filled once does not count.

    from corral.utils.debug import check_memory_leaks

    results = check_memory_leaks(trainer, to_check={"env"}, repeats=100)
    assert not results["env"], results["env"]
"""

from __future__ import annotations

import gc
import logging
import tracemalloc
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from corral.policy.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch
from corral.utils import _nest

if TYPE_CHECKING:
    from corral.evaluation.rollout_worker import RolloutWorker
    from corral.policy.policy import Policy

__all__ = ["Suspect", "check_memory_leaks"]

logger = logging.getLogger(__name__)

# The parts `check_memory_leaks` can exercise (RLlib 1.13's), each with its default
# number of calls per round (RLlib's).
_DEFAULT_REPEATS = {
    "env": 200,
    "policy": 400,
    "learn_on_batch": 100,
    "model": 400,
    "rollout_worker": 400,
}
CHECKABLE = ("env", "policy", "model", "rollout_worker")

# How many frames of each allocation's stack `tracemalloc` keeps (RLlib's 20).
_TRACEBACK_FRAMES = 20
# Every snapshot records the sizes of its largest allocation sites; the next ones only
# when they were suspects of the round before (RLlib's 100 and 1000).
_ALWAYS_TRACKED = 100
_TRACKED_IF_SUSPECT = 1000


class Suspect(NamedTuple):
    """An allocation site whose memory grew along a line while a part was exercised."""

    # Where the memory was allocated: a `tracemalloc.Traceback` (oldest frame first, the
    # allocating line last), `_TRACEBACK_FRAMES` frames deep.
    traceback: Any
    # Bytes the site held at the last snapshot minus at the first.
    memory_increase: int
    # Slope (bytes per call) and correlation coefficient of the least-squares line
    # through the site's sizes, one per call.
    slope: float
    rvalue: float
    # The site's size (bytes) after each call.
    hist: list[int]


def check_memory_leaks(
    trainer: Any,
    to_check: Iterable[str] | None = None,
    repeats: int | None = None,
    max_num_trials: int = 3,
) -> defaultdict[str, list[Suspect]]:
    """Looks for memory leaks in the parts of `trainer`'s local worker (RLlib 1.13's).

    Parts (`to_check`):

    - ``"env"``: the worker's first sub-env, run through whole episodes (``reset``, then
      ``step`` with a fixed random action until it ends).
    - ``"policy"``: the default policy's ``compute_actions_from_input_dict`` on a batch of
      10 observations, then its ``learn_on_batch`` on a batch the worker samples once.
    - ``"model"``: forward passes of the default policy's model on one observation.
    - ``"rollout_worker"``: the worker's ``sample()`` (and ``get_metrics()``, which
      empties the episode list ``sample`` fills).

    Args:
        trainer: the Trainer; its local worker must have an env for "env" and "policy"
            (with ``num_workers`` > 0 set ``create_env_on_driver=True``).
        to_check: the parts to check; None: all four.
        repeats: calls per round; None: RLlib's defaults (200 env episodes, 400 policy
            and model calls, 100 ``learn_on_batch`` calls, 400 samples). Round ``k``
            (from 0) makes ``repeats * (k + 1)`` calls.
        max_num_trials: at most this many rounds per check; a round runs only while the
            round before found suspects, and what the last round finds is reported.

    Returns:
        A ``defaultdict(list)``: part name -> its :class:`Suspect` s (a part with none
        is absent); all empty: no leak found.

    Raises:
        ValueError: an unknown part, ``repeats`` or ``max_num_trials`` < 1, or a part
            that needs the local worker's env when it has none.
    """
    parts = set(CHECKABLE) if to_check is None else set(to_check)
    unknown = sorted(parts - set(CHECKABLE))
    if unknown:
        raise ValueError(
            f"check_memory_leaks(to_check={sorted(parts)}): unknown parts {unknown}; "
            f"expected some of {list(CHECKABLE)}"
        )
    if repeats is not None and (not isinstance(repeats, int) or repeats < 1):
        raise ValueError(f"check_memory_leaks(repeats={repeats!r}): expected an int >= 1 or None")
    if not isinstance(max_num_trials, int) or max_num_trials < 1:
        raise ValueError(
            f"check_memory_leaks(max_num_trials={max_num_trials!r}): expected an int >= 1"
        )
    worker = trainer.workers.local_worker()
    results: defaultdict[str, list[Suspect]] = defaultdict(list)

    def run(part: str, what: str, desc: str, code: Callable[[], Any]) -> None:
        n = repeats or _DEFAULT_REPEATS[what]
        logger.info("Looking for leaks in %s: %s", part, desc)
        suspects = _test_some_code_for_memory_leaks(desc, None, code, n, max_num_trials)
        if suspects:
            results[part].extend(suspects)

    if "env" in parts:
        env = _first_sub_env(worker)
        run("env", "env", "running the env through episodes", _episode_runner(env))
        env.reset()  # leave it ready for the sampler
    if "policy" in parts:
        policy = worker.policy_map[DEFAULT_POLICY_ID]
        input_dict = {SampleBatch.OBS: _observations(policy, 10)}
        run(
            "policy",
            "policy",
            "calling `compute_actions_from_input_dict()`",
            lambda: policy.compute_actions_from_input_dict(input_dict),
        )
        batch = _training_batch(worker)
        run(
            "policy",
            "learn_on_batch",
            "calling `learn_on_batch()`",
            lambda: policy.learn_on_batch(batch),
        )
    if "model" in parts:
        model_call = _model_caller(worker.policy_map[DEFAULT_POLICY_ID])
        run("model", "model", "calling the model", model_call)
    if "rollout_worker" in parts:

        def sample() -> None:
            worker.sample()
            worker.get_metrics()

        run("rollout_worker", "rollout_worker", "calling `sample()`", sample)
    return results


def _first_sub_env(worker: RolloutWorker) -> Any:
    if worker.async_env is None:
        raise ValueError(
            "check_memory_leaks: the trainer's local worker has no env to check; with "
            "num_workers > 0 set create_env_on_driver=True"
        )
    return worker.async_env.get_sub_environments()[0]


def _episode_runner(env: Any) -> Callable[[], None]:
    """One episode of `env` per call, always with the same action (a fresh random
    action every step would trace numpy's own allocations)."""
    from corral.env.multi_agent_env import MultiAgentEnv

    multi_agent = isinstance(env, MultiAgentEnv)
    if multi_agent:
        actions: dict[Any, Any] = {}
    else:
        action = env.action_space.sample()

    def run_episode() -> None:
        obs, _ = env.reset()
        while True:
            if multi_agent:
                for agent_id in obs:
                    if agent_id not in actions:
                        actions[agent_id] = env.get_action_space(agent_id).sample()
                step_actions = {agent_id: actions[agent_id] for agent_id in obs}
                obs, _, terminated, truncated, _ = env.step(step_actions)
                if terminated.get("__all__") or truncated.get("__all__"):
                    return
            else:
                _, _, terminated, truncated, _ = env.step(action)
                if terminated or truncated:
                    return

    return run_episode


def _observations(policy: Policy, batch_size: int) -> Any:
    """`batch_size` copies of one random observation of the policy's (preprocessed) space."""
    one = policy.observation_space.sample()
    return _nest.map_structure(lambda x: np.stack([x] * batch_size, axis=0), one)


def _training_batch(worker: RolloutWorker) -> SampleBatch:
    """A postprocessed batch of the default policy, sampled once (RLlib builds a dummy
    batch from the policy's view requirements; a sampled one has every column the loss
    reads)."""
    if worker.async_env is None and worker.input_reader is None:
        raise ValueError(
            "check_memory_leaks: 'policy' needs a batch sampled by the local worker, which "
            "has no env; with num_workers > 0 set create_env_on_driver=True"
        )
    batch = worker.sample()
    if isinstance(batch, MultiAgentBatch):
        batch = batch.policy_batches[DEFAULT_POLICY_ID]
    batch.decompress_if_needed()
    return batch


def _model_caller(policy: Policy) -> Callable[[], Any]:
    """A forward pass of the policy's model on one observation per call."""
    import torch

    model = policy.model  # type: ignore[attr-defined]
    device = getattr(policy, "device", None)
    obs = _nest.map_structure(
        lambda x: torch.as_tensor(np.asarray(x)[None], device=device),
        policy.observation_space.sample(),
    )
    state = [
        torch.as_tensor(np.asarray(s)[None], device=device) for s in policy.get_initial_state()
    ]
    seq_lens = torch.ones(1, dtype=torch.int32, device=device) if state else None
    return lambda: model({SampleBatch.OBS: obs}, state, seq_lens)


def _test_some_code_for_memory_leaks(
    desc: str,
    init: Callable[[], Any] | None,
    code: Callable[[], Any],
    repeats: int,
    max_num_trials: int = 1,
) -> list[Suspect]:
    """Runs `code` `repeats * (trial + 1)` times per round under tracemalloc; returns the
    suspects of the last round (a new round runs only while the last one found some)."""
    suspicious: set[Any] = set()
    suspects: list[Suspect] = []
    was_tracing = tracemalloc.is_tracing()
    for trial in range(max_num_trials):
        n = repeats * (trial + 1)
        logger.info("%s, %d times (round %d).", desc, n, trial + 1)
        table: defaultdict[Any, list[int]] = defaultdict(list)
        tracemalloc.start(_TRACEBACK_FRAMES)
        try:
            if init is not None:
                init()
            for _ in range(n):
                code()
                _take_snapshot(table, suspicious if trial > 0 else None)
        finally:
            tracemalloc.stop()
        suspects = sorted(
            _find_memory_leaks_in_table(table), key=lambda s: s.memory_increase, reverse=True
        )
        suspicious = {s.traceback for s in suspects}
        if not suspects:
            logger.info("No suspects left.")
            break
        top = suspects[0]
        logger.info(
            "%d suspects; the largest: +%d B (slope %.1f B/call, r=%.2f) at %s",
            len(suspects),
            top.memory_increase,
            top.slope,
            top.rvalue,
            top.traceback[-1],
        )
    if was_tracing:  # someone else was tracing: leave it on (its traces are gone)
        tracemalloc.start(_TRACEBACK_FRAMES)
    return suspects


def _take_snapshot(table: defaultdict[Any, list[int]], suspicious: set[Any] | None) -> None:
    """Appends each large allocation site's size to its row of `table`."""
    # A full collection frees garbage that waits in reference cycles, and empties the
    # interpreter's free lists (e.g. up to 2000 freed tuples of each size), which
    # tracemalloc counts as allocated until then: neither is a leak.
    gc.collect()
    snapshot = tracemalloc.take_snapshot().filter_traces(
        # Not the checker's own bookkeeping (its table grows by a number each call).
        (
            tracemalloc.Filter(False, tracemalloc.__file__),
            tracemalloc.Filter(False, __file__),
        )
    )
    stats = snapshot.statistics("traceback")
    for stat in stats[:_ALWAYS_TRACKED]:
        table[stat.traceback].append(stat.size)
    for stat in stats[_ALWAYS_TRACKED:_TRACKED_IF_SUSPECT]:
        if suspicious is None or stat.traceback in suspicious:
            table[stat.traceback].append(stat.size)


def _linregress(hist: list[int]) -> tuple[float, float]:
    """Slope and Pearson r of the least-squares line through ``(i, hist[i])``."""
    x = np.arange(len(hist), dtype=np.float64)
    y = np.asarray(hist, dtype=np.float64)
    dx, dy = x - x.mean(), y - y.mean()
    sxx, syy = float(dx @ dx), float(dy @ dy)
    if sxx == 0.0:
        return 0.0, 0.0
    slope = float(dx @ dy) / sxx
    rvalue = float(dx @ dy) / float(np.sqrt(sxx * syy)) if syy > 0.0 else 0.0
    return slope, rvalue


def _find_memory_leaks_in_table(table: dict[Any, list[int]]) -> list[Suspect]:
    """The sites that grew by over 1000 B along a line (RLlib 1.13's thresholds: a slope
    over 10 B per call, or over 6 with r > 0.8, or over 4 with r > 0.6)."""
    suspects = []
    for traceback, hist in table.items():
        if len(hist) < 2:
            continue
        memory_increase = hist[-1] - hist[0]
        if memory_increase <= 1000:
            continue
        slope, rvalue = _linregress(hist)
        if slope > 10.0 or (slope > 6.0 and rvalue > 0.8) or (slope > 4.0 and rvalue > 0.6):
            suspects.append(Suspect(traceback, memory_increase, slope, rvalue, list(hist)))
    return suspects
