"""RLlib 1.13's `execution` package: the building blocks of `training_iteration()`
(`synchronous_parallel_sample`, `train_one_step`, the asynchronous requests, the learner
thread, the 1.13 replay buffers) and of classic execution plans: the iterators
(`local_iterator`, Ray's `ray.util.iter`) and their operators in `rollout_ops`,
`train_ops`, `metric_ops`, `concurrency_ops` and `replay_ops`. RLlib's other names of
this package (`corral.execution.ParallelRollouts`, ...) are served lazily by
`corral._surface`.
"""

from corral.execution.buffers.multi_agent_replay_buffer import MultiAgentReplayBuffer
from corral.execution.multi_gpu_learner_thread import MultiGPULearnerThread
from corral.execution.rollout_ops import standardize_fields, synchronous_parallel_sample
from corral.execution.train_ops import multi_gpu_train_one_step, train_one_step

__all__ = [
    "MultiAgentReplayBuffer",
    "MultiGPULearnerThread",
    "multi_gpu_train_one_step",
    "standardize_fields",
    "synchronous_parallel_sample",
    "train_one_step",
]
