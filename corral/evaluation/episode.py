"""`Episode`: what callbacks see of one running episode."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import numpy as np

from corral.env.base_env import DUMMY_AGENT_ID

# The agent id of a single-agent env's agent (RLlib's `_DUMMY_AGENT_ID`).
SINGLE_AGENT_ID = DUMMY_AGENT_ID


class Episode:
    """State of one episode in one sub-env, handed to every episode callback.

    `user_data` is scratch space for callbacks; `custom_metrics` (numbers) are
    averaged into the result's `custom_metrics` as `<name>_mean/_min/_max`;
    `hist_data` (lists) goes to `hist_stats`.
    """

    def __init__(
        self,
        episode_id: int,
        env_id: int,
        policies: dict[str, Any],
        policy_mapping_fn: Any = None,
        worker: Any = None,
    ) -> None:
        self.episode_id = episode_id
        self.env_id = env_id
        self.worker = worker
        self.policy_map = policies
        self._policy_mapping_fn = policy_mapping_fn
        self.length = 0
        self.total_reward = 0.0
        self.agent_rewards: dict[tuple[Any, str], float] = defaultdict(float)
        self.user_data: dict[str, Any] = {}
        self.custom_metrics: dict[str, float] = {}
        self.hist_data: dict[str, list] = {}
        self.media: dict[str, Any] = {}
        self._agent_to_policy: dict[Any, str] = {}
        self._last_obs: dict[Any, Any] = {}
        self._last_raw_obs: dict[Any, Any] = {}
        self._last_actions: dict[Any, Any] = {}
        self._last_rewards: dict[Any, float] = {}
        self._prev_actions: dict[Any, Any] = {}
        self._prev_rewards: dict[Any, float] = {}
        self._last_infos: dict[Any, dict] = {}
        self._last_dones: dict[Any, bool] = {}
        self._last_extra_outs: dict[Any, dict] = {}
        self._rnn_states: dict[Any, list] = {}
        # Set by the sampler: `fn(episode)` returns {policy id: [SampleBatch, ...]} of
        # this episode (one bound method for all episodes: nothing built per episode).
        self._batch_builder_fn: Any = None
        # Set by a sampler that keeps an agent's last step in its buffers instead of
        # `_set_last`: `fn(episode, agent_id, what)` with what "extra", "done" or
        # "state"; None: not recorded there.
        self._last_step_fn: Any = None

    @property
    def policy_mapping_fn(self) -> Any:
        """`fn(agent_id, episode, worker, **kwargs) -> policy id` this episode maps its
        agents with (the worker's at the episode's start; RLlib's default, every agent
        to "default_policy", when it has none)."""
        fn = self._policy_mapping_fn
        if fn is None:
            from corral.evaluation.policy_setup import default_policy_mapping_fn

            return default_policy_mapping_fn
        return fn

    @policy_mapping_fn.setter
    def policy_mapping_fn(self, fn: Any) -> None:
        self._policy_mapping_fn = fn

    def soft_reset(self) -> None:
        """Starts a new logical episode in the same env: a new `episode_id`, length,
        total and per-agent rewards back to 0; the agents' last observations, actions
        and RNN states are kept (RLlib 1.13's, for `soft_horizon`)."""
        sampler = getattr(self.worker, "sampler", None)
        new_id = getattr(sampler, "_new_episode_id", None)
        self.episode_id = new_id() if callable(new_id) else random.randrange(2**62)
        self.length = 0
        self.total_reward = 0.0
        self.agent_rewards = defaultdict(float)

    def add_extra_batch(self, batch: Any) -> None:
        """Adds `batch` (a `SampleBatch` or `MultiAgentBatch`) to the output of this
        episode's worker: its next `sample()` returns it concatenated after the
        sampled rows (RLlib 1.13's extra batches).

        Raises:
            RuntimeError: the episode runs in no rollout worker.
        """
        add = getattr(self.worker, "_add_extra_batch", None)
        if add is None:
            raise RuntimeError(
                "Episode.add_extra_batch: this episode belongs to no RolloutWorker, so "
                "there is no sample() output to add the batch to."
            )
        add(batch)

    def new_batch_builder(self) -> Any:
        """A new, empty `MultiAgentSampleBatchBuilder` over this episode's policies (its
        worker's `clip_rewards` and callbacks): build rows to hand to
        `add_extra_batch` with it. (RLlib 1.13's sampler made this return None.)"""
        from corral.evaluation.sample_batch_builder import MultiAgentSampleBatchBuilder

        config = getattr(self.worker, "config", None) or {}
        return MultiAgentSampleBatchBuilder(
            self.policy_map,
            bool(config.get("clip_rewards")),
            getattr(self.worker, "callbacks", None),
        )

    @property
    def batch_builder(self) -> PolicyCollectorGroup:
        """RLlib 1.13's collector of this episode's data:
        `batch_builder.policy_collectors[policy_id].batches` are the episode's steps
        collected so far (in the sampler's current fragment) for that policy, as
        `SampleBatch`es with `obs`, `actions`, `rewards`, `terminateds`, `truncateds`
        and `dones`. Built when read."""
        fn = self._batch_builder_fn
        return PolicyCollectorGroup(fn(self) if fn is not None else {})

    def policy_for(self, agent_id: Any = SINGLE_AGENT_ID) -> str:
        """The policy id this agent is mapped to (fixed for the whole episode)."""
        if agent_id not in self._agent_to_policy:
            fn = self._policy_mapping_fn
            if fn is None:
                policy_id = "default_policy"
            else:
                try:
                    policy_id = fn(agent_id, self, worker=self.worker)
                except TypeError as err:
                    # RLlib 1.13 still calls the pre-1.x form `fn(agent_id)` (e.g.
                    # `lambda aid, **kwargs: ...`) when the new signature does not fit.
                    text = str(err)
                    if "positional argument" not in text and "unexpected keyword" not in text:
                        raise
                    policy_id = fn(agent_id)
            self._agent_to_policy[agent_id] = policy_id
        return self._agent_to_policy[agent_id]

    def last_observation_for(self, agent_id: Any = SINGLE_AGENT_ID) -> Any:
        """The last (preprocessed) observation of this agent."""
        return self._last_obs.get(agent_id)

    def last_raw_obs_for(self, agent_id: Any = SINGLE_AGENT_ID) -> Any:
        return self._last_raw_obs.get(agent_id)

    def last_action_for(self, agent_id: Any = SINGLE_AGENT_ID) -> Any:
        return self._last_actions.get(agent_id)

    def last_reward_for(self, agent_id: Any = SINGLE_AGENT_ID) -> float:
        return self._last_rewards.get(agent_id, 0.0)

    def last_info_for(self, agent_id: Any = SINGLE_AGENT_ID) -> dict | None:
        return self._last_infos.get(agent_id)

    def prev_action_for(self, agent_id: Any = SINGLE_AGENT_ID) -> Any:
        """The action before the last one (at the agent's first step, zeros shaped like
        the last one, as RLlib 1.13; None before the agent has acted)."""
        if agent_id in self._prev_actions:
            return self._prev_actions[agent_id]
        last = self._last_actions.get(agent_id)
        return None if last is None else np.zeros_like(last)

    def prev_reward_for(self, agent_id: Any = SINGLE_AGENT_ID) -> float:
        """The reward before the last one (0.0 at the agent's first step)."""
        return self._prev_rewards.get(agent_id, 0.0)

    def last_extra_action_outs_for(self, agent_id: Any = SINGLE_AGENT_ID) -> dict:
        """The extra outputs of the agent's last action (the policy's `compute_actions`
        third value, e.g. `action_logp`, `action_dist_inputs`, `vf_preds`); {} before it
        has acted."""
        found = self._last_step(agent_id, "extra")
        return found if found is not None else self._last_extra_outs.get(agent_id, {})

    def last_pi_info_for(self, agent_id: Any = SINGLE_AGENT_ID) -> dict:
        """RLlib's older name of `last_extra_action_outs_for`."""
        return self.last_extra_action_outs_for(agent_id)

    def last_done_for(self, agent_id: Any = SINGLE_AGENT_ID) -> bool:
        """Whether the agent's last step ended its episode (terminated or truncated)."""
        found = self._last_step(agent_id, "done")
        return bool(found) if found is not None else self._last_dones.get(agent_id, False)

    def rnn_state_for(self, agent_id: Any = SINGLE_AGENT_ID) -> list:
        """The agent's recurrent state for its next action ([] for a stateless policy,
        or before the agent has acted)."""
        found = self._last_step(agent_id, "state")
        return found if found is not None else self._rnn_states.get(agent_id, [])

    def _last_step(self, agent_id: Any, what: str) -> Any:
        fn = self._last_step_fn
        return None if fn is None else fn(self, agent_id, what)

    def get_agents(self) -> list:
        """The agents that have an observation in this episode so far."""
        return list(self._last_obs)

    def _set_last(
        self,
        agent_id: Any,
        obs: Any = None,
        action: Any = None,
        reward: float | None = None,
        info: dict | None = None,
        raw_obs: Any = None,
        extra: dict | None = None,
        done: bool | None = None,
        rnn_state: list | None = None,
    ) -> None:
        if obs is not None:
            self._last_obs[agent_id] = obs
        if raw_obs is not None:
            self._last_raw_obs[agent_id] = raw_obs
        if action is not None:
            if agent_id in self._last_actions:
                self._prev_actions[agent_id] = self._last_actions[agent_id]
            self._last_actions[agent_id] = action
        if reward is not None:
            if agent_id in self._last_rewards:
                self._prev_rewards[agent_id] = self._last_rewards[agent_id]
            self._last_rewards[agent_id] = reward
        if info is not None:
            self._last_infos[agent_id] = info
        if extra is not None:
            self._last_extra_outs[agent_id] = extra
        if done is not None:
            self._last_dones[agent_id] = done
        if rnn_state is not None:
            self._rnn_states[agent_id] = rnn_state

    def __repr__(self) -> str:
        return f"Episode(id={self.episode_id}, env_id={self.env_id}, length={self.length})"


class PolicyCollector:
    """The batches one policy collected in an episode (RLlib 1.13's `_PolicyCollector`)."""

    def __init__(self, batches: list[Any]) -> None:
        self.batches = batches

    @property
    def agent_steps(self) -> int:
        return sum(b.count for b in self.batches)


class PolicyCollectorGroup:
    """Policy id -> `PolicyCollector` (RLlib 1.13's `_PolicyCollectorGroup`)."""

    def __init__(self, batches: dict[str, list[Any]]) -> None:
        self.policy_collectors = {pid: PolicyCollector(b) for pid, b in batches.items()}

    @property
    def agent_steps(self) -> int:
        return sum(c.agent_steps for c in self.policy_collectors.values())
