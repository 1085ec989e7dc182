"""The sampling loop for single-agent envs: n sub-envs, one forward pass per step.

Each call to `sample()` steps every sub-env `T` times (`rollout_fragment_length`)
into preallocated `[T, num_envs, ...]` numpy buffers, then lays the buffers out
env-major (one env's steps contiguous) as a `SampleBatch`. Per step, the
Python work is: one batched policy call, one `env.step` per sub-env, a
handful of row writes and one finiteness check of the new observations;
episode bookkeeping runs only when an episode ends, and the per-step callback
only when the callbacks class overrides it. What surrounds the loop (config,
episode ids and hooks, the horizon rule, metrics, restarts, postprocessing)
is `corral.evaluation.sampler_base`, shared with the multi-agent sampler.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from corral.env.gym_compat import step_output_error
from corral.env.native_vector_env import InfoRows
from corral.env.rewards import as_reward, has_text
from corral.evaluation.episode import SINGLE_AGENT_ID, Episode
from corral.evaluation.obs_check import ObservationCheck, all_finite, batch_obs_dtype
from corral.evaluation.resume_state import EnvReplayLog
from corral.evaluation.sampler_base import (
    MAX_SUB_ENV_RESTARTS_IN_A_ROW,
    SamplerBase,
    SubEnvRestarts,
    acting_of,
    clip_rewards_in_place,
    complete_state_outs,
    flag_error,
    initial_state_of,
    object_state_indices,
    postprocess_trajectory,
    read_only,
    restart_enabled,
    reward_clip_bounds,
    reward_error,
    state_size_hint,
    to_env_of,
    training_disabled,
)

# Moved to `sampler_base` (shared with the multi-agent sampler); importable from here too.
from corral.evaluation.sampler_resume import SingleAgentResume
from corral.evaluation.sampler_split import SplitStepping
from corral.evaluation.sampler_views import SingleAgentViews
from corral.models.preprocessors import NoPreprocessor
from corral.policy.policy import declared_for
from corral.policy.sample_batch import (
    DEFAULT_POLICY_ID,
    MultiAgentBatch,
    SampleBatch,
    concat_samples,
)
from corral.policy.view_requirement import (
    ViewWindows,
    fill_future_rows,
)
from corral.utils.error import EnvError
from corral.utils.filter import NoFilter
from corral.utils.spaces import flat_action_width

# The first half of `all_finite`, inlined in the per-step check (a sum is finite only
# if every term is; `all_finite` decides when it is not).
_add_reduce = np.add.reduce
_isfinite = math.isfinite
# Every sub-env: the default group of the recording methods.
_ALL_ENVS = slice(None)
# `_assign` copies channel by channel up to this many channels.
_FEW_CHANNELS = 16

__all__ = [
    "MAX_SUB_ENV_RESTARTS_IN_A_ROW",
    "SingleAgentSampler",
    "SubEnvRestarts",
    "restart_enabled",
    "reward_clip_bounds",
]


class SingleAgentSampler(SplitStepping, SingleAgentViews, SingleAgentResume, SamplerBase):
    """Samples fragments from a `VectorEnv` with one policy.

    Episode ends follow `EpisodeEndRule` (horizon, `soft_horizon`,
    `no_done_at_end`); `sample()` returns the fragment postprocessed by the policy.
    """

    def __init__(
        self,
        worker: Any,
        vector_env: Any,
        policy: Any,
        config: dict,
        policy_id: str = DEFAULT_POLICY_ID,
    ) -> None:
        super().__init__(worker, vector_env, config)
        self.policy = policy
        self.policy_id = policy_id
        # The worker's preprocessor of the policy (RLlib 1.13 preprocesses for every
        # policy; a custom `Policy` subclass has none of its own).
        self.preprocessor = worker.preprocessors[policy_id]
        # How the policy acts and its actions reach the env (a `TorchPolicy`'s own
        # methods; RLlib's `compute_actions` for a `Policy` of one's own).
        self.compute_actions = acting_of(policy)
        self.to_env = to_env_of(policy)
        self.fast_obs = isinstance(self.preprocessor, NoPreprocessor)
        self.obs_shape = tuple(self.preprocessor.shape)
        # Every observation (reset and step) must be finite and, unless
        # `disable_env_checking`, inside a Box's bounds: finiteness once per vector
        # step on the whole row block, the bounds once per fragment.
        self.obs_check = ObservationCheck(
            self.preprocessor.original_space,
            self.obs_shape,
            bounds=self.fast_obs and self.check_obs_bounds,
        )
        # Recurrent policies, and a `Policy` of one's own whose `get_initial_state()` is
        # not empty (RLlib 1.13 gave it `state_in_<i>` views of it): the sampler carries
        # each env's state (reset with its episode) and feeds back the previous action
        # and reward.
        initial_state = initial_state_of(policy)
        self.recurrent = policy.is_recurrent() or bool(initial_state)
        # States that are Python objects (`[{}]`): object columns, one value a row.
        self.object_states = object_state_indices(initial_state)
        if self.recurrent and (
            self.object_states or getattr(policy, "compute_actions_from_obs", None) is None
        ):
            # A `Policy` of one's own (or one with object states) acts through a wrapper
            # that completes its state outputs (`complete_state_outs`); set here, once:
            # a `TorchPolicy` with array states acts unwrapped.
            self.compute_actions = self._with_complete_state_outs(self.compute_actions)
            self._compute_with_views = self._with_complete_state_outs(  # type: ignore[method-assign]
                self._compute_with_views
            )
        # Filters run after the preprocessor, on the whole row of new observations at once;
        # the default NoFilter costs nothing (the flag skips the call).
        self.obs_filter = worker.filters.get(self.policy_id, NoFilter())
        self.filter_obs = not isinstance(self.obs_filter, NoFilter)
        # Observations are float32 in the batches, except integer frames (Atari's uint8)
        # given unfiltered to a model that casts them itself (`accepts_integer_obs`, the
        # default vision net): those stay integers, a quarter of the bytes to copy and
        # store, and need no finiteness check.
        self.obs_dtype = batch_obs_dtype(
            self.preprocessor.original_space,
            getattr(policy, "model", None),  # (a custom `Policy` may have none)
            unprocessed=self.fast_obs and not self.filter_obs,
        )
        self.obs_integral = self.obs_dtype.kind in "uib"
        # The policy postprocesses a whole fragment in one call (PPO's GAE) unless
        # a subclass overrides `postprocess_trajectory` without saying it may.
        self.postprocess_batched = bool(policy.postprocess_batched) and declared_for(
            policy, "postprocess_batched", "postprocess_trajectory"
        )
        self._pending: list[list[SampleBatch]] = [[] for _ in range(self.num_envs)]
        self._buffers: dict[str, np.ndarray] | None = None
        # A fragment's `env_id` column (env-major: each sub-env's T rows in a run).
        self._env_ids = np.repeat(np.arange(self.num_envs, dtype=np.int64), self.fragment_length)
        self._extra_keys: tuple[str, ...] = ()
        self._t = 0
        # complete_episodes: finished episodes not handed out yet, oldest first.
        self._complete_queue: list[SampleBatch] = []
        # Episodes by id, while trajectories of theirs may still be postprocessed.
        self._episodes_by_id: dict[int, Episode] = {}
        # Sub-env restarts: `_valid` ([T, N], made on the first fault of a fragment)
        # marks the rows kept; complete episodes drop by episode id (also those whose
        # last info said `training_enabled: False`).
        self._valid: np.ndarray | None = None
        self._dropped_eps: set[int] = set()
        # RLlib 1.x's `training_enabled` info: [T, N], True at the rows whose info said
        # False (made on the first such info of a fragment; see `_note_untrained_rows`).
        self._untrained: np.ndarray | None = None
        # How each sub-env was reset and stepped since, for exact resumes.
        self.replay_log = EnvReplayLog(self.envs)
        # A batched vector env (`corral.env.native_vector_env`): one call steps every
        # sub-env, and a sub-env whose episode ended resets itself in its next step
        # (NEXT_STEP autoreset): `_autoreset` marks those sub-envs, whose next row
        # is dropped (`_record_vector_step`).
        self.vector_step = getattr(vector_env, "step_batched", None)
        if self.vector_step is not None or not vector_env.sub_envs_replayable:
            self.replay_log.exact = False  # its sub-envs cannot be replayed one by one
        self._autoreset = np.zeros(self.num_envs, np.bool_)
        self._reset_rows: np.ndarray | None = None
        # Groups of sub-envs that step in turn (`env_splits`, `EnvPoolSplits`); None: all
        # sub-envs step together.
        self.env_groups: list[slice] | None = getattr(vector_env, "groups", None)
        # The trajectory view API: the extra view columns the policy (or its model)
        # declared; None (the usual case) leaves the loop as it is.
        self.views = self._plan_views()
        self.view_windows = None if self.views is None else ViewWindows(self.views, self.num_envs)
        self._step_views: dict[str, np.ndarray] = {}
        if self.env_groups is not None:
            self._check_split_stepping()
        if self.store_infos:  # (`output_config.store_infos`: set once, no per-step check)
            self._record_columns = self._record_columns_and_infos  # type: ignore[method-assign]
        self._reset_all(worker.seed)

    def reset(self) -> None:
        """Starts new episodes in every sub-env (unfinished ones are dropped)."""
        self._pending = [[] for _ in range(self.num_envs)]
        self._complete_queue = []
        self._untrained = None
        super().reset()

    # -- setup --------------------------------------------------------------

    def _reset_all(self, seed: int | None) -> None:
        self.obs = np.zeros((self.num_envs, *self.obs_shape), self.obs_dtype)
        self.ep_len = np.zeros(self.num_envs, np.int64)
        self.ep_ret = np.zeros(self.num_envs, np.float64)
        self.eps_ids = np.zeros(self.num_envs, np.int64)
        self.episodes: list[Episode] = [None] * self.num_envs  # type: ignore[list-item]
        if self.recurrent:
            self._reset_recurrent_inputs()
        if self.vector_step is not None:  # one reset of the whole batched vector env
            self._autoreset[:] = False
            first_obs = self.env.vector_reset(seed)
            for i in range(self.num_envs):
                self._start_episode(i, first_obs[i])
            return
        for i in range(self.num_envs):
            obs = self._reset_sub_env(i, seed=None if seed is None else seed + i)
            self._start_episode(i, obs)

    def _reset_sub_env(self, i: int, seed: int | None = None) -> Any:
        """Resets sub-env `i` (logged for exact resumes); returns its observation."""
        self.replay_log.before_reset(i, seed)
        return self._reset_env(i, seed)[0]

    def _with_complete_state_outs(
        self, compute: Callable[..., tuple[np.ndarray, dict]]
    ) -> Callable[..., tuple[np.ndarray, dict]]:
        """`compute` (an acting call: actions and extra fetches) with the state outputs
        completed for the states it got (`complete_state_outs`)."""

        def acting(*args: Any, **kwargs: Any) -> tuple[np.ndarray, dict]:
            actions, extra = compute(*args, **kwargs)
            return actions, complete_state_outs(
                extra, self.states, self.object_states, len(actions)
            )

        return acting

    def _reset_recurrent_inputs(self) -> None:
        n = self.num_envs
        initial_state = initial_state_of(self.policy)
        self.states = [np.repeat(s[None], n, axis=0) for s in initial_state]
        # (An object state's value itself, which `_start_episode` puts in its row.)
        self.initial_state = [s[()] if s.dtype == object else s for s in initial_state]
        space = self.policy.action_space
        dtype: type[np.number] = np.float32
        if isinstance(space, gym.spaces.Tuple | gym.spaces.Dict):  # flat float32 rows
            shape = (flat_action_width(space),)
        else:
            shape = space.shape
            if np.issubdtype(space.dtype, np.integer):
                dtype = np.int64
        self.prev_actions = np.zeros((n, *shape), dtype)
        self.prev_rewards = np.zeros(n, np.float32)

    def _start_episode(
        self, i: int, raw_obs: Any, keep_state: bool = False, write_obs: bool = True
    ) -> None:
        # A soft horizon keeps the env running: the RNN state spans the cut.
        if self.recurrent and not keep_state:
            for state, initial in zip(self.states, self.initial_state):
                state[i] = initial
            self.prev_actions[i] = 0
            self.prev_rewards[i] = 0.0
        if write_obs:  # (a batched vector env's step wrote it with its row)
            self._write_obs(i, raw_obs)
        self.ep_len[i] = 0
        self.ep_ret[i] = 0.0
        eps_id = self._new_episode_id()
        self.eps_ids[i] = eps_id
        episode = self._make_episode(i, eps_id)
        episode._set_last(SINGLE_AGENT_ID, obs=self.obs[i], raw_obs=raw_obs)
        self._episode_started(episode, i, (self.policy,))

    def _make_episode(self, i: int, eps_id: int) -> Episode:
        episode = Episode(eps_id, i, self.worker.policy_map, worker=self.worker)
        episode._batch_builder_fn = self._episode_batches
        episode._last_step_fn = self._episode_last_step
        self._episodes_by_id[eps_id] = episode
        self.episodes[i] = episode
        return episode

    def _write_obs(self, i: int, raw_obs: Any, call: str = "reset") -> None:
        obs = raw_obs if self.fast_obs else self.preprocessor.transform(raw_obs)
        if np.shape(obs) != self.obs_shape:
            space = self.preprocessor.original_space
            raise EnvError(
                f"Sub-env {i} of worker {self.worker.worker_index} returned an observation of "
                f"shape {np.shape(obs)}, but its observation space {space} expects shape "
                f"{self.obs_shape}."
            )
        obs = np.asarray(obs, self.obs_dtype)
        if not self.obs_check.ok(obs):
            raise self.obs_check.error(
                obs, env=self.envs[i], call=call, worker_index=self.worker.worker_index, env_index=i
            )
        self.obs[i] = self.obs_filter(obs) if self.filter_obs else obs

    def _allocate(self, actions: np.ndarray, extra: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        T, N = self.fragment_length, self.num_envs
        buf = {
            SampleBatch.OBS: np.zeros((T, N, *self.obs_shape), self.obs_dtype),
            SampleBatch.NEXT_OBS: np.zeros((T, N, *self.obs_shape), self.obs_dtype),
            # (Rows of all N sub-envs, also when a group of them acted: `env_splits`.)
            SampleBatch.ACTIONS: np.zeros((T, N, *actions.shape[1:]), actions.dtype),
            SampleBatch.REWARDS: np.zeros((T, N), np.float32),
            SampleBatch.TERMINATEDS: np.zeros((T, N), np.bool_),
            SampleBatch.TRUNCATEDS: np.zeros((T, N), np.bool_),
            SampleBatch.EPS_ID: np.zeros((T, N), np.int64),
            SampleBatch.T: np.zeros((T, N), np.int64),
        }
        for k, v in extra.items():
            buf[k] = np.zeros((T, N, *v.shape[1:]), v.dtype)
        # The policy's extra action outputs (`Episode.last_extra_action_outs_for`).
        self._extra_keys = tuple(k for k in extra if not k.startswith("state_out_"))
        if self.recurrent:
            for i, state in enumerate(self.states):
                dtype = object if state.dtype == object else np.float32
                buf[f"state_in_{i}"] = np.zeros((T, *state.shape), dtype)
            buf[SampleBatch.PREV_ACTIONS] = np.zeros((T, *self.prev_actions.shape), actions.dtype)
            buf[SampleBatch.PREV_REWARDS] = np.zeros((T, N), np.float32)
        if self.views is not None:
            self._allocate_views(buf, T, N, actions, extra)
        if self.end_rule.keeps_dones:  # `dones` differs from the flags at soft cuts
            buf[SampleBatch.DONES] = np.zeros((T, N), np.bool_)
        if self.store_infos:  # one info dict a row (`_record_columns_and_infos`)
            buf[SampleBatch.INFOS] = np.empty((T, N), object)
        self._buffers = buf
        return buf

    @property
    def _buf(self) -> dict[str, np.ndarray]:
        """The fragment buffers (allocated at the first step)."""
        assert self._buffers is not None, "no step sampled yet"
        return self._buffers

    # -- sampling -----------------------------------------------------------

    def episode_for(self, eps_id: int) -> Episode | None:
        """The `Episode` of a trajectory in the last sampled batch (for postprocessing)."""
        return self._episodes_by_id.get(int(eps_id))

    def _forget_finished_episodes(self) -> None:
        if len(self._episodes_by_id) <= len(self.episodes):
            # Only the sub-envs' current episodes are kept (no episode started since the
            # last call): nothing to forget. (Once per `sample()`, per step for DQN.)
            return
        live = {ep.episode_id for ep in self.episodes}
        live.update(int(p[SampleBatch.EPS_ID][0]) for pend in self._pending for p in pend)
        live.update(int(b[SampleBatch.EPS_ID][0]) for b in self._complete_queue)
        self._episodes_by_id = {k: v for k, v in self._episodes_by_id.items() if k in live}

    def _episode_rows(self, episode: Episode) -> np.ndarray:
        """The buffer rows (up to the step being recorded) of this episode's steps."""
        buf = self._buffers
        if buf is None:
            return np.zeros(0, np.int64)
        i = episode.env_id
        mine = buf[SampleBatch.EPS_ID][: self._t + 1, i] == episode.episode_id
        if self._valid is not None:  # not the rows dropped (autoreset steps, restarts)
            mine &= self._valid[: self._t + 1, i]
        return np.flatnonzero(mine)

    def _episode_last_step(self, episode: Episode, agent_id: Any, what: str) -> Any:
        """For `Episode`'s `last_extra_action_outs_for` ("extra"), `last_done_for`
        ("done") and `rnn_state_for` ("state"): read from the fragment's buffers (or
        the pieces kept from earlier fragments) when asked, nothing kept per step."""
        if agent_id != SINGLE_AGENT_ID:
            return None
        i = episode.env_id
        if what == "state":
            current = self.recurrent and self.episodes[i] is episode
            if not current:
                return []
            return [s[i] if s.dtype == object else s[i].copy() for s in self.states]
        rows = self._episode_rows(episode)
        if len(rows):
            source, row, col = self._buf, int(rows[-1]), i
        else:
            pieces = [p for p in self._pending[i] if p[SampleBatch.EPS_ID][0] == episode.episode_id]
            if not pieces:
                return None
            source, row, col = pieces[-1], -1, None

        def at(key: str) -> Any:
            column = source[key]
            return column[row] if col is None else column[row, col]

        if what == "done":
            return bool(at(SampleBatch.TERMINATEDS) or at(SampleBatch.TRUNCATEDS))
        return {k: np.copy(at(k)) for k in self._extra_keys if k in source}

    def _episode_batches(self, episode: Episode) -> dict[str, list[SampleBatch]]:
        """This episode's steps in the current fragment (and pieces kept from earlier
        fragments), for `Episode.batch_builder`."""
        i, eps_id = episode.env_id, episode.episode_id
        batches = [p for p in self._pending[i] if p[SampleBatch.EPS_ID][0] == eps_id]
        buf = self._buffers
        if buf is not None:
            rows = self._episode_rows(episode)
            if len(rows):
                cols = (
                    SampleBatch.OBS,
                    SampleBatch.ACTIONS,
                    SampleBatch.REWARDS,
                    SampleBatch.TERMINATEDS,
                    SampleBatch.TRUNCATEDS,
                    SampleBatch.DONES,
                )
                piece = SampleBatch({c: buf[c][rows, i].copy() for c in cols if c in buf})
                self.end_rule.fill_dones(piece)
                batches.append(piece)
        return {self.policy_id: batches}

    def sample(self) -> SampleBatch | MultiAgentBatch:
        """One fragment, `T` steps of every sub-env (or complete episodes),
        postprocessed by the policy."""
        self._forget_finished_episodes()
        self._refresh_views()  # (requirements added to the policy since: RLlib's per batch)
        if self.complete_episodes:
            raw, stepped = self._complete_episodes()
        else:
            raw, stepped = self._run_fragment(), self.fragment_length * self.num_envs
        if not raw.count:
            # Every piece dropped (`training_enabled: False` infos, faulty sub-envs): RLlib
            # 1.13's empty batch, which still counts the env steps taken (a sampling loop
            # that waits for env steps goes on).
            return MultiAgentBatch({}, env_steps=stepped)
        if self.postprocess_batched and not self.call_postprocess_hook:
            return postprocess_trajectory(self, self.policy_id, SINGLE_AGENT_ID, raw, None)
        return concat_samples(
            [
                postprocess_trajectory(
                    self,
                    self.policy_id,
                    SINGLE_AGENT_ID,
                    trajectory,
                    self.episode_for(trajectory[SampleBatch.EPS_ID][0]),
                )
                for trajectory in raw.split_by_episode()
            ]
        )

    def _complete_episodes(self) -> tuple[SampleBatch, int]:
        """RLlib's rule: whole episodes (a horizon cut ends one too), just enough of them
        for `rollout_fragment_length` steps per sub-env; episodes finished beyond that
        wait for the next call (nothing sampled is lost). The steps of finished episodes
        that are not kept (`training_enabled: False`, a faulty sub-env) count towards
        that too, as in 1.13. Returns (the episodes' rows, the env steps they and the
        dropped episodes took)."""
        target = self.fragment_length * self.num_envs
        queue = self._complete_queue
        stepped = dropped = 0
        while sum(b.count for b in queue) + dropped < target:
            finished, skipped = self._take_complete_episodes(self._run_fragment())
            queue.extend(finished)
            dropped += skipped
            stepped += target
            self._whole_episode_wait.stepped(stepped, bool(queue) or dropped > 0)
        out: list[SampleBatch] = []
        steps = dropped
        while queue and steps < target:
            batch = queue.pop(0)
            out.append(batch)
            steps += batch.count
        return concat_samples(out) if out else SampleBatch({}), steps

    def _run_fragment(self) -> SampleBatch:
        if self.env_groups is not None:
            return self._run_split_fragment()
        timers = self.timers
        compute, to_env = self.compute_actions, self.to_env
        step_all = self.env.step_all
        vector_step = self.vector_step
        record = self._record_step if vector_step is None else self._record_vector_step
        explore, recurrent, restarts = self.worker.explore, self.recurrent, self.restarts
        unsquash, clip = self.unsquash, self.clip
        clock = time.perf_counter
        T = self.fragment_length
        failures = None
        views = self.views
        for t in range(T):
            t0 = clock()
            if views is not None:
                actions, extra = self._compute_with_views(explore)
            elif recurrent:
                actions, extra = compute(
                    self.obs, explore, self.states, self.prev_actions, self.prev_rewards
                )
            else:
                actions, extra = compute(self.obs, explore)
            t1 = clock()
            buf = self._buffers
            if buf is None:
                buf = self._allocate(actions, extra)
            if views is not None:
                self._record_step_views(buf, t)
            if recurrent:
                self._record_recurrent_inputs(buf, t, actions, extra)
            self._record_step_inputs(buf, t, actions, extra)
            env_actions = read_only(to_env(actions, unsquash, clip))
            t2 = clock()
            if vector_step is not None:  # a batched vector env: one call for all sub-envs
                results = vector_step(env_actions)
            elif restarts is None:
                results = step_all(env_actions)
            else:
                results, failures = restarts.step_all(env_actions, self._stand_in_result)
            t3 = clock()
            if self.render_env:
                self._render()
                t3 = clock()
            record(buf, t, results, actions)
            if views is not None:
                self._push_step_views(buf, t)
            if failures:
                for i, error in failures:
                    self._drop_faulty_episode(i, t, error)
            timers.inference += t1 - t0
            timers.env_wait += t3 - t2
            timers.processing += (t2 - t1) + (clock() - t3)
        timers.steps += T
        return self._build_batch(self._buf)

    def _record_step_inputs(
        self,
        buf: dict[str, np.ndarray],
        t: int,
        actions: np.ndarray,
        extra: dict[str, np.ndarray],
        cols: slice = _ALL_ENVS,
    ) -> None:
        """Row `t`'s inputs of the step, for every sub-env or the group `cols`: the
        observations acted on, the actions and the policy's extra fetches, the episode
        ids and steps."""
        buf[SampleBatch.OBS][t, cols] = self.obs[cols]
        k, v = SampleBatch.ACTIONS, actions
        try:
            buf[k][t, cols] = v
            for k, v in extra.items():
                buf[k][t, cols] = v
        except ValueError as e:  # (a policy whose outputs change shape between steps)
            raise self._shape_changed_error(k, v, buf[k]) from e
        buf[SampleBatch.EPS_ID][t, cols] = self.eps_ids[cols]
        buf[SampleBatch.T][t, cols] = self.ep_len[cols]

    def _shape_changed_error(self, column: str, values: Any, row: np.ndarray) -> ValueError:
        """The error for a policy output that no longer fits its column's rows: the
        sampler's buffers take each column's row shape from the first step (a state
        input's from `get_initial_state()`)."""
        origin = "get_initial_state()" if column.startswith("state_in_") else "its first step"
        return ValueError(
            f"Policy {self.policy_id!r} returned {column!r} values of shape "
            f"{np.shape(values)} (rows first), which do not fit the column's rows of shape "
            f"{row.shape[2:]}, set by {origin}: a policy's outputs must keep their shape "
            f"from step to step{state_size_hint(column)}."
        )

    def _stand_in_result(self, i: int) -> tuple:
        """What a failed sub-env "returned": its last observation, no reward, not done
        (recorded like any step, then dropped with the rest of its episode)."""
        return (self.episodes[i].last_raw_obs_for(SINGLE_AGENT_ID), 0.0, False, False, {})

    def _drop_faulty_episode(self, i: int, t: int, error: BaseException) -> None:
        """Sub-env `i` raised at row `t`: drops its episode's rows, reports the
        episode as faulty, and starts a new episode in a rebuilt sub-env."""
        eps_id = int(self.eps_ids[i])
        if self.complete_episodes:
            self._dropped_eps.add(eps_id)  # its earlier pieces wait in `_pending`
        else:
            if self._valid is None:
                self._valid = np.ones((self.fragment_length, self.num_envs), np.bool_)
            rows = self._buf[SampleBatch.EPS_ID][: t + 1, i] == eps_id
            self._valid[: t + 1, i] &= ~rows
        self._episode_ended(self._sync_episode(i), i, faulty=True)
        assert self.restarts is not None  # only called with restarts on
        obs = self.restarts.restart(i, error)[0]
        self._start_episode(i, obs)

    def _record_recurrent_inputs(
        self, buf: dict[str, np.ndarray], t: int, actions: np.ndarray, extra: dict
    ) -> None:
        """Stores this step's RNN inputs, then advances them to the next step."""
        for i, state in enumerate(self.states):
            buf[f"state_in_{i}"][t] = state
        buf[SampleBatch.PREV_ACTIONS][t] = self.prev_actions
        buf[SampleBatch.PREV_REWARDS][t] = self.prev_rewards
        self.states = [np.array(extra[f"state_out_{i}"]) for i in range(len(self.states))]
        self.prev_actions = np.array(actions)

    def _record_step(
        self, buf: dict[str, np.ndarray], t: int, results: list, actions: np.ndarray
    ) -> None:
        self._t = t  # the step being recorded (read by `Episode.batch_builder`)
        self.replay_log.next_step = t + 1  # a sub-env reset now acts first at row t + 1
        try:
            raw_obs, rewards, terminateds, truncateds, infos = zip(*results)
        except ValueError:  # an env returned something else than Gymnasium's 5-tuple
            bad = next(i for i, r in enumerate(results) if not _is_step_tuple(r))
            raise step_output_error(self.envs[bad], results[bad]) from None
        self._record_columns(buf, t, raw_obs, rewards, terminateds, truncateds, infos, actions)

    def _record_vector_step(
        self,
        buf: dict[str, np.ndarray],
        t: int,
        results: tuple,
        actions: np.ndarray,
        cols: slice = _ALL_ENVS,
    ) -> None:
        """Records one step of a batched vector env (stacked arrays) or of its group
        of sub-envs `cols` (`env_splits`; `results` and `actions` are the group's).

        Sub-envs whose episode ended in the previous step were reset by this one
        (NEXT_STEP autoreset: their action was ignored, the observation is the new
        episode's first): their row is no transition and is dropped from the batch,
        and their new episode starts here.
        """
        self._t = t  # the step being recorded (read by `Episode.batch_builder`)
        raw_obs, rewards, terminateds, truncateds, infos = results
        resetting = self._autoreset[cols]
        if resetting.any():
            local = np.flatnonzero(resetting)
            rows = local + (cols.start or 0)
            resetting[:] = False
            if self._valid is None:
                self._valid = np.ones((self.fragment_length, self.num_envs), np.bool_)
            self._valid[t, rows] = False
            # Copies: EnvPool may hand out views of its own buffers.
            rewards = np.array(rewards, np.float32)
            terminateds = np.array(terminateds, np.bool_)
            truncateds = np.array(truncateds, np.bool_)
            rewards[local] = 0.0
            terminateds[local] = truncateds[local] = False
            # The common step counts a step for every sub-env: at 0, no horizon cuts these.
            self.ep_len[rows] = -1
            self._reset_rows = rows
            self._record_columns(
                buf, t, raw_obs, rewards, terminateds, truncateds, infos, actions, cols
            )
            self._reset_rows = None
            # The new episodes start from the (checked, filtered) observations just written.
            for i, row in zip(local.tolist(), rows.tolist()):
                self._start_episode(row, raw_obs[i], write_obs=False)
            return
        self._record_columns(
            buf, t, raw_obs, rewards, terminateds, truncateds, infos, actions, cols
        )

    def _record_columns(
        self,
        buf: dict[str, np.ndarray],
        t: int,
        raw_obs: Any,
        rewards: Any,
        terminateds: Any,
        truncateds: Any,
        infos: Any,
        actions: np.ndarray,
        cols: slice = _ALL_ENVS,
    ) -> None:
        """Writes one step of every sub-env (sequences indexed by sub-env), or of the
        group `cols` of them, into row `t` and ends the episodes that ended in it."""
        off = cols.start or 0  # sub-env `off + i` is entry `i` of the sequences
        new_obs = buf[SampleBatch.NEXT_OBS][t, cols]
        if self.fast_obs:
            try:
                _assign(new_obs, raw_obs)
            except ValueError:
                for i, o in enumerate(raw_obs):
                    self._write_obs(off + i, o, call="step")
        else:
            for i, o in enumerate(raw_obs):
                new_obs[i] = self.preprocessor.transform(o)
        # NaN/inf must not reach the policy (it would act on it) nor the batch: one
        # vectorised check per step (integers are always finite). The bounds are
        # checked once per fragment.
        if not (
            self.obs_integral
            or _isfinite(_add_reduce(new_obs, axis=None, dtype=np.float64))
            or all_finite(new_obs)
        ):
            raise self.obs_check.error(
                new_obs,
                env=self.envs,
                call="step",
                worker_index=self.worker.worker_index,
                batched=True,
            )
        if self.filter_obs:
            # The bounds are those of the env's observations, not of filtered ones:
            # with a filter they are checked here, per step, before it runs.
            if self.obs_check.bounded and not self.obs_check.ok(new_obs):
                i = next(i for i in range(len(new_obs)) if not self.obs_check.ok(new_obs[i]))
                raise self.obs_check.error(
                    new_obs[i].copy(),
                    env=self.envs[off + i],
                    call="step",
                    worker_index=self.worker.worker_index,
                    env_index=off + i,
                )
            new_obs[:] = self.obs_filter(new_obs)
        rew = buf[SampleBatch.REWARDS][t, cols]
        try:
            rew[:] = rewards
        except (TypeError, ValueError):
            raise self._reward_error(rewards, off) from None
        if type(rewards) is not np.ndarray and has_text(rewards):  # ("1.0" would pass)
            raise self._reward_error(rewards, off)
        term = buf[SampleBatch.TERMINATEDS][t, cols]
        trunc = buf[SampleBatch.TRUNCATEDS][t, cols]
        term[:] = terminateds
        trunc[:] = truncateds
        ep_len = self.ep_len[cols]
        ep_len += 1
        self.ep_ret[cols] += rew
        if self.recurrent:
            self.prev_rewards = rew.copy()
        # Any episode end? Asked of the env's flags as they came when they are a tuple
        # (`True in` a tuple is cheaper than any numpy call), of the rows just written
        # when a batched vector env gave arrays (where `True in` is two numpy passes);
        # a horizon cut is one too.
        if isinstance(terminateds, np.ndarray):
            ended = bool((term | trunc).any())
        else:
            ended = True in terminateds or True in truncateds
            if not ended and (any(terminateds) or any(truncateds)):
                # A true flag that is no bool ("yes", 2): the row says ended, `in` not.
                raise self._flag_error(terminateds, truncateds, off)
        cut = None
        rule = self.end_rule
        if rule.active:
            cut = rule.cut(ep_len, term | trunc)
            rule.mark(term, trunc, cut)
            if rule.keeps_dones:
                buf[SampleBatch.DONES][t, cols] = rule.dones(term, trunc, cut)
            ended = ended or bool(cut is not None and cut.any())
        self.obs[cols] = new_obs
        # (Infos are mostly empty dicts: one `any` over them per step, no call.)
        if infos and (type(infos) is InfoRows or any(infos)):
            self._note_untrained_rows(t, infos, off)
        if self.call_step_hook:
            self._call_step_hooks(t, raw_obs, actions, rewards, infos, off)
        if ended:
            for i in np.flatnonzero(term | trunc).tolist():
                reset = cut is None or rule.resets_env(cut[i])
                self._end_episode(off + i, infos[i], reset=reset, last_obs=raw_obs[i])

    def _note_untrained_rows(self, t: int, infos: Any, off: int) -> None:
        """Marks the rows of row `t` whose sub-env's info says `training_enabled` is
        falsy (`training_disabled`; the pieces they end are dropped by
        `_drop_untrained_pieces`).
        `infos`: one dict per sub-env `off + i` (a batched vector env's `InfoRows`)."""
        if type(infos) is InfoRows and "training_enabled" not in infos.info:
            return  # (its rows' dicts are only built when the key is there)
        rows = [i for i in range(len(infos)) if training_disabled(infos[i])]
        if rows:
            if self._untrained is None:
                self._untrained = np.zeros((self.fragment_length, self.num_envs), np.bool_)
            self._untrained[t, [off + i for i in rows]] = True

    def _drop_untrained_pieces(self, buf: dict[str, np.ndarray], untrained: np.ndarray) -> None:
        """Drops each episode piece of the fragment whose last row's info said
        `training_enabled: False` (RLlib 1.x's rule, checked on the episode's last info
        when its rows are built into a batch): its rows in this fragment, or with
        `complete_episodes` the whole episode when the row ends it."""
        eps = buf[SampleBatch.EPS_ID]
        ended = buf[SampleBatch.TERMINATEDS] | buf[SampleBatch.TRUNCATEDS]
        # Each piece's last row in its sub-env's column: the fragment's last row, one
        # whose next row is of another episode, or one that ended its episode (a batched
        # vector env's next row, its autoreset step, still has the episode's id).
        last = np.ones_like(untrained)
        last[:-1] = (eps[1:] != eps[:-1]) | ended[:-1]
        hits = untrained & last
        if self._valid is not None:  # (an autoreset row's info is the new episode's reset's)
            hits &= self._valid
        for t, i in np.argwhere(hits).tolist():
            eps_id = int(eps[t, i])
            if self.complete_episodes:
                if ended[t, i]:  # (an unfinished piece: its episode's last info decides)
                    self._dropped_eps.add(eps_id)
                continue
            if self._valid is None:
                self._valid = np.ones((self.fragment_length, self.num_envs), np.bool_)
            self._valid[:, i] &= eps[:, i] != eps_id

    def _record_columns_and_infos(
        self,
        buf: dict[str, np.ndarray],
        t: int,
        raw_obs: Any,
        rewards: Any,
        terminateds: Any,
        truncateds: Any,
        infos: Any,
        actions: np.ndarray,
        cols: slice = _ALL_ENVS,
    ) -> None:
        """`_record_columns` with `output_config.store_infos`: row `t` of the `infos`
        column also gets the info dict each sub-env returned with this step (RLlib
        1.13's row: the info that came with the row's `new_obs`, not the reset's)."""
        row = buf[SampleBatch.INFOS][t, cols]
        for i in range(len(row)):
            row[i] = infos[i]
        SingleAgentSampler._record_columns(
            self, buf, t, raw_obs, rewards, terminateds, truncateds, infos, actions, cols
        )

    def _sync_episode(self, i: int) -> Episode:
        """The `Episode` of sub-env `i` with its length and returns brought up to date
        (the loop keeps them in arrays)."""
        episode = self.episodes[i]
        episode.length = int(self.ep_len[i])
        episode.total_reward = float(self.ep_ret[i])
        episode.agent_rewards[(SINGLE_AGENT_ID, self.policy_id)] = episode.total_reward
        return episode

    def _call_step_hooks(self, t, raw_obs, actions, rewards, infos, off: int = 0) -> None:
        """`on_episode_step` for sub-envs `off + i` (entry `i` of the sequences)."""
        skip = () if self._reset_rows is None else set(self._reset_rows.tolist())
        for i in range(len(raw_obs)):
            env_index = off + i
            if env_index in skip:  # an autoreset step, not a step of an episode
                continue
            episode = self._sync_episode(env_index)
            episode._set_last(
                SINGLE_AGENT_ID,
                obs=self._buf[SampleBatch.NEXT_OBS][t][env_index],
                raw_obs=raw_obs[i],
                action=actions[i],
                reward=float(rewards[i]),
                info=infos[i],
            )
            self._episode_step_hook(episode, env_index)

    def _end_episode(self, i: int, info: dict, reset: bool, last_obs: Any) -> None:
        episode = self._sync_episode(i)
        episode._set_last(SINGLE_AGENT_ID, raw_obs=last_obs, info=info)
        self._episode_ended(episode, i)
        if reset and self.vector_step is not None:
            self._autoreset[i] = True  # the batched vector env resets it in its next step
            return
        obs = self._reset_sub_env(i) if reset else last_obs
        self._start_episode(i, obs, keep_state=not reset)

    def _check_fragment_obs(self, next_obs: np.ndarray) -> None:
        """All of a fragment's observations inside the Box's bounds, in one vectorised
        check (rows of dropped episodes excepted). Filtered fragments were checked
        step by step before filtering (`_record_step`)."""
        if not self.obs_check.bounded or self.filter_obs:
            return
        rows = next_obs if self._valid is None else next_obs[self._valid]
        if self.obs_check.ok(rows):
            return
        for t in range(len(next_obs)):
            for i in range(self.num_envs):
                valid = self._valid is None or self._valid[t, i]
                if valid and not self.obs_check.ok(next_obs[t, i]):
                    raise self.obs_check.error(
                        next_obs[t, i],
                        env=self.envs[i],
                        call="step",
                        worker_index=self.worker.worker_index,
                        env_index=i,
                    )

    def _reward_error(self, rewards: Any, off: int) -> EnvError:
        """The error for the first of `rewards` (sub-envs `off`, `off + 1`, ...) that is
        no number."""

        def is_number(value: Any) -> bool:
            try:
                as_reward(value, "step()")
            except TypeError:
                return False
            return True

        # (0 when each one passes float(): a reward numpy still cannot put in a float row)
        i = next((i for i, value in enumerate(rewards) if not is_number(value)), 0)
        return reward_error(self.envs[off + i], off + i, self.worker.worker_index, rewards[i])

    def _flag_error(self, terminateds: Any, truncateds: Any, off: int) -> EnvError:
        """The error for the first true flag of sub-envs `off`, `off + 1`, ... that is
        no bool (see `flag_error`)."""
        for name, flags in (("terminated", terminateds), ("truncated", truncateds)):
            for i, value in enumerate(flags):
                if value and value is not True:
                    env = self.envs[off + i]
                    return flag_error(env, off + i, self.worker.worker_index, name, value)
        raise AssertionError("no true flag that is no bool")  # (the caller found one)

    def _build_batch(self, buf: dict[str, np.ndarray]) -> SampleBatch:
        self.replay_log.record_fragment(buf[SampleBatch.ACTIONS])
        rewards = buf[SampleBatch.REWARDS]
        if not all_finite(rewards):
            t, i = (int(x[0]) for x in np.nonzero(~np.isfinite(rewards)))
            raise reward_error(self.envs[i], i, self.worker.worker_index, float(rewards[t, i]))
        self._check_fragment_obs(buf[SampleBatch.NEXT_OBS])
        clip_rewards_in_place(rewards, self.reward_clip)
        if self.views is not None:
            self._fill_future_views(buf)
        if self._untrained is not None:
            untrained, self._untrained = self._untrained, None
            self._drop_untrained_pieces(buf, untrained)
        columns = {k: _env_major(v) for k, v in buf.items()}
        term = columns[SampleBatch.TERMINATEDS]
        self.end_rule.fill_dones(columns)
        n = len(term)
        columns[SampleBatch.ENV_ID] = self._env_ids.copy()
        columns[SampleBatch.AGENT_INDEX] = np.zeros(n, np.int64)
        if self._valid is not None:
            # Rows of episodes whose sub-env raised (restart_failed_sub_environments).
            keep = _env_major(self._valid)
            self._valid = None
            columns = {k: v[keep] for k, v in columns.items()}
        return SampleBatch(columns)

    def _take_complete_episodes(self, batch: SampleBatch) -> tuple[list[SampleBatch], int]:
        """Keeps unfinished episodes for the next fragment; returns (the finished ones,
        the rows of finished episodes dropped)."""
        done_eps: list[SampleBatch] = []
        dropped = 0
        # Each sub-env's rows are contiguous (fewer than T where rows were dropped).
        bounds = np.searchsorted(batch[SampleBatch.ENV_ID], np.arange(self.num_envs + 1))
        for i in range(self.num_envs):
            column = batch.slice(int(bounds[i]), int(bounds[i + 1]))
            pieces = self._pending[i] + column.split_by_episode()
            self._pending[i] = []
            merged = _merge_by_episode(pieces)
            if self._dropped_eps:
                # Episodes whose sub-env raised, or whose last info said
                # `training_enabled: False`: none of their rows is kept.
                kept = [m for m in merged if int(m[SampleBatch.EPS_ID][0]) not in self._dropped_eps]
                dropped += sum(m.count for m in merged) - sum(m.count for m in kept)
                merged = kept
            if not merged:  # every row dropped (faulty episodes, autoreset steps)
                continue
            finished = merged[:-1]
            last = merged[-1]
            if last[SampleBatch.TERMINATEDS][-1] or last[SampleBatch.TRUNCATEDS][-1]:
                finished.append(last)
            else:
                self._pending[i] = [last.copy()]
            if self.views is not None:  # later offsets across the fragments' cuts
                for ep in finished:
                    fill_future_rows(self.views, ep)
            done_eps.extend(finished)
        self._dropped_eps.clear()
        return done_eps, dropped


