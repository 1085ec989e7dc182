"""`RemoteBaseEnv`: RLlib 1.13's BaseEnv of sub-envs in their own processes.

What a rollout worker builds for ``remote_worker_envs=True``, usable directly: each
sub-env is made by ``make_env(vector_index)`` in a forked process of its own (corral's
`RemoteVectorEnv`; no Ray actors) and driven through `BaseEnv`'s ``poll`` /
``send_actions`` / ``try_reset``.

``remote_env_batch_wait_ms``: RLlib's `poll()` returned whichever sub-envs answered
within that many milliseconds. corral steps its sub-envs in lockstep: `send_actions()`
sends every sub-env its action and then waits for all of them, so each `poll()` returns
every sub-env's result. A wait could change nothing, so only 0 is accepted (anything
else raises, naming the setting) and kept as `remote_env_batch_wait_ms`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

from corral.env.remote_vector_env import RemoteVectorEnv, check_remote_env_batch_wait_ms


class RemoteBaseEnv(RemoteVectorEnv):
    """`num_envs` sub-envs, each in its own process, as a `BaseEnv`.

    Args:
        make_env: builds sub-env `vector_index` (called in that sub-env's process).
        num_envs: the number of sub-envs.
        multiagent: whether `make_env` builds `MultiAgentEnv`s (`poll` and
            `send_actions` then key each sub-env's values by agent id); it must say what
            `make_env` builds.
        remote_env_batch_wait_ms: RLlib's; must be 0 (see the module docstring: every
            `poll()` returns all sub-envs' results).
        existing_envs: already built sub-envs, used as the first ones: each is carried
            into its own process by the fork (the process steps that copy; the caller's
            object is left as it is).
        worker: the `RolloutWorker` the envs belong to (its ``worker_index`` tags the
            sub-env processes), or None.
        restart_failed_sub_environments: whether `try_step_all` callers restart failed
            sub-envs (`restart_at`); kept as an attribute.
    """

    def __init__(
        self,
        make_env: Callable[[int], gym.Env],
        num_envs: int,
        multiagent: bool,
        remote_env_batch_wait_ms: float,
        existing_envs: Sequence[gym.Env] | None = None,
        worker: Any = None,
        restart_failed_sub_environments: bool = False,
    ) -> None:
        if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
            raise ValueError(f"RemoteBaseEnv: num_envs must be an int >= 1, got {num_envs!r}.")
        wait = check_remote_env_batch_wait_ms(remote_env_batch_wait_ms)
        existing = list(existing_envs or [])
        if len(existing) > num_envs:
            raise ValueError(
                f"RemoteBaseEnv: {len(existing)} existing_envs for num_envs={num_envs}."
            )

        def build(vector_index: int) -> gym.Env:
            if vector_index < len(existing):
                return existing[vector_index]  # the fork's copy, in the child process
            return make_env(vector_index)

        self.make_env = make_env
        self.multiagent = bool(multiagent)
        self.remote_env_batch_wait_ms = wait
        self.worker = worker
        self.restart_failed_sub_environments = bool(restart_failed_sub_environments)
        super().__init__(build, num_envs, worker_index=int(getattr(worker, "worker_index", 0)))
        if self.multi_agent != self.multiagent:
            self.stop()
            built = "a MultiAgentEnv" if self.multi_agent else "a single-agent env"
            raise ValueError(
                f"RemoteBaseEnv(multiagent={multiagent!r}): make_env built {built}; pass "
                f"multiagent={self.multi_agent}."
            )
