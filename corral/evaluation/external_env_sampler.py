"""`ExternalEnvSampler`: samples from an `ExternalEnv`, whose episodes drive themselves.

Each `sample()` takes the steps the env's episodes report (an observation with the
reward since their last action, or their end), answers every episode waiting for an
action with one batched forward pass, and returns once `rollout_fragment_length` steps of
training-enabled episodes are recorded (`batch_mode="complete_episodes"`: steps of ended
episodes only). Episodes still running are cut there, their rows postprocessed as a
truncated piece (values bootstrap from the last observation), and go on in the next call.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from corral.env.external_env import ExternalEnvWrapper, ExternalStep
from corral.evaluation.episode import SINGLE_AGENT_ID, Episode
from corral.evaluation.sampler_base import SamplerBase, postprocess_trajectory
from corral.policy.sample_batch import DEFAULT_POLICY_ID, SampleBatch, concat_samples
from corral.utils.error import EnvError
from corral.utils.filter import NoFilter

# Seconds between checks that the env's thread still runs, while no step arrives.
_WAIT_S = 1.0


@dataclass
class _LiveEpisode:
    """A running episode: its `Episode` and its recorded rows since the last cut."""

    episode: Episode
    training: bool
    columns: dict[str, list] = field(default_factory=dict)
    # (obs, action, extras) of the step waiting for its outcome.
    pending: tuple[Any, Any, dict] | None = None
    t: int = 0

    def add_row(self, row: dict[str, Any]) -> None:
        for key, value in row.items():
            self.columns.setdefault(key, []).append(value)

    @property
    def num_rows(self) -> int:
        return len(self.columns.get(SampleBatch.REWARDS, ()))


class ExternalEnvSampler(SamplerBase):
    """Samples an `ExternalEnv` with one policy (see the module doc).

    Raises:
        ValueError: a `horizon` is set (the external env ends its episodes itself).
        NotImplementedError: the policy is recurrent.
    """

    def __init__(
        self,
        worker: Any,
        env: ExternalEnvWrapper,
        policy: Any,
        config: dict,
        policy_id: str = DEFAULT_POLICY_ID,
    ) -> None:
        super().__init__(worker, env, config)
        if self.end_rule.horizon:
            raise ValueError(
                f"horizon={self.end_rule.horizon!r}: an ExternalEnv ends its episodes itself "
                "(end_episode); leave horizon unset."
            )
        if policy.is_recurrent():
            raise NotImplementedError(
                "An ExternalEnv samples with feed-forward policies only in corral; a recurrent "
                "policy's state across concurrent external episodes is not built."
            )
        self.external = env.external_env
        self.policy = policy
        self.policy_id = policy_id
        self.preprocessor = policy.preprocessor
        self.obs_filter = worker.filters.get(policy_id, NoFilter())
        self.live: dict[str, _LiveEpisode] = {}
        self._eps_ids: dict[str, int] = {}

    def reset(self) -> None:
        """Forgets the running episodes' rows (they go on; their next steps start new
        pieces)."""
        for live in self.live.values():
            live.columns = {}

    def sample(self) -> SampleBatch:
        pieces: list[SampleBatch] = []
        recorded = 0
        target = self.fragment_length
        while recorded < target:
            steps = self._wait_for_steps()
            t0 = time.perf_counter()
            waiting: list[tuple[_LiveEpisode, np.ndarray, ExternalStep]] = []
            for step in steps:
                live = self.live.get(step.episode_id) or self._start(step)
                obs = self._observe(step.obs)
                recorded += self._close_pending(live, step, obs)
                if step.done:
                    piece = self._end(step.episode_id, live)
                    if piece is not None:
                        pieces.append(piece)
                else:
                    waiting.append((live, obs, step))
            t1 = time.perf_counter()
            if waiting:
                self._act(waiting)
            self.timers.processing += t1 - t0
            if not self.complete_episodes:
                continue
            recorded = sum(p.count for p in pieces)
        if not self.complete_episodes:
            for live in self.live.values():
                piece = self._cut(live)
                if piece is not None:
                    pieces.append(piece)
        self.timers.steps += recorded
        return concat_samples(pieces) if pieces else SampleBatch({})

    # -- steps ---------------------------------------------------------------

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
        eps_id = self._new_episode_id()
        self._eps_ids[step.episode_id] = eps_id
        episode = Episode(eps_id, 0, self.worker.policy_map, worker=self.worker)
        episode.user_data["external_episode_id"] = step.episode_id
        live = _LiveEpisode(episode, step.training_enabled)
        self.live[step.episode_id] = live
        self._episode_started(episode, 0, (self.policy,))
        return live

    def _observe(self, raw_obs: Any) -> np.ndarray:
        obs = np.asarray(self.preprocessor.transform(raw_obs), np.float32)
        if not np.isfinite(obs).all():
            raise EnvError(
                f"ExternalEnv {type(self.external).__name__} reported a non-finite "
                f"observation: {raw_obs!r}"
            )
        return self.obs_filter(obs) if not isinstance(self.obs_filter, NoFilter) else obs

    def _close_pending(self, live: _LiveEpisode, step: ExternalStep, obs: np.ndarray) -> int:
        """Completes the episode's pending step with this outcome; returns the rows
        recorded for training (0 or 1)."""
        episode = live.episode
        if live.pending is None:
            episode._set_last(SINGLE_AGENT_ID, obs=obs, raw_obs=step.obs, info=step.info)
            return 0
        prev_obs, action, extras = live.pending
        live.pending = None
        reward = float(step.reward)
        clip = self.reward_clip
        if clip is not None:
            low, high = clip
            reward = float(np.sign(reward)) if low is None else min(max(reward, low), high)
        episode.length += 1
        episode.total_reward += reward
        episode.agent_rewards[(SINGLE_AGENT_ID, self.policy_id)] += reward
        episode._set_last(
            SINGLE_AGENT_ID,
            obs=obs,
            raw_obs=step.obs,
            reward=reward,
            info=step.info,
            done=step.done,
        )
        if self.call_step_hook and not step.done:
            self._episode_step_hook(episode, 0)
        if not live.training:
            return 0
        live.add_row(
            {
                SampleBatch.OBS: prev_obs,
                SampleBatch.ACTIONS: action,
                SampleBatch.REWARDS: reward,
                SampleBatch.NEXT_OBS: obs,
                SampleBatch.TERMINATEDS: bool(step.done),
                SampleBatch.T: live.t,
                **extras,
            }
        )
        live.t += 1
        return 1

    def _act(self, waiting: list[tuple[_LiveEpisode, np.ndarray, ExternalStep]]) -> None:
        """One forward pass for every waiting episode; answers their `get_action`."""
        t0 = time.perf_counter()
        obs = np.stack([o for _, o, _ in waiting])
        actions, extras = self.policy.compute_actions_from_obs(obs, self.worker.explore)
        env_actions = self.policy.to_env_actions(actions, self.unsquash, self.clip)
        self.timers.inference += time.perf_counter() - t0
        for k, (live, o, step) in enumerate(waiting):
            row_extras = {key: value[k] for key, value in extras.items()}
            if step.action is not None:  # logged off-policy: recorded as it was taken
                action = np.asarray(step.action, dtype=np.asarray(actions).dtype)
                answer = None
            else:
                action, answer = actions[k], env_actions[k]
            live.pending = (o, action, row_extras)
            live.episode._set_last(SINGLE_AGENT_ID, action=action, extra=row_extras)
            self.external._answer(step.episode_id, answer)

    # -- episode ends and cuts ------------------------------------------------

    def _end(self, external_id: str, live: _LiveEpisode) -> SampleBatch | None:
        del self.live[external_id]
        self._episode_ended(live.episode, 0)
        return self._cut(live)

    def _cut(self, live: _LiveEpisode) -> SampleBatch | None:
        """The episode's rows since the last cut, postprocessed; None without rows."""
        n = live.num_rows
        if not n:
            return None
        columns = {key: np.asarray(values) for key, values in live.columns.items()}
        live.columns = {}
        terminated = columns[SampleBatch.TERMINATEDS].astype(np.bool_)
        columns[SampleBatch.TERMINATEDS] = terminated
        columns[SampleBatch.TRUNCATEDS] = np.zeros(n, np.bool_)
        columns[SampleBatch.DONES] = terminated.copy()
        columns[SampleBatch.REWARDS] = columns[SampleBatch.REWARDS].astype(np.float32)
        columns[SampleBatch.EPS_ID] = np.full(n, live.episode.episode_id, np.int64)
        columns[SampleBatch.ENV_ID] = np.zeros(n, np.int64)
        columns[SampleBatch.AGENT_INDEX] = np.zeros(n, np.int64)
        batch = SampleBatch(columns)
        return postprocess_trajectory(self, self.policy_id, SINGLE_AGENT_ID, batch, live.episode)