def _is_step_tuple(result: Any) -> bool:
    return isinstance(result, tuple) and len(result) == 5


def _assign(dst: np.ndarray, src: Any) -> None:
    """`dst[:] = src`; a channels-first frame stack handed on channels-last (a
    `np.moveaxis` view, as EnvPool's Atari frames) is copied one channel at a time.

    numpy copies such a view with the short channel axis innermost: 8 Pong frame stacks
    (84x84x4, uint8) took 218 us that way, 65 us a channel at a time (each channel's
    source contiguous).
    """
    if (
        isinstance(src, np.ndarray)
        and src.ndim >= 3
        and src.shape == dst.shape
        and src.shape[-1] <= _FEW_CHANNELS
        and src.strides[-1] > src.strides[-2]  # the last axis is not the innermost
    ):
        for c in range(src.shape[-1]):
            dst[..., c] = src[..., c]
    else:
        dst[:] = src


def _env_major(arr: np.ndarray) -> np.ndarray:
    """[T, N, ...] -> [N * T, ...] with each env's steps contiguous.

    Always a copy: the buffers are reused by the next fragment.
    """
    if arr.shape[0] == 1:  # one step (off-policy fragments): already in order
        return arr[0].copy()
    if arr.shape[1] == 1:  # one env
        return arr[:, 0].copy()
    return np.array(arr.swapaxes(0, 1), order="C").reshape(-1, *arr.shape[2:])


def _merge_by_episode(pieces: list[SampleBatch]) -> list[SampleBatch]:
    """Joins consecutive pieces that belong to the same episode."""
    merged: list[list[SampleBatch]] = []
    for p in pieces:
        if merged and merged[-1][-1][SampleBatch.EPS_ID][0] == p[SampleBatch.EPS_ID][0]:
            merged[-1].append(p)
        else:
            merged.append([p])
    return [concat_samples(group) for group in merged]
