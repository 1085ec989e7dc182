"""Environment interfaces: Gymnasium envs, vectors of them, multi-agent envs."""

from corral.env.base_env import BaseEnv
from corral.env.env_context import EnvContext
from corral.env.multi_agent_env import MultiAgentEnv, make_multi_agent
from corral.env.vector_env import VectorEnv

__all__ = ["BaseEnv", "EnvContext", "MultiAgentEnv", "VectorEnv", "make_multi_agent"]
