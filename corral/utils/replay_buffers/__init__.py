"""Replay buffers for off-policy algorithms (DQN, SAC, TD3, ...)."""

from corral.utils.replay_buffers.multi_agent_replay_buffer import (
    LockstepReplayBuffer,
    MultiAgentReplayBuffer,
)
from corral.utils.replay_buffers.n_step import N_STEP, adjust_nstep
from corral.utils.replay_buffers.prioritized_replay_buffer import (
    BATCH_INDEXES,
    WEIGHTS,
    PrioritizedReplayBuffer,
)
from corral.utils.replay_buffers.replay_buffer import ReplayBuffer
from corral.utils.replay_buffers.segment_tree import MinSegmentTree, SegmentTree, SumSegmentTree

__all__ = [
    "BATCH_INDEXES",
    "LockstepReplayBuffer",
    "N_STEP",
    "WEIGHTS",
    "MinSegmentTree",
    "MultiAgentReplayBuffer",
    "PrioritizedReplayBuffer",
    "ReplayBuffer",
    "SegmentTree",
    "SumSegmentTree",
    "adjust_nstep",
]
