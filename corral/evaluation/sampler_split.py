"""Double-buffered sampling (`env_splits` > 1): groups of sub-envs that step in turn.

A worker's EnvPool pools (`corral.env.envpool_env.EnvPoolSplits`) step in C++
threads. Stepped all together, the sampler waits for the envs, then the envs wait
for the policy's forward pass. With the sub-envs in G groups, the loop sends group
`g`'s actions and, while EnvPool steps them, receives and records the group sent
before it and computes its next actions: the forward passes overlap the envs' steps.

Group `g`'s step `t` is recorded into row `t` of the fragment's buffers, columns
`groups[g]`, exactly as a step of all sub-envs would be (the same checks, episode
ends, autoreset rows and callbacks), so a fragment holds the same rows as with one
pool; only the order in which the groups' actions are drawn differs.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Any

import numpy as np

from corral.policy.sample_batch import SampleBatch

if TYPE_CHECKING:
    from corral.evaluation.sampler_base import SamplerTimers


class SplitStepping:
    """`SingleAgentSampler`'s loop over groups of sub-envs (`env_groups`)."""

    if TYPE_CHECKING:  # provided by SingleAgentSampler
        env: Any
        env_groups: list[slice] | None
        policy: Any
        compute_actions: Any
        to_env: Any
        timers: SamplerTimers
        worker: Any
        fragment_length: int
        recurrent: bool
        views: Any
        obs: np.ndarray
        unsquash: bool
        clip: bool
        _buffers: dict[str, np.ndarray] | None

        @property
        def _buf(self) -> dict[str, np.ndarray]: ...

        def _allocate(self, actions: np.ndarray, extra: dict) -> dict[str, np.ndarray]: ...
        def _record_step_inputs(
            self, buf: dict, t: int, actions: np.ndarray, extra: dict, cols: slice = ...
        ) -> None: ...
        def _record_vector_step(
            self, buf: dict, t: int, results: tuple, actions: np.ndarray, cols: slice = ...
        ) -> None: ...
        def _build_batch(self, buf: dict[str, np.ndarray]) -> SampleBatch: ...

    def _check_split_stepping(self) -> None:
        """Refuses what the group-by-group loop does not carry (named)."""
        if self.recurrent:
            raise NotImplementedError(
                "env_splits > 1 with a recurrent policy is not built (the groups would "
                "carry their RNN states apart); set env_splits=1."
            )
        if self.views is not None:
            raise NotImplementedError(
                "env_splits > 1 with extra trajectory view columns is not built; set env_splits=1."
            )

    def _run_split_fragment(self) -> SampleBatch:
        """`T` steps of every group; group `g + 1` acts while group `g`'s envs step."""
        assert self.env_groups is not None
        env, groups, timers = self.env, self.env_groups, self.timers
        compute, to_env = self.compute_actions, self.to_env
        explore, unsquash, clip = self.worker.explore, self.unsquash, self.clip
        clock = time.perf_counter
        T = self.fragment_length
        # Sent and not yet received: (group, step, its actions), oldest first. Groups act
        # round robin, and after each send the oldest one is received once all G are
        # out, so the next group to act is never in flight.
        in_flight: deque[tuple[int, int, np.ndarray]] = deque()

        def receive() -> None:
            g, t, actions = in_flight.popleft()
            t0 = clock()
            results = env.recv_group(g)
            t1 = clock()
            self._record_vector_step(self._buf, t, results, actions, groups[g])
            timers.env_wait += t1 - t0
            timers.processing += clock() - t1

        for t in range(T):
            for g, cols in enumerate(groups):
                t0 = clock()
                actions, extra = compute(self.obs[cols], explore)
                t1 = clock()
                env.send_group(g, to_env(actions, unsquash, clip))
                # The rows of this step are written while the group's envs step.
                buf = self._buffers
                if buf is None:
                    buf = self._allocate(actions, extra)
                self._record_step_inputs(buf, t, actions, extra, cols)
                in_flight.append((g, t, actions))
                timers.inference += t1 - t0
                timers.processing += clock() - t1
                if len(in_flight) == len(groups):
                    receive()
        while in_flight:
            receive()
        timers.steps += T
        return self._build_batch(self._buf)
