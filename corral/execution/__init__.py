"""RLlib 1.13's `execution` package: the building blocks of `training_iteration()`.

`rollout_ops.synchronous_parallel_sample`, `train_ops.train_one_step` /
`multi_gpu_train_one_step` and `buffers.multi_agent_replay_buffer.MultiAgentReplayBuffer`
are built; RLlib's iterator-based execution-plan operators are served (as not built) by
`corral._surface`.
"""

from corral.execution.buffers.multi_agent_replay_buffer import MultiAgentReplayBuffer
from corral.execution.rollout_ops import standardize_fields, synchronous_parallel_sample
from corral.execution.train_ops import multi_gpu_train_one_step, train_one_step

__all__ = [
    "MultiAgentReplayBuffer",
    "multi_gpu_train_one_step",
    "standardize_fields",
    "synchronous_parallel_sample",
    "train_one_step",
]
