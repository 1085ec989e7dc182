"""`get_offline_io_resource_bundles`: the Ray resources a trainer's offline IO takes
(RLlib 1.13's `rllib.offline.resource`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral.offline.dataset_reader import get_resource_bundles


def get_offline_io_resource_bundles(config: Mapping[str, Any]) -> list[dict[str, float]]:
    """The resource bundles of ``input="dataset"``'s read tasks (`get_resource_bundles`);
    none for any other input (their files are read inside the rollout workers)."""
    if config.get("input") == "dataset":
        return get_resource_bundles(config)
    return []
