"""`IOContext`: what an input reader or output writer may know about its worker."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from corral.offline.input_reader import InputReader


class IOContext:
    """Attributes offline readers and writers are given (RLlib 1.13's `IOContext`).

    Args:
        log_dir: the trainer's log folder (``output="logdir"`` writes there); defaults to
            the current working directory.
        config: the (merged) trainer config of the worker.
        worker_index: 0 for the driver's worker, 1..n for remote ones.
        worker: the `RolloutWorker` that owns the reader/writer, if any.
    """

    def __init__(
        self,
        log_dir: str | None = None,
        config: dict | None = None,
        worker_index: int = 0,
        worker: Any = None,
    ) -> None:
        self.log_dir = log_dir or os.getcwd()
        self.config = config or {}
        self.worker_index = worker_index
        self.worker = worker

    def default_sampler_input(self) -> InputReader:
        """The worker's env sampler as an `InputReader` (``"sampler"`` in a mixed input)."""
        from corral.offline.input_reader import SamplerInput

        if self.worker is None or getattr(self.worker, "sampler", None) is None:
            raise ValueError(
                "The input 'sampler' needs a worker with an env, but this IOContext's worker "
                f"is {self.worker!r} (no env: give the trainer an `env`, or read only "
                "offline data)."
            )
        return SamplerInput(self.worker)

    @property
    def input_config(self) -> dict:
        """`config["input_config"]`: arguments for custom inputs."""
        return self.config.get("input_config") or {}

    @property
    def output_config(self) -> dict:
        """`config["output_config"]`: arguments for custom outputs."""
        return self.config.get("output_config") or {}

    def __repr__(self) -> str:
        return f"IOContext(worker_index={self.worker_index}, log_dir={self.log_dir!r})"
