"""Exact resumes of the single-agent sampler (`SingleAgentResume`): its unfinished episodes
as plain data for a checkpoint, and their continuation in a fresh sampler (each sub-env
replayed to where it was by `corral.evaluation.resume_state.EnvReplayLog`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from corral.evaluation.episode import SINGLE_AGENT_ID, Episode
from corral.evaluation.resume_state import EnvReplayLog
from corral.policy.view_requirement import ViewWindows


class SingleAgentResume:
    """`get_resume_state` / `set_resume_state` of `SingleAgentSampler` (it sets these
    attributes and the methods named below)."""

    policy: Any
    to_env: Any
    replay_log: EnvReplayLog
    num_envs: int
    recurrent: bool
    unsquash: bool
    clip: bool
    obs: np.ndarray
    ep_len: np.ndarray
    ep_ret: np.ndarray
    eps_ids: np.ndarray
    states: list[np.ndarray]
    prev_actions: np.ndarray
    prev_rewards: np.ndarray
    view_windows: ViewWindows | None
    vector_step: Any
    _pending: Any
    _episode_counter: int
    _episodes_by_id: dict[int, Episode]

    if TYPE_CHECKING:  # the sampler's own, which these methods call

        def _make_episode(self, i: int, eps_id: int) -> Episode: ...

        def _sync_episode(self, i: int) -> Episode: ...

    def get_resume_state(self) -> dict[str, Any] | None:
        """The unfinished episodes as plain data (None: they cannot be replayed, e.g.
        pieces of complete episodes are pending or an env's reset was not seeded)."""
        envs = self.replay_log.get_state()
        if envs is None or any(self._pending) or self.vector_step is not None:
            return None
        state: dict[str, Any] = {
            **envs,
            "obs": self.obs.copy(),
            "ep_len": self.ep_len.copy(),
            "ep_ret": self.ep_ret.copy(),
            "eps_ids": self.eps_ids.copy(),
            "episode_counter": self._episode_counter,
        }
        if self.recurrent:
            state["rnn_states"] = [s.copy() for s in self.states]
            state["prev_actions"] = self.prev_actions.copy()
            state["prev_rewards"] = self.prev_rewards.copy()
        if self.view_windows is not None:
            state["view_windows"] = self.view_windows.get_state()
        return state

    def set_resume_state(self, state: dict[str, Any]) -> None:
        """Continues the episodes `get_resume_state` described: each sub-env is replayed
        to where it was, and the sampler's per-env arrays are taken over."""
        raw_obs = self.replay_log.replay(
            state, lambda actions: self.to_env(actions, self.unsquash, self.clip)
        )
        self.obs[:] = state["obs"]
        self.ep_len[:] = state["ep_len"]
        self.ep_ret[:] = state["ep_ret"]
        self.eps_ids[:] = state["eps_ids"]
        self._episode_counter = int(state["episode_counter"])
        if self.recurrent:
            self.states = [np.array(s) for s in state["rnn_states"]]
            self.prev_actions = np.array(state["prev_actions"])
            self.prev_rewards = np.array(state["prev_rewards"])
        if self.view_windows is not None and "view_windows" in state:
            self.view_windows.set_state(state["view_windows"])
        self._episodes_by_id = {}
        for i in range(self.num_envs):
            self._make_episode(i, int(self.eps_ids[i]))
            episode = self._sync_episode(i)
            episode._set_last(SINGLE_AGENT_ID, obs=self.obs[i], raw_obs=raw_obs[i])
