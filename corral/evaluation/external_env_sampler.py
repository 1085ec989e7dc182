"""`ExternalEnvSampler`: samples from an `ExternalEnv` (or `ExternalMultiAgentEnv`), whose
episodes drive themselves.

Each `sample()` takes the steps the env's episodes report (observations with the rewards
since their last actions, or their end), answers every episode waiting for actions with
one batched forward pass per policy, and returns once `rollout_fragment_length` env steps
are taken (`batch_mode="complete_episodes"`: steps of ended episodes only), those of
episodes without training included, as in RLlib 1.13 (their rows are not in the batch; a
batch with no rows is 1.13's empty `MultiAgentBatch` of env steps). Episodes still
running are cut there, each agent's rows postprocessed as a truncated piece (values
bootstrap from its last observation), and go on in the next call.

A single-agent env's agent is `"agent0"` with the worker's acting policy; a multi-agent
env's agents are mapped to policies by `policy_mapping_fn`, and an agent's step is complete
when it next observes (or is done, or the episode ends).
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from corral.env.external_env import ExternalEnvWrapper, ExternalStep
from corral.evaluation.episode import SINGLE_AGENT_ID, Episode
from corral.evaluation.sampler_base import (
    SamplerBase,
    acting_of,
    clip_rewards_in_place,
    postprocess_trajectory,
    reward_error,
    to_env_of,
)
from corral.policy.sample_batch import (
    DEFAULT_POLICY_ID,
    MultiAgentBatch,
    SampleBatch,
    concat_samples,
)
from corral.utils.error import EnvError
from corral.utils.filter import NoFilter

# Seconds between checks that the env's thread still runs, while no step arrives.
_WAIT_S = 1.0
ALL = "__all__"


@dataclass
class _Track:
    """One agent's rows in a running episode since the last cut."""

    policy_id: str
    agent_index: int
    columns: dict[str, list] = field(default_factory=dict)
    # (obs, action, extras) of the step waiting for its outcome.
    pending: tuple[Any, Any, dict] | None = None
    t: int = 0
    done: bool = False

    def add_row(self, row: dict[str, Any]) -> None:
        for key, value in row.items():
            self.columns.setdefault(key, []).append(value)

    @property
    def num_rows(self) -> int:
        return len(self.columns.get(SampleBatch.REWARDS, ()))


@dataclass
class _LiveEpisode:
    """A running episode: its `Episode` and each agent's track."""

    episode: Episode
    training: bool
    tracks: dict[Any, _Track] = field(default_factory=dict)


