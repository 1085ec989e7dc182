"""`InputReader`: where a rollout worker's batches come from when not from its env."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from corral.policy.sample_batch import MultiAgentBatch, SampleBatch

SampleBatchType = SampleBatch | MultiAgentBatch


class InputReader(ABC):
    """A source of experience batches (RLlib 1.13's `InputReader`).

    Subclasses implement `next()`; a trainer with ``config["input"]`` set to a callable
    or a registered input name calls it with an `IOContext` and samples from the reader
    it returns.
    """

    @abstractmethod
    def next(self) -> SampleBatchType:
        """Returns the next batch of experiences (a `SampleBatch` or `MultiAgentBatch`)."""

    def tf_input_ops(self, queue_size: int = 1) -> Any:
        """RLlib's TensorFlow input pipeline; corral runs on PyTorch."""
        raise NotImplementedError(
            "InputReader.tf_input_ops() builds TensorFlow queues; corral is torch-only: "
            "call next() for batches."
        )


class SamplerInput(InputReader):
    """A worker's env sampler as an input: each `next()` is one postprocessed fragment.

    Args:
        worker: the `RolloutWorker` whose envs are sampled.
    """

    def __init__(self, worker: Any) -> None:
        self.worker = worker

    def next(self) -> SampleBatchType:
        return self.worker.sample_from_env()

    def __repr__(self) -> str:
        return f"SamplerInput({self.worker!r})"
