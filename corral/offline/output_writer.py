"""`OutputWriter`: where a rollout worker's sampled batches are written."""

from __future__ import annotations

from corral.offline.input_reader import SampleBatchType


class OutputWriter:
    """A sink for experience batches (RLlib 1.13's `OutputWriter`).

    Subclasses implement `write()`; ``config["output"]`` set to a callable is called with an
    `IOContext` and must return one.
    """

    def write(self, sample_batch: SampleBatchType) -> None:
        """Saves one batch of experiences."""
        raise NotImplementedError

    def close(self) -> None:
        """Flushes and closes open files (a no-op unless the writer holds some)."""


class NoopOutput(OutputWriter):
    """The writer of ``output=None``: writes nothing."""

    def write(self, sample_batch: SampleBatchType) -> None:
        return None
