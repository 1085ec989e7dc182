"""The sampling loop for `MultiAgentEnv`s: n sub-envs, one forward pass per policy per step.

Per step, the agents that received an observation in any sub-env are
grouped by the policy they map to, and each policy computes the actions of
its whole group in one batched call. Each (sub-env, agent) pair has a
trajectory builder; an agent's transition is complete when its next
observation arrives (rewards received in between are summed into it), when
it is done, or when the episode ends. Builders hand out contiguous
per-agent trajectories, so postprocessing (GAE) never runs across agents.
The result is a `MultiAgentBatch` of postprocessed per-policy batches whose
count is env steps. What surrounds the loop (config, episode ids and hooks,
the horizon rule, metrics, reward clipping, rendering, restarts,
postprocessing) is `corral.evaluation.sampler_base`, shared with the
single-agent sampler.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np

from corral.env.gym_compat import step_output_error
from corral.env.rewards import as_reward
from corral.evaluation.episode import Episode
from corral.evaluation.obs_check import ObservationCheck
from corral.evaluation.sampler_base import (
    SamplerBase,
    clip_rewards_in_place,
    initial_state_of,
    object_rows,
    object_state_indices,
    policy_actions,
    postprocess_trajectory,
    read_only,
    reward_error,
    sampler_columns,
    state_size_hint,
    to_env_of,
    training_disabled,
)
from corral.evaluation.sampler_views import views_key
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch, concat_samples
from corral.policy.view_requirement import (
    ViewPlan,
    ViewWindows,
    accepts_view_inputs,
    action_spec,
    fill_future_rows,
)
from corral.utils.spaces import flat_action_width

ALL = "__all__"


class _Pending(NamedTuple):
    """An action whose outcome (reward, next observation) is not known yet."""

    obs: np.ndarray
    action: Any
    extra: dict[str, Any]


class _AgentTrajectory:
    """Completed transitions of one agent in one sub-env since the last hand-out."""

    def __init__(self, policy_id: str, agent_index: int) -> None:
        self.policy_id = policy_id
        self.agent_index = agent_index
        self.pending: _Pending | None = None
        self.reward = 0.0
        self.steps = 0
        self.rows: dict[str, list] = defaultdict(list)
        # Recurrent (stateful) policies: this agent's state, previous action and reward.
        self.state: list[np.ndarray] | None = None
        # Its state columns whose values are Python objects (`object_state_indices`).
        self.object_columns: frozenset[str] = frozenset()
        self.prev_action: Any = None
        self.prev_reward = 0.0
        # The trajectory view API: the latest values the policy's extra view columns
        # read (None: the policy declares none), and how rewards are clipped.
        self.view_windows: ViewWindows | None = None
        self.reward_clip: tuple[float | None, float] | None = None

    def act(self, obs: np.ndarray, action: Any, extra: dict[str, Any]) -> None:
        self.pending = _Pending(obs, action, extra)
        self.reward = 0.0
        self.steps += 1

    def close(
        self,
        new_obs: np.ndarray | None,
        terminated: bool,
        truncated: bool,
        t: int,
        info: dict | None = None,
        done: bool | None = None,
    ) -> None:
        """Completes the pending transition (new_obs None: the agent left without one).

        `t` is the row's `t` (RLlib 1.13's): the index in the episode of the env step
        that completed it (the env's steps, so an agent that skips env steps has gaps).
        `info` is the agent's info dict of that step, kept by `_AgentInfosTrajectory`
        only (`output_config.store_infos`). `done` is the row's `dones` flag
        (`EpisodeEndRule.dones`; by default `terminated or truncated`).
        """
        p = self.pending
        assert p is not None, "no pending action to complete"
        rows = self.rows
        rows[SampleBatch.OBS].append(p.obs)
        rows[SampleBatch.NEXT_OBS].append(p.obs if new_obs is None else new_obs)
        rows[SampleBatch.ACTIONS].append(p.action)
        rows[SampleBatch.REWARDS].append(self.reward)
        rows[SampleBatch.TERMINATEDS].append(terminated)
        rows[SampleBatch.TRUNCATEDS].append(truncated)
        rows[SampleBatch.DONES].append((terminated or truncated) if done is None else done)
        rows[SampleBatch.T].append(t)
        for k, v in p.extra.items():
            rows[k].append(v)
        if self.view_windows is not None:
            self._push_views(self.view_windows, p, new_obs, terminated, truncated, t)
        self.pending = None
        self.prev_reward = self.reward
        self.reward = 0.0

    def _push_views(
        self,
        windows: ViewWindows,
        p: _Pending,
        new_obs: np.ndarray | None,
        terminated: bool,
        truncated: bool,
        t: int,
    ) -> None:
        """The closed transition's values of the columns the views read."""
        for d in windows.plan.pushed_cols:
            if d == SampleBatch.ACTIONS:
                value: Any = p.action
            elif d == SampleBatch.REWARDS:
                value = np.array([self.reward], np.float32)
                clip_rewards_in_place(value, self.reward_clip)
                value = value[0]
            elif d == SampleBatch.NEXT_OBS:
                value = p.obs if new_obs is None else new_obs
            elif d == SampleBatch.TERMINATEDS:
                value = terminated
            elif d == SampleBatch.TRUNCATEDS:
                value = truncated
            elif d == SampleBatch.T:
                value = t
            elif d in p.extra:
                value = p.extra[d]
            else:  # not recorded for this policy: the view reads zeros
                continue
            windows.push(d, np.asarray(value)[None])

    def replan_views(self, old: ViewPlan | None, new: ViewPlan | None) -> None:
        """The agent's policy's views were planned again (`MultiAgentSampler._refresh_views`).

        The rows recorded so far (and the pending action's) lose the view columns the
        new plan drops or changes and read zeros for its new ones; the windows start
        empty, so the agent's next steps read zeros for its steps before the change
        (as for the steps before an episode's start). Later offsets are filled from
        the rows when the trajectory is taken, the earlier rows' too.
        """
        # (Columns with past offsets only: later ones are not recorded per step.)
        after = {c.name: c for c in new.training if len(c.past)} if new is not None else {}
        pending = self.pending
        extra = None if pending is None else dict(pending.extra)
        n = len(self.rows.get(SampleBatch.REWARDS, ()))
        for c in old.training if old is not None else ():
            kept = after.get(c.name)
            if len(c.past) and (kept is None or not _same_view(old, c, new, kept)):
                self.rows.pop(c.name, None)
                if extra is not None:
                    extra.pop(c.name, None)
        for name, c in after.items():
            assert new is not None
            if n and name not in self.rows:
                self.rows[name] = list(new.zeros(c, n))
            if extra is not None and name not in extra:
                extra[name] = new.zeros(c, 1)[0]
        if pending is not None and extra is not None:
            self.pending = pending._replace(extra=extra)
        self.view_windows = None if new is None else ViewWindows(new, 1)

    def take(self, eps_id: int, env_id: int) -> SampleBatch | None:
        """The completed transitions as a batch (None when there are none); clears them."""
        if not self.rows:
            return None
        rows, self.rows = self.rows, defaultdict(list)
        objects = self.object_columns
        try:
            columns = {
                k: object_rows(v, len(v)) if k in objects else np.asarray(v)
                for k, v in rows.items()
            }
        except ValueError as e:  # (a policy whose outputs change shape between steps)
            raise _shape_changed_error(self.policy_id, rows) from e
        columns[SampleBatch.OBS] = columns[SampleBatch.OBS].astype(np.float32, copy=False)
        columns[SampleBatch.NEXT_OBS] = columns[SampleBatch.NEXT_OBS].astype(np.float32, copy=False)
        columns[SampleBatch.REWARDS] = columns[SampleBatch.REWARDS].astype(np.float32)
        n = len(columns[SampleBatch.REWARDS])
        columns[SampleBatch.DONES] = columns[SampleBatch.DONES].astype(np.bool_, copy=False)
        columns[SampleBatch.EPS_ID] = np.full(n, eps_id, np.int64)
        columns[SampleBatch.ENV_ID] = np.full(n, env_id, np.int64)
        columns[SampleBatch.AGENT_INDEX] = np.full(n, self.agent_index, np.int64)
        if self.view_windows is not None:
            # (Later rows are later agent steps: `t` may skip env steps.)
            fill_future_rows(self.view_windows.plan, columns, ep_t=np.arange(n))
        return SampleBatch(columns)


class _AgentInfosTrajectory(_AgentTrajectory):
    """An `_AgentTrajectory` that also keeps each row's info dict, handed out as the
    `infos` column (`output_config.store_infos`): the info the env returned for the
    agent with the step that completed the row ({} when it returned none)."""

    def __init__(self, policy_id: str, agent_index: int) -> None:
        super().__init__(policy_id, agent_index)
        self.infos: list[Any] = []

    def close(
        self,
        new_obs: np.ndarray | None,
        terminated: bool,
        truncated: bool,
        t: int,
        info: dict | None = None,
        done: bool | None = None,
    ) -> None:
        super().close(new_obs, terminated, truncated, t, done=done)
        self.infos.append({} if info is None else info)

    def take(self, eps_id: int, env_id: int) -> SampleBatch | None:
        batch = super().take(eps_id, env_id)
        infos, self.infos = self.infos, []
        if batch is not None:
            batch[SampleBatch.INFOS] = object_rows(infos, len(infos))
        return batch


class _Segment(NamedTuple):
    """What one sub-env contributes to a batch: its agents' trajectories of one episode."""

    episode: Episode
    trajectories: dict[Any, tuple[str, SampleBatch]]
    env_steps: int
    # Agents whose last info said `training_enabled: False`: their trajectories are
    # other agents' `other_agent_batches`, but not trained on (RLlib 1.13's rule).
    untrained: frozenset = frozenset()

    def agent_steps(self) -> int:
        return sum(b.count for _, b in self.trajectories.values())


class _EnvSlot:
    """The running episode of one sub-env."""

    def __init__(self, episode: Episode) -> None:
        self.episode = episode
        self.obs: dict[Any, np.ndarray] = {}
        self.trajectories: dict[Any, _AgentTrajectory] = {}
        self.agent_indices: dict[Any, int] = {}
        self.steps_since_flush = 0


class MultiAgentSampler(SamplerBase):
    """Samples fragments from sub-envs that are `MultiAgentEnv`s.

    `rollout_fragment_length` counts env steps per sub-env, or agent steps
    when `multiagent/count_steps_by` is "agent_steps". Episode ends follow
    `EpisodeEndRule` as in the single-agent sampler: a `horizon` cut truncates
    every agent; with `soft_horizon` the env is not reset; `no_done_at_end`
    turns terminations into truncations. `clip_rewards` clips each agent's
    rewards in its batch (returns stay unclipped), recurrent policies get and
    record their `state_in_<i>` / `state_out_<i>`, `prev_actions` and
    `prev_rewards` per agent, and `render_env` renders the first sub-env.
    """

    def __init__(self, worker: Any, base_env: Any, config: dict) -> None:
        super().__init__(worker, base_env, config)
        multiagent = config["multiagent"]
        self.count_agent_steps = multiagent.get("count_steps_by") == "agent_steps"
        observation_fn = multiagent.get("observation_fn")
        if isinstance(observation_fn, type):  # an `ObservationFunction` subclass
            observation_fn = observation_fn()
        self.observation_fn = observation_fn
        self._ready: list[_Segment] = []
        self._stateful: dict[int, tuple[Any, bool]] = {}
        # Per policy: its extra view columns (None: none), whether its fast path
        # takes them (`view_inputs`), and what they were planned from (`views_key`).
        self._view_plans: dict[int, tuple[Any, ViewPlan | None, bool, tuple]] = {}
        # Per policy: what its agents' observations are checked against.
        self._obs_checks: dict[str, ObservationCheck] = {}
        # Sub-envs in processes of their own (`remote_worker_envs`) step in parallel:
        # every one gets its action before any result is read (`RemoteVectorEnv`).
        self._parallel_step = getattr(base_env, "try_step_all", None) is not None
        # `output_config.store_infos`: the agents' trajectories keep their infos too.
        self._trajectory_type = _AgentInfosTrajectory if self.store_infos else _AgentTrajectory
        self._reset_all(worker.seed)

    def reset(self) -> None:
        """Starts new episodes in every sub-env (unfinished ones are dropped)."""
        self._ready = []
        super().reset()

    # -- episodes -----------------------------------------------------------

    def _reset_all(self, seed: int | None) -> None:
        self.slots: list[_EnvSlot] = []
        for i in range(self.num_envs):
            obs, infos = self._reset_env(i, seed=None if seed is None else seed + i)
            self.slots.append(self._start_episode(i, obs, infos))

    def _start_episode(self, i: int, raw_obs: dict, infos: dict) -> _EnvSlot:
        # The mapping fn is captured here: a new one set by add_policy/remove_policy
        # applies from the next episode on.
        episode = Episode(
            self._new_episode_id(),
            i,
            self.worker.policy_map,
            policy_mapping_fn=self.worker.policy_mapping_fn,
            worker=self.worker,
        )
        slot = _EnvSlot(episode)
        policy_map = self.worker.policy_map
        self._episode_started(episode, i, [policy_map[p] for p in policy_map.in_memory()])
        obs = self._apply_observation_fn(episode, raw_obs)
        self._observe(slot, self._preprocess_all(slot, obs, "reset"), obs, infos, acting=set(obs))
        return slot

    def _apply_observation_fn(self, episode: Episode, raw_obs: dict) -> dict:
        if self.observation_fn is None:
            return raw_obs
        return self.observation_fn(
            agent_obs=raw_obs,
            worker=self.worker,
            base_env=self.env,
            policies=self.worker.policy_map,
            episode=episode,
        )

    def _preprocess_all(self, slot: _EnvSlot, raw_obs: dict, call: str) -> dict:
        """Each agent's observation as its policy sees it, checked (finite and, unless
        `disable_env_checking`, inside its Box's bounds) before anything reads it."""
        episode = slot.episode
        return {
            agent: self._preprocess(episode.policy_for(agent), o, (episode.env_id, agent, call))
            for agent, o in raw_obs.items()
        }

    def _observe(self, slot: _EnvSlot, obs: dict, raw_obs: dict, infos: dict, acting: set) -> None:
        """Takes in new (preprocessed) observations; agents in `acting` act next."""
        episode = slot.episode
        slot.obs = {}
        for agent, o in obs.items():
            info = infos.get(agent)
            episode._set_last(agent, obs=o, raw_obs=raw_obs[agent], info=info)
            trajectory = slot.trajectories.get(agent)
            if trajectory is not None and trajectory.pending is not None:
                trajectory.close(o, False, False, episode.length - 1, info)
            if agent in acting:
                slot.obs[agent] = o

    def _preprocess(self, policy_id: str, raw: Any, origin: tuple) -> np.ndarray:
        """The policy's view of one agent's observation, checked first; `origin` is
        (sub-env index, agent, "reset"/"step") for the error."""
        preprocessor = self.worker.preprocessors.get(policy_id)
        obs = np.asarray(raw if preprocessor is None else preprocessor.transform(raw), np.float32)
        check = self._obs_checks.get(policy_id)
        if check is None:
            check = self._obs_checks[policy_id] = self._make_obs_check(policy_id, obs)
        if not check.ok(obs):
            i, agent, call = origin
            raise check.error(
                obs,
                env=self.envs[i],
                call=call,
                worker_index=self.worker.worker_index,
                env_index=i,
                agent=agent,
            )
        # The policy's observation filter (NoFilter by default: returns obs as it is).
        obs_filter = self.worker.filters.get(policy_id)
        return obs if obs_filter is None else obs_filter(obs)

    def _make_obs_check(self, policy_id: str, obs: np.ndarray) -> ObservationCheck:
        preprocessor = self.worker.preprocessors.get(policy_id)
        space = getattr(preprocessor, "original_space", None)
        if space is None:
            space = getattr(self.worker.policy_map.get(policy_id), "observation_space", None)
        return ObservationCheck(space, np.shape(obs), bounds=self.check_obs_bounds)

    def _trajectory(self, slot: _EnvSlot, agent: Any, policy_id: str) -> _AgentTrajectory:
        trajectory = slot.trajectories.get(agent)
        if trajectory is None:
            index = slot.agent_indices.setdefault(agent, self._agent_index(slot, agent))
            trajectory = slot.trajectories[agent] = self._trajectory_type(policy_id, index)
        return trajectory

    def _agent_index(self, slot: _EnvSlot, agent: Any) -> int:
        possible = list(getattr(self.envs[slot.episode.env_id], "possible_agents", None) or ())
        return (
            possible.index(agent) if agent in possible else len(possible) + len(slot.agent_indices)
        )

    # -- sampling -----------------------------------------------------------

    def sample(self) -> MultiAgentBatch:
        """One fragment of every sub-env (or complete episodes), postprocessed."""
        target = self.fragment_length * self.num_envs
        self._refresh_views()  # (requirements added to a policy since: RLlib's per batch)
        if not self.complete_episodes:
            steps = 0
            while steps < target:
                steps += self._step_all()
            for slot in self.slots:
                self._flush(slot)
        else:
            stepped = 0
            while not self._ready or self._ready_steps() < target:
                stepped += self._step_all()
                self._whole_episode_wait.stepped(stepped, bool(self._ready))
        segments, self._ready = self._ready, []
        return self._postprocess(segments)

    def _ready_steps(self) -> int:
        if self.count_agent_steps:
            return sum(s.agent_steps() for s in self._ready)
        return sum(s.env_steps for s in self._ready)

    def _step_all(self) -> int:
        """Steps every sub-env once; returns the steps taken (env or agent steps)."""
        timers = self.timers
        t0 = time.perf_counter()
        actions, num_actions = self._compute_actions()
        t1 = time.perf_counter()
        failed: dict[int, BaseException] = {}
        if self.restarts is None:
            if self._parallel_step:
                results = self.env.step_all(actions)
            else:
                results = [env.step(a) for env, a in zip(self.envs, actions)]
        else:
            results, failures = self.restarts.step_all(actions, lambda i: None)
            failed = dict(failures)
        t2 = time.perf_counter()
        if self.render_env:
            self._render()
            t2 = time.perf_counter()
        for i, result in enumerate(results):
            if i in failed:
                self._drop_faulty_episode(i, failed[i])
                continue
            if not (isinstance(result, tuple) and len(result) == 5):
                raise step_output_error(self.envs[i], result)
            self._record_step(i, *result)
        timers.inference += t1 - t0
        timers.env_wait += t2 - t1
        timers.processing += time.perf_counter() - t2
        timers.steps += 1
        return num_actions if self.count_agent_steps else self.num_envs

    def _drop_faulty_episode(self, i: int, error: BaseException) -> None:
        """Sub-env `i` raised: its episode (unflushed, in its slot) is dropped and
        reported as faulty; a rebuilt sub-env starts a new one."""
        episode = self.slots[i].episode
        episode.length += 1  # the step that raised
        self._episode_ended(episode, i, faulty=True)
        assert self.restarts is not None  # only called with restarts on
        obs, infos = self.restarts.restart(i, error)
        self.slots[i] = self._start_episode(i, obs, infos)

    def _compute_actions(self) -> tuple[list[dict], int]:
        """One batched call per policy over the acting agents of all sub-envs."""
        groups: dict[str, list[tuple[int, Any]]] = defaultdict(list)
        for i, slot in enumerate(self.slots):
            for agent in slot.obs:
                groups[slot.episode.policy_for(agent)].append((i, agent))
        actions: list[dict] = [{} for _ in self.slots]
        explore = self.worker.explore
        for pid, members in groups.items():
            if pid not in self.worker.policy_map:
                raise KeyError(
                    f"policy_mapping_fn mapped agent {members[0][1]!r} to policy {pid!r}, which "
                    f"is not in the policy map: {sorted(self.worker.policy_map)}."
                )
            policy = self.worker.policy_map[pid]
            obs = np.stack([self.slots[i].obs[agent] for i, agent in members])
            trajectories = [self._trajectory(self.slots[i], agent, pid) for i, agent in members]
            plan, takes_views = self._views_of(policy)
            view_inputs = step_rows = infos = None
            if plan is not None:
                view_inputs, step_rows = self._agent_views(plan, obs, trajectories)
                if plan.ids:
                    view_inputs.update(_id_inputs(plan.ids, self.slots, members, trajectories))
                if plan.infos:  # (the infos that came with the agents' observations)
                    infos = [self.slots[i].episode.last_info_for(a) or {} for i, a in members]
            if self._is_stateful(policy):
                batch_actions, extra = self._stateful_actions(
                    policy, obs, explore, trajectories, view_inputs, takes_views, infos
                )
            else:
                batch_actions, extra = policy_actions(
                    policy,
                    obs,
                    explore,
                    view_inputs=view_inputs,
                    takes_views=takes_views,
                    infos=infos,
                )
            if step_rows:
                extra = {**extra, **step_rows}
            env_actions = read_only(to_env_of(policy)(batch_actions, self.unsquash, self.clip))
            for k, (i, agent) in enumerate(members):
                slot = self.slots[i]
                trajectory = trajectories[k]
                outs = {c: v[k] for c, v in extra.items()}
                trajectory.act(slot.obs[agent], batch_actions[k], outs)
                slot.episode._set_last(
                    agent,
                    action=batch_actions[k],
                    extra=outs,
                    rnn_state=trajectory.state if trajectory.state is not None else [],
                )
                actions[i][agent] = env_actions[k]
        return actions, sum(len(m) for m in groups.values())

    def _views_of(self, policy: Any) -> tuple[ViewPlan | None, bool]:
        """`policy`'s extra view columns (None: none) and whether its
        `compute_actions_from_obs` takes them; asked once per policy."""
        known = self._view_plans.get(id(policy))
        if known is None or known[0] is not policy:
            known = self._plan_views(policy)
        return known[1], known[2]

    def _plan_views(self, policy: Any) -> tuple[Any, ViewPlan | None, bool, tuple]:
        """Plans `policy`'s views (kept in `_view_plans`, with their `views_key`)."""
        plan = None
        if hasattr(policy, "view_requirements"):
            plan = ViewPlan.for_policy(policy, _native_columns(policy), _specs(policy))
        known = (policy, plan, plan is not None and accepts_view_inputs(policy), views_key(policy))
        self._view_plans[id(policy)] = known
        return known

    def _refresh_views(self) -> None:
        """`SingleAgentViews._refresh_views` for each policy planned so far: its views
        planned again when its requirements changed (`views_key`). The policy's agents
        in running episodes keep their rows, with zeros in the new columns for their
        steps before the change (`_AgentTrajectory.replan_views`)."""
        changed = {}
        for known in list(self._view_plans.values()):
            policy, old = known[0], known[1]
            if views_key(policy) != known[3]:
                changed[id(policy)] = (old, self._plan_views(policy)[1])
        if not changed:
            return
        policy_map = self.worker.policy_map
        loaded = set(policy_map.in_memory())
        for slot in self.slots:
            for trajectory in slot.trajectories.values():
                if trajectory.policy_id in loaded:
                    plans = changed.get(id(policy_map[trajectory.policy_id]))
                    if plans is not None:
                        trajectory.replan_views(*plans)

    def _agent_views(
        self, plan: ViewPlan, obs: np.ndarray, trajectories: list[_AgentTrajectory]
    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """The view columns of a group of agents at their current steps: (the model's
        input-dict entries, the train-batch rows); each agent's observation enters
        its windows first."""
        per_agent = []
        for k, trajectory in enumerate(trajectories):
            windows = trajectory.view_windows
            if windows is None or windows.plan is not plan:
                windows = trajectory.view_windows = ViewWindows(plan, 1)
                trajectory.reward_clip = self.reward_clip
            windows.push(SampleBatch.OBS, obs[k : k + 1])
            per_agent.append(windows.step_views(np.array([trajectory.steps])))
        step_views = {
            name: np.concatenate([views[name] for views in per_agent]) for name in per_agent[0]
        }
        return plan.acting_inputs(step_views), plan.training_rows(step_views, len(obs))

    def _is_stateful(self, policy: Any) -> bool:
        """Whether `policy` carries a state from step to step (an RNN, or a custom
        policy whose `get_initial_state()` is not empty); asked once per policy."""
        known = self._stateful.get(id(policy))
        if known is None or known[0] is not policy:
            known = self._stateful[id(policy)] = (policy, bool(initial_state_of(policy)))
        return known[1]

    def _stateful_actions(
        self,
        policy: Any,
        obs: np.ndarray,
        explore: bool,
        trajectories: list,
        view_inputs: dict[str, np.ndarray] | None = None,
        takes_views: bool = False,
        infos: list[dict] | None = None,
    ) -> tuple[np.ndarray, dict]:
        """Actions of a stateful policy: each agent's state, previous action and reward
        go in (RLlib's `state_in_<i>`, `prev_actions`, `prev_rewards` views); the
        returned `state_out_<i>` become the agents' states for their next step."""
        for trajectory in trajectories:
            if trajectory.state is None:  # the agent's first step in this episode
                trajectory.state = initial_state_of(policy)
                trajectory.prev_action = _zero_action(policy.action_space)
                trajectory.object_columns = frozenset(
                    f"state_{io}_{j}"
                    for j in object_state_indices(trajectory.state)
                    for io in ("in", "out")
                )
        n_states = len(trajectories[0].state)
        states = [np.stack([t.state[j] for t in trajectories]) for j in range(n_states)]
        prev_actions = np.stack([np.asarray(t.prev_action) for t in trajectories])
        prev_rewards = np.array([t.prev_reward for t in trajectories], np.float32)
        actions, extra = policy_actions(
            policy,
            obs,
            explore,
            states,
            prev_actions,
            prev_rewards,
            view_inputs,
            takes_views,
            infos,
        )
        for k, trajectory in enumerate(trajectories):
            trajectory.state = [
                _state_value(extra[f"state_out_{j}"][k], states[j].dtype == object)
                if f"state_out_{j}" in extra
                else states[j][k]
                for j in range(n_states)
            ]
            trajectory.prev_action = actions[k]
        extra = dict(extra)
        for j, state in enumerate(states):
            extra[f"state_in_{j}"] = state
        extra[SampleBatch.PREV_ACTIONS] = prev_actions
        extra[SampleBatch.PREV_REWARDS] = prev_rewards
        return actions, extra

    def _record_step(
        self, i: int, obs: dict, rewards: dict, terminateds: dict, truncateds: dict, infos: dict
    ) -> None:
        slot = self.slots[i]
        episode = slot.episode
        episode.length += 1
        slot.steps_since_flush += 1
        for agent, r in rewards.items():
            try:
                r = as_reward(r, "step()")
            except TypeError:
                raise reward_error(self.envs[i], i, self.worker.worker_index, r, agent) from None
            if not math.isfinite(r):
                raise reward_error(self.envs[i], i, self.worker.worker_index, r, agent)
            episode.agent_rewards[(agent, episode.policy_for(agent))] += r
            episode.total_reward += r
            episode._set_last(agent, reward=r)
            trajectory = slot.trajectories.get(agent)
            if trajectory is not None and trajectory.pending is not None:
                trajectory.reward += r
        all_done = bool(terminateds.get(ALL)) or bool(truncateds.get(ALL))
        cut = bool(self.end_rule.cut(episode.length, all_done))
        done_agents = {
            a
            for a in set(terminateds) | set(truncateds)
            if a != ALL and (terminateds.get(a) or truncateds.get(a))
        }
        for agent in set(terminateds) | set(truncateds):
            if agent != ALL:
                episode._set_last(agent, done=all_done or agent in done_agents)
        seen = self._apply_observation_fn(episode, obs)
        processed = self._preprocess_all(slot, seen, "step")
        acting = set() if all_done or cut else set(seen) - done_agents
        self._close_done(
            slot, processed, terminateds, truncateds, infos, done_agents, all_done, cut
        )
        self._observe(slot, processed, seen, infos, acting)
        if all_done or cut:
            self._end_episode(i, obs, infos, reset=self.end_rule.resets_env(cut))
        elif self.call_step_hook:
            self._episode_step_hook(episode, i)

    def _close_done(
        self,
        slot: _EnvSlot,
        obs: dict,
        terminateds: dict,
        truncateds: dict,
        infos: dict,
        done_agents: set,
        all_done: bool,
        cut: bool,
    ) -> None:
        """Closes the transitions of agents that are done (all of them when the episode
        ends), with their flags from `EpisodeEndRule` (and their infos of the step)."""
        closing = [
            (agent, trajectory)
            for agent, trajectory in slot.trajectories.items()
            if trajectory.pending is not None and (all_done or cut or agent in done_agents)
        ]
        if not closing:
            return
        all_terminated = bool(terminateds.get(ALL))
        # What the env said of each agent (done by itself, or with the whole env);
        # the others close only because the horizon cut the episode.
        env_done = np.array([all_done or agent in done_agents for agent, _ in closing])
        terminated = env_done & np.array(
            [bool(terminateds.get(agent, all_terminated)) for agent, _ in closing]
        )
        truncated = env_done & ~terminated
        rule = self.end_rule
        cut_rows = ~env_done if cut else None
        rule.mark(terminated, truncated, cut_rows)
        dones = rule.dones(terminated, truncated, cut_rows)
        t = slot.episode.length - 1
        for k, (agent, trajectory) in enumerate(closing):
            trajectory.close(
                obs.get(agent),
                bool(terminated[k]),
                bool(truncated[k]),
                t,
                infos.get(agent),
                done=bool(dones[k]),
            )

    def _end_episode(self, i: int, last_obs: dict, infos: dict, reset: bool) -> None:
        slot = self.slots[i]
        self._episode_ended(slot.episode, i)
        self._flush(slot)
        obs, infos = self._reset_env(i) if reset else (last_obs, infos)
        self.slots[i] = self._start_episode(i, obs, infos)

    def _flush(self, slot: _EnvSlot) -> None:
        """Hands out the slot's completed transitions as one segment."""
        episode = slot.episode
        trajectories = {}
        for agent, trajectory in slot.trajectories.items():
            batch = trajectory.take(episode.episode_id, episode.env_id)
            if batch is not None:
                trajectories[agent] = (trajectory.policy_id, batch)
        if trajectories or slot.steps_since_flush:
            untrained = frozenset(
                a for a in trajectories if training_disabled(episode.last_info_for(a))
            )
            self._ready.append(_Segment(episode, trajectories, slot.steps_since_flush, untrained))
        slot.steps_since_flush = 0

    # -- postprocessing -----------------------------------------------------

    def _postprocess(self, segments: list[_Segment]) -> MultiAgentBatch:
        """Postprocesses each agent's trajectory with its policy; groups by policy.

        Every observation in the trajectories was checked when it arrived
        (`_preprocess`); rewards are clipped here (`clip_rewards`), after the
        episode metrics took them unclipped."""
        per_policy: dict[str, list[SampleBatch]] = defaultdict(list)
        policy_map = self.worker.policy_map
        for segment in segments:
            for _, batch in segment.trajectories.values():
                clip_rewards_in_place(batch[SampleBatch.REWARDS], self.reward_clip)
            for agent, (pid, batch) in segment.trajectories.items():
                if pid not in policy_map or agent in segment.untrained:
                    continue  # removed while the episode ran, or not to be trained on
                # RLlib 1.13's `other_agent_batches`: {agent_id: (policy, batch)}.
                others = {
                    a: (policy_map.get(p), b)
                    for a, (p, b) in segment.trajectories.items()
                    if a != agent
                }
                post = postprocess_trajectory(self, pid, agent, batch, segment.episode, others)
                per_policy[pid].append(post)
        env_steps = sum(s.env_steps for s in segments)
        return MultiAgentBatch(
            {pid: concat_samples(batches) for pid, batches in per_policy.items()}, env_steps
        )


def _id_inputs(
    names: tuple[str, ...], slots: list, members: list[tuple[int, Any]], trajectories: list
) -> dict[str, np.ndarray]:
    """The id columns `names` of the acting agents' steps (`members`: (sub-env, agent))."""
    values = {
        SampleBatch.EPS_ID: [slots[i].episode.episode_id for i, _ in members],
        SampleBatch.ENV_ID: [i for i, _ in members],
        SampleBatch.AGENT_INDEX: [t.agent_index for t in trajectories],
        # (The env steps of the episode so far: the `t` of the row the action makes
        # when the agent's next observation comes with the next env step.)
        SampleBatch.T: [slots[i].episode.length for i, _ in members],
    }
    return {name: np.asarray(values[name], np.int64) for name in names}


def _state_value(value: Any, is_object: bool) -> np.ndarray:
    """One agent's next state of one state tensor: an array, or for an object state
    (`object_state_indices`) the value itself in a 0-d object array (which `np.stack`
    stacks as it is, where `np.asarray` would turn a list into numbers)."""
    if not is_object:
        return np.asarray(value)
    out = np.empty((), object)
    out[()] = value
    return out


def _shape_changed_error(policy_id: str, rows: dict[str, list]) -> ValueError:
    """The error for an agent's rows whose values of one column change shape (numpy
    cannot stack them into the column)."""
    per_column = ((c, sorted({np.shape(v) for v in values})) for c, values in rows.items())
    column, shapes = next(((c, s) for c, s in per_column if len(s) > 1), ("?", []))
    return ValueError(
        f"Policy {policy_id!r} returned {column!r} values of different shapes {shapes} "
        f"from step to step: a policy's outputs must keep their shape"
        f"{state_size_hint(column)}."
    )


def _same_view(old: Any, c: Any, new: Any, d: Any) -> bool:
    """Whether view column `c` of `ViewPlan` `old` gives rows like `d` of plan `new`."""
    return (
        c.data_col == d.data_col
        and c.stacked == d.stacked
        and np.array_equal(c.shifts, d.shifts)
        and old.specs.get(c.data_col) == new.specs.get(d.data_col)
    )


def _native_columns(policy: Any) -> set[str]:
    """The columns the multi-agent sampler writes itself for `policy`'s agents."""
    return sampler_columns(hasattr(policy, "get_initial_state") and bool(initial_state_of(policy)))


def _specs(policy: Any) -> dict[str, tuple[tuple, Any]]:
    """(row shape, dtype) of the columns an agent of `policy` records."""
    preprocessor = getattr(policy, "preprocessor", None)
    shape = getattr(preprocessor, "shape", None)
    if shape is None:
        shape = getattr(getattr(policy, "observation_space", None), "shape", None) or ()
    obs = (tuple(shape), np.dtype(np.float32))
    return {
        SampleBatch.OBS: obs,
        SampleBatch.NEXT_OBS: obs,
        SampleBatch.ACTIONS: action_spec(getattr(policy, "action_space", None)),
        SampleBatch.REWARDS: ((), np.dtype(np.float32)),
        SampleBatch.TERMINATEDS: ((), np.dtype(np.bool_)),
        SampleBatch.TRUNCATEDS: ((), np.dtype(np.bool_)),
        SampleBatch.T: ((), np.dtype(np.int64)),
    }


def _zero_action(space: Any) -> np.ndarray:
    """The "previous action" of an agent's first step (RLlib: zeros)."""
    if isinstance(space, (gym.spaces.Tuple, gym.spaces.Dict)):  # a flat action row
        return np.zeros(flat_action_width(space), np.float32)
    shape = getattr(space, "shape", None) or ()
    dtype = getattr(space, "dtype", None)
    integral = dtype is not None and np.issubdtype(dtype, np.integer)
    return np.zeros(shape, np.int64 if integral else np.float32)
