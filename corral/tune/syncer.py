"""Ray Tune 1.13's ``SyncConfig`` (``ray.tune.syncer``): where a run's results are
synced to. corral.tune keeps results in the local experiment folder, so a
``SyncConfig`` is taken as long as it asks for no cloud ``upload_dir``
(``tune.run(sync_config=...)``, ``ExperimentAnalysis(..., sync_config=...)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["SyncConfig", "check_sync_config"]


@dataclass
class SyncConfig:
    """Ray Tune 1.13's syncing settings (only their defaults act here: no syncing).

    Attributes:
        upload_dir: a cloud URI to upload results to; not supported (None only).
        syncer: how to sync (``"auto"``); nothing to sync locally.
        sync_on_checkpoint: sync each checkpoint as it is saved.
        sync_period: seconds between syncs.
    """

    upload_dir: str | None = None
    syncer: Any = "auto"
    sync_on_checkpoint: bool = True
    sync_period: int = 300


def check_sync_config(sync_config: Any, where: str) -> None:
    """Refuses a ``sync_config`` with an ``upload_dir`` (``where``: the call it went to).

    Raises:
        ValueError: it names an ``upload_dir``.
        TypeError: it is neither None nor a ``SyncConfig``-like object.
    """
    if sync_config is None:
        return
    if not hasattr(sync_config, "upload_dir"):
        raise TypeError(f"{where}(sync_config=...) takes a tune.SyncConfig, got {sync_config!r}")
    if sync_config.upload_dir:
        raise ValueError(
            f"{where}(sync_config=SyncConfig(upload_dir={sync_config.upload_dir!r})): "
            "corral.tune keeps results in the local experiment folder (no cloud syncing); "
            "leave upload_dir unset, or copy local_dir yourself"
        )
