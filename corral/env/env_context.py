"""`EnvContext`: the env config dict plus where this env lives."""

from __future__ import annotations

from typing import Any


class EnvContext(dict):
    """The `env_config` dict handed to env creators, plus the env's place in
    the sampling setup, so each copy of an env can configure itself (for
    example seed itself differently).

    Attributes:
        worker_index: 0 for the local (driver) worker, 1..n for remote ones.
        vector_index: index of this sub-env within its worker's vector.
        num_workers: number of remote workers in the worker set.
        remote: True when the sub-env runs in a process of its own.
        recreated_worker: True when the worker holding this env replaced a failed one
            (`recreate_failed_workers`).
    """

    def __init__(
        self,
        env_config: dict | None = None,
        worker_index: int = 0,
        vector_index: int = 0,
        remote: bool = False,
        num_workers: int | None = None,
        recreated_worker: bool = False,
    ) -> None:
        super().__init__(env_config or {})
        self.worker_index = worker_index
        self.vector_index = vector_index
        self.remote = remote
        self.num_workers = num_workers
        self.recreated_worker = recreated_worker

    def copy_with_overrides(
        self,
        env_config: dict | None = None,
        worker_index: int | None = None,
        vector_index: int | None = None,
        remote: bool | None = None,
        num_workers: int | None = None,
        recreated_worker: bool | None = None,
    ) -> EnvContext:
        """A copy with some fields replaced (None keeps this context's value)."""
        return EnvContext(
            dict(self) if env_config is None else env_config,
            worker_index=self.worker_index if worker_index is None else worker_index,
            vector_index=self.vector_index if vector_index is None else vector_index,
            remote=self.remote if remote is None else remote,
            num_workers=self.num_workers if num_workers is None else num_workers,
            recreated_worker=(
                self.recreated_worker if recreated_worker is None else recreated_worker
            ),
        )

    def set_defaults(self, defaults: dict) -> None:
        """Adds the keys of `defaults` this context lacks (keys it has keep their values)."""
        for key, value in defaults.items():
            self.setdefault(key, value)

    def __reduce__(self) -> Any:
        return (
            EnvContext,
            (
                dict(self),
                self.worker_index,
                self.vector_index,
                self.remote,
                self.num_workers,
                self.recreated_worker,
            ),
        )
