"""`ExternalMultiAgentEnv`: an `ExternalEnv` whose episodes have several agents (RLlib
1.13's).

Observations, actions, rewards and infos are dicts by agent id. An agent acts when it
appears in an observation dict passed to `get_action` (the returned dict holds an action
for each of them); its step ends when it next observes, when `log_returns` marks it done
(`multiagent_done_dict`) or when the episode ends. Agents map to policies by the trainer's
`policy_mapping_fn`, and each policy answers its agents in one batched forward pass.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from corral.env.external_env import ExternalEnv
from corral.env.rewards import as_reward


class ExternalMultiAgentEnv(ExternalEnv):
    """A multi-agent env that drives itself and asks the policies for actions.

    Args:
        action_space: the agents' action space.
        observation_space: the agents' observation space.
        max_concurrent: how many episodes may run at once.
    """

    multi_agent = True

    def __init__(
        self, action_space: gym.Space, observation_space: gym.Space, max_concurrent: int = 100
    ) -> None:
        super().__init__(action_space, observation_space, max_concurrent)

    def get_action(self, episode_id: str, observation_dict: dict[Any, Any]) -> dict[Any, Any]:
        """The policies' actions for the agents in `observation_dict` (blocks until the
        sampler answers)."""
        return super().get_action(episode_id, observation_dict)

    def log_action(
        self, episode_id: str, observation_dict: dict[Any, Any], action_dict: dict[Any, Any]
    ) -> None:
        """Records actions taken by something else (off-policy data)."""
        super().log_action(episode_id, observation_dict, action_dict)

    def log_returns(
        self,
        episode_id: str,
        reward_dict: dict[Any, float],
        info_dict: dict[Any, Any] | None = None,
        multiagent_done_dict: dict[Any, bool] | None = None,
    ) -> None:
        """Adds each agent's reward to what its last action earned; `multiagent_done_dict`
        marks agents done (`"__all__"`: all of them)."""
        episode = self._get(episode_id)
        rewards = episode.reward if isinstance(episode.reward, dict) else {}
        for agent, reward in reward_dict.items():
            rewards[agent] = rewards.get(agent, 0.0) + as_reward(
                reward, f"log_returns({episode_id!r}, ...) for agent {agent!r}"
            )
        episode.reward = rewards
        if info_dict:
            episode.info = dict(info_dict)
        if multiagent_done_dict:
            episode.dones = {**(episode.dones or {}), **multiagent_done_dict}

    def end_episode(self, episode_id: str, observation_dict: dict[Any, Any]) -> None:
        """Ends the episode at the agents' last observations."""
        super().end_episode(episode_id, observation_dict)
