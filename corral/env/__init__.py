"""Environment interfaces: Gymnasium envs, vectors of them, multi-agent envs."""

from corral.env.base_env import BaseEnv
from corral.env.env_context import EnvContext
from corral.env.multi_agent_env import MultiAgentEnv, make_multi_agent
from corral.env.recommender_system import InterestEvolutionEnv  # registers its env name
from corral.env.remote_base_env import RemoteBaseEnv
from corral.env.vector_env import VectorEnv
from corral.env.wrappers.group_agents_wrapper import GroupAgentsWrapper
from corral.env.wrappers.pettingzoo_env import PettingZooEnv

__all__ = [
    "BaseEnv",
    "EnvContext",
    "GroupAgentsWrapper",
    "InterestEvolutionEnv",
    "MultiAgentEnv",
    "PettingZooEnv",
    "RemoteBaseEnv",
    "VectorEnv",
    "make_multi_agent",
]