class ExternalEnvSampler(SamplerBase):
    """Samples an external env with the worker's policies (see the module doc).

    Raises:
        ValueError: a `horizon` is set (the external env ends its episodes itself).
        NotImplementedError: a policy is recurrent.
    """

    def __init__(
        self,
        worker: Any,
        env: ExternalEnvWrapper,
        config: dict,
        policy_id: str = DEFAULT_POLICY_ID,
    ) -> None:
        super().__init__(worker, env, config)
        if self.end_rule.horizon:
            raise ValueError(
                f"horizon={self.end_rule.horizon!r}: an ExternalEnv ends its episodes itself "
                "(end_episode); leave horizon unset."
            )
        if any(p.is_recurrent() for p in worker.policy_map.values()):
            raise NotImplementedError(
                "An ExternalEnv samples with feed-forward policies only in corral; a recurrent "
                "policy's state across concurrent external episodes is not built."
            )
        self.external = env.external_env
        self.multi_agent = bool(getattr(self.external, "multi_agent", False))
        self.policy_id = policy_id  # a single-agent env's acting policy
        self.live: dict[str, _LiveEpisode] = {}

    def reset(self) -> None:
        """Forgets the running episodes' rows (they go on; their next steps start new
        pieces)."""
        for live in self.live.values():
            for track in live.tracks.values():
                track.columns = {}

    def sample(self) -> SampleBatch | MultiAgentBatch:
        pieces: dict[str, list[SampleBatch]] = defaultdict(list)
        # Env steps (of complete episodes in that mode), also those of episodes without
        # training: as in RLlib 1.13 they count towards the fragment, so a client whose
        # episodes are all `training_enabled=False` still ends each `sample()`.
        recorded = 0
        target = self.fragment_length
        while recorded < target:
            steps = self._wait_for_steps()
            t0 = time.perf_counter()
            waiting: list[tuple[_LiveEpisode, ExternalStep, dict[Any, np.ndarray]]] = []
            for step in steps:
                live = self.live.get(step.episode_id) or self._start(step)
                obs = self._observe(live, self._by_agent(step.obs))
                stepped = self._close_pending(live, step, obs)
                if not self.complete_episodes:
                    recorded += stepped
                if step.done:
                    self._end(step.episode_id, live, pieces)
                    if self.complete_episodes:
                        recorded += live.episode.length
                else:
                    acting = {a: o for a, o in obs.items() if not live.tracks[a].done}
                    waiting.append((live, step, acting))
            t1 = time.perf_counter()
            if waiting:
                self._act(waiting)
            self.timers.processing += t1 - t0
        if not self.complete_episodes:
            for live in self.live.values():
                self._cut(live, pieces)
        self.timers.steps += recorded
        return self._batch(pieces, recorded)

    def _batch(
        self, pieces: dict[str, list[SampleBatch]], env_steps: int
    ) -> SampleBatch | MultiAgentBatch:
        batches = {pid: concat_samples(ps) for pid, ps in pieces.items() if ps}
        if not self.multi_agent and self.policy_id in batches:
            return batches[self.policy_id]
        # (No rows to train on: RLlib 1.13's empty batch, which counts its env steps.)
        return MultiAgentBatch(batches, env_steps)

    # -- steps ---------------------------------------------------------------

    def _by_agent(self, value: Any) -> dict[Any, Any]:
        """A step's per-agent value (a single agent's under `"agent0"`)."""
        if self.multi_agent:
            return dict(value) if isinstance(value, dict) else {}
        return {SINGLE_AGENT_ID: value}

    def _wait_for_steps(self) -> list[ExternalStep]:
        """The next reported step (waiting for one) and every other one already there."""
        t0 = time.perf_counter()
        step = None
        while step is None:
            step = self.external.next_step(_WAIT_S)
            if step is None and not self.external.is_alive():
                raise EnvError(
                    f"The thread of ExternalEnv {type(self.external).__name__} has stopped."
                )
        steps = [step]
        while (more := self.external.next_step(0.0)) is not None:
            steps.append(more)
        self.timers.env_wait += time.perf_counter() - t0
        return steps

    def _start(self, step: ExternalStep) -> _LiveEpisode:
        worker = self.worker
        episode = Episode(
            self._new_episode_id(),
            0,
            worker.policy_map,
            policy_mapping_fn=worker.policy_mapping_fn if self.multi_agent else None,
            worker=worker,
        )
        episode.user_data["external_episode_id"] = step.episode_id
        live = _LiveEpisode(episode, step.training_enabled)
        self.live[step.episode_id] = live
        pids = list(worker.policy_map) if self.multi_agent else [self.policy_id]
        self._episode_started(episode, 0, [worker.policy_map[pid] for pid in pids])
        return live

    def _track(self, live: _LiveEpisode, agent: Any) -> _Track:
        track = live.tracks.get(agent)
        if track is None:
            pid = live.episode.policy_for(agent) if self.multi_agent else self.policy_id
            if pid not in self.worker.policy_map:
                raise KeyError(
                    f"policy_mapping_fn mapped agent {agent!r} to policy {pid!r}, which is not "
                    f"in the policy map: {sorted(self.worker.policy_map)}."
                )
            track = live.tracks[agent] = _Track(pid, len(live.tracks))
        return track

    def _observe(self, live: _LiveEpisode, raw: dict[Any, Any]) -> dict[Any, np.ndarray]:
        """Each agent's observation as its policy sees it (preprocessed, filtered)."""
        out = {}
        for agent, raw_obs in raw.items():
            pid = self._track(live, agent).policy_id
            obs = np.asarray(self.worker.preprocessors[pid].transform(raw_obs), np.float32)
            if not np.isfinite(obs).all():
                raise EnvError(
                    f"ExternalEnv {type(self.external).__name__} reported a non-finite "
                    f"observation for agent {agent!r}: {raw_obs!r}"
                )
            obs_filter = self.worker.filters.get(pid, NoFilter())
            out[agent] = obs if isinstance(obs_filter, NoFilter) else obs_filter(obs)
        return out

    def _close_pending(
        self, live: _LiveEpisode, step: ExternalStep, obs: dict[Any, np.ndarray]
    ) -> int:
        """Completes the pending step of every agent that observes again, is done or whose
        episode ends, with its reward; returns 1 when this was an env step, else 0."""
        episode = live.episode
        rewards = self._by_agent(step.reward)
        infos = self._by_agent(step.info)
        dones = dict(step.dones or {})
        raw = self._by_agent(step.obs)
        stepped = False
        for agent, track in live.tracks.items():
            done = step.done or bool(dones.get(ALL)) or bool(dones.get(agent))
            if track.pending is None or not (agent in obs or done):
                continue  # not acted yet, or its step goes on (it did not observe)
            stepped = True
            prev_obs, action, extras = track.pending
            track.pending = None
            reward = float(rewards.get(agent, 0.0))
            if not np.isfinite(reward):
                raise reward_error(self.external, 0, self.worker.worker_index, reward, agent)
            next_obs = obs.get(agent, prev_obs)
            episode.total_reward += reward
            episode.agent_rewards[(agent, track.policy_id)] += reward
            episode._set_last(agent, reward=reward, done=done)
            track.done = done
            if live.training:
                row = {
                    SampleBatch.OBS: prev_obs,
                    SampleBatch.ACTIONS: action,
                    SampleBatch.REWARDS: reward,
                    SampleBatch.NEXT_OBS: next_obs,
                    SampleBatch.TERMINATEDS: done,
                    SampleBatch.T: track.t,
                    **extras,
                }
                if self.store_infos:  # (`output_config.store_infos`: the step's info)
                    row[SampleBatch.INFOS] = infos.get(agent) or {}
                track.add_row(row)
            track.t += 1
        for agent, o in obs.items():
            episode._set_last(agent, obs=o, raw_obs=raw[agent], info=infos.get(agent))
        if not stepped:
            return 0
        episode.length += 1
        if self.call_step_hook and not step.done:
            self._episode_step_hook(episode, 0)
        return 1

    def _act(self, waiting: list[tuple[_LiveEpisode, ExternalStep, dict[Any, np.ndarray]]]) -> None:
        """One forward pass per policy for every waiting agent; answers each episode."""
        t0 = time.perf_counter()
        by_policy: dict[str, list[tuple[int, Any, np.ndarray]]] = defaultdict(list)
        for k, (live, _, acting) in enumerate(waiting):
            for agent, o in acting.items():
                by_policy[live.tracks[agent].policy_id].append((k, agent, o))
        answers: list[dict[Any, Any]] = [{} for _ in waiting]
        for pid, members in by_policy.items():
            policy = self.worker.policy_map[pid]
            obs = np.stack([o for _, _, o in members])
            actions, extras = acting_of(policy)(obs, self.worker.explore)
            env_actions = to_env_of(policy)(actions, self.unsquash, self.clip)
            for row, (k, agent, o) in enumerate(members):
                live, step, _ = waiting[k]
                row_extras = {key: value[row] for key, value in extras.items()}
                logged = self._by_agent(step.action).get(agent) if step.action is not None else None
                if logged is not None:  # logged off-policy: recorded as it was taken
                    action = np.asarray(logged, dtype=np.asarray(actions).dtype)
                else:
                    action = actions[row]
                    answers[k][agent] = env_actions[row]
                live.tracks[agent].pending = (o, action, row_extras)
                live.episode._set_last(agent, action=action, extra=row_extras)
        self.timers.inference += time.perf_counter() - t0
        for k, (_, step, _) in enumerate(waiting):
            answer = answers[k] if self.multi_agent else answers[k].get(SINGLE_AGENT_ID)
            self.external._answer(step.episode_id, None if step.action is not None else answer)

    # -- episode ends and cuts ------------------------------------------------

    def _end(
        self, external_id: str, live: _LiveEpisode, pieces: dict[str, list[SampleBatch]]
    ) -> None:
        del self.live[external_id]
        self._episode_ended(live.episode, 0)
        self._cut(live, pieces)

    def _cut(self, live: _LiveEpisode, pieces: dict[str, list[SampleBatch]]) -> None:
        """Each agent's rows since the last cut, postprocessed, into `pieces` by policy."""
        for agent, track in live.tracks.items():
            n = track.num_rows
            if not n:
                continue
            columns = {key: np.asarray(values) for key, values in track.columns.items()}
            track.columns = {}
            terminated = columns[SampleBatch.TERMINATEDS].astype(np.bool_)
            truncated = np.zeros(n, np.bool_)
            # (`no_done_at_end`: the episode's end becomes a truncation, `dones` False.)
            self.end_rule.mark(terminated, truncated, None)
            columns[SampleBatch.TERMINATEDS] = terminated
            columns[SampleBatch.TRUNCATEDS] = truncated
            columns[SampleBatch.DONES] = self.end_rule.dones(terminated, truncated, None)
            columns[SampleBatch.REWARDS] = columns[SampleBatch.REWARDS].astype(np.float32)
            # The batch's rewards are clipped; the episode's returns (metrics) are not.
            clip_rewards_in_place(columns[SampleBatch.REWARDS], self.reward_clip)
            columns[SampleBatch.EPS_ID] = np.full(n, live.episode.episode_id, np.int64)
            columns[SampleBatch.ENV_ID] = np.zeros(n, np.int64)
            columns[SampleBatch.AGENT_INDEX] = np.full(n, track.agent_index, np.int64)
            piece = postprocess_trajectory(
                self, track.policy_id, agent, SampleBatch(columns), live.episode
            )
            pieces[track.policy_id].append(piece)
