"""Replay buffers for off-policy algorithms (DQN, SAC, TD3, ...)."""

from corral.utils.replay_buffers.multi_agent_mixin_replay_buffer import (
    MultiAgentMixInReplayBuffer,
)
from corral.utils.replay_buffers.multi_agent_prioritized_replay_buffer import (
    MultiAgentPrioritizedReplayBuffer,
)
from corral.utils.replay_buffers.multi_agent_replay_buffer import (
    LockstepReplayBuffer,
    MultiAgentReplayBuffer,
    ReplayMode,
)
from corral.utils.replay_buffers.n_step import N_STEP, adjust_nstep
from corral.utils.replay_buffers.prioritized_replay_buffer import (
    BATCH_INDEXES,
    WEIGHTS,
    PrioritizedReplayBuffer,
)
from corral.utils.replay_buffers.replay_buffer import ReplayBuffer, StorageUnit
from corral.utils.replay_buffers.reservoir_buffer import ReservoirBuffer
from corral.utils.replay_buffers.segment_tree import MinSegmentTree, SegmentTree, SumSegmentTree
from corral.utils.replay_buffers.simple_replay_buffer import SimpleReplayBuffer

__all__ = [
    "BATCH_INDEXES",
    "LockstepReplayBuffer",
    "N_STEP",
    "WEIGHTS",
    "MinSegmentTree",
    "MultiAgentMixInReplayBuffer",
    "MultiAgentPrioritizedReplayBuffer",
    "MultiAgentReplayBuffer",
    "PrioritizedReplayBuffer",
    "ReplayBuffer",
    "ReplayMode",
    "ReservoirBuffer",
    "SegmentTree",
    "SimpleReplayBuffer",
    "StorageUnit",
    "SumSegmentTree",
    "adjust_nstep",
]
