"""What a checkpoint needs so that training resumes exactly where it stopped.

Weights, optimiser state and counters are not enough for a resumed run to
equal an uninterrupted one: the random generators of every process and the
envs' unfinished episodes matter too. An env cannot be saved in general, but
it can be replayed: `EnvReplayLog` records how each sub-env's last `reset()`
was seeded (the seed, or the state of its `np_random` generator) and the
actions stepped since, and brings a fresh copy of the env to the same state by
doing the same again. That is exact for envs whose randomness comes from
Gymnasium's `np_random` (every Gymnasium env); an env drawing from elsewhere
resumes from a replayed but possibly different state.

Everything here is plain data (numpy arrays, ints, dicts) for
`corral.utils.checkpoints.write_array_state`.
"""

from __future__ import annotations

import logging
import random
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

# Beyond this many steps since an env's last reset its actions are no longer
# recorded (an env without a time limit would grow the log without end).
MAX_LOGGED_STEPS = 100_000


# -- process random generators ------------------------------------------------------


def process_rng_state() -> dict[str, Any]:
    """The states of Python's, numpy's and torch's global generators in this process."""
    import torch

    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "python": {"version": version, "state": np.asarray(internal, np.int64), "gauss": gauss},
        "numpy": {
            "kind": kind,
            "keys": np.asarray(keys),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached": float(cached),
        },
        "torch": torch.get_rng_state().numpy().copy(),
    }


def set_process_rng_state(state: dict[str, Any]) -> None:
    """Inverse of `process_rng_state`."""
    import torch

    py = state["python"]
    random.setstate((int(py["version"]), tuple(int(x) for x in py["state"]), py["gauss"]))
    npy = state["numpy"]
    np.random.set_state(
        (
            npy["kind"],
            np.asarray(npy["keys"], np.uint32),
            npy["pos"],
            npy["has_gauss"],
            npy["cached"],
        )
    )
    torch.set_rng_state(torch.from_numpy(np.asarray(state["torch"], np.uint8).copy()))


# -- sub-envs -----------------------------------------------------------------------------


def _generator_of(env: Any) -> np.random.Generator | None:
    unwrapped = getattr(env, "unwrapped", env)
    rng = getattr(unwrapped, "_np_random", None)
    return rng if isinstance(rng, np.random.Generator) else None


class EnvReplayLog:
    """Per sub-env: how its last reset was seeded, and the actions since.

    Args:
        envs: the sampler's sub-envs (the list itself: a restarted sub-env
            replaces its entry).
    """

    def __init__(self, envs: list) -> None:
        self.envs = envs
        self.starts: list[dict | None] = [None] * len(envs)
        # One row per step: the policy's actions for all sub-envs (mapped to the
        # env's space again on replay). Rows arrive a fragment at a time from the
        # sampler's action buffer, so its per-step loop does no work for this.
        # Sub-env i's actions since its reset are `log[first[i]:]`, column i.
        self.log: list[np.ndarray] = []
        self.first = [0] * len(envs)
        # Where the fragment being sampled continues the log: the sampler sets it to
        # the row after the step it is recording (resets then start there).
        self.next_step = 0
        self.exact = True

    def before_reset(self, i: int, seed: int | None) -> None:
        """Call right before `envs[i].reset(seed=seed)`."""
        self.first[i] = len(self.log) + self.next_step
        if seed is not None:
            self.starts[i] = {"seed": int(seed)}
            return
        rng = _generator_of(self.envs[i])
        # None: the env seeds itself from the OS on its first reset (not replayable).
        self.starts[i] = None if rng is None else {"bit_generator": rng.bit_generator.state}

    def record_fragment(self, actions: np.ndarray) -> None:
        """Call once per fragment with its `[T, num_envs, ...]` policy actions."""
        self.next_step = 0
        if not self.exact:
            return
        self.log.extend(np.array(actions))  # a copy: the sampler reuses its buffer
        oldest = min(self.first)
        if oldest:  # rows no sub-env needs any more
            del self.log[:oldest]
            self.first = [f - oldest for f in self.first]
        if len(self.log) > MAX_LOGGED_STEPS:
            logger.info(
                "An env ran %d steps without a reset: checkpoints of this worker no longer "
                "replay its episode (training resumes from a fresh one).",
                MAX_LOGGED_STEPS,
            )
            self.exact = False
            self.log = []

    def get_state(self) -> dict[str, Any] | None:
        """Plain data to replay every sub-env, or None when that is not possible."""
        if not self.exact or any(s is None for s in self.starts):
            return None
        envs = []
        for i, start in enumerate(self.starts):
            rows = self.log[self.first[i] :]
            actions = np.stack([row[i] for row in rows]) if rows else np.zeros((0,), np.float32)
            envs.append({"start": start, "actions": actions})
        return {"envs": envs}

    def replay(self, state: dict[str, Any], to_env: Any) -> list[Any]:
        """Brings every sub-env to the state `get_state` described; returns each one's
        latest observation (of its reset, or of the last replayed step).

        `to_env` maps a batch of policy actions to the env's actions (the sampler's
        unsquashing and clipping)."""
        entries = state["envs"]
        if len(entries) != len(self.envs):
            raise ValueError(f"resume state of {len(entries)} sub-envs for {len(self.envs)}")
        observations = []
        replayed = []
        for i, entry in enumerate(entries):
            env, start = self.envs[i], entry["start"]
            if "seed" in start:
                obs, _ = env.reset(seed=int(start["seed"]))
            else:
                rng = _generator_of(env) or np.random.default_rng()
                rng.bit_generator.state = start["bit_generator"]
                env.unwrapped._np_random = rng
                obs, _ = env.reset()
            actions = list(np.asarray(entry["actions"])) if len(entry["actions"]) else []
            for action in actions:
                obs = env.step(to_env(action[None])[0])[0]
            self.starts[i] = start
            replayed.append(actions)
            observations.append(obs)
        # The log again, each sub-env's actions ending at the log's end; rows from
        # before a sub-env's reset hold a stand-in action that is never read.
        longest = max((len(a) for a in replayed), default=0)
        self.first = [longest - len(a) for a in replayed]
        self.log = []
        if longest:
            stand_in = np.zeros_like(next(a[0] for a in replayed if len(a)))
            for t in range(longest):
                row = [a[t - f] if t >= f else stand_in for a, f in zip(replayed, self.first)]
                self.log.append(np.stack(row))
        self.exact = True
        return observations
