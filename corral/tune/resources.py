"""Resource requests of trials: Ray Tune's `PlacementGroupFactory`, or a stand-in.

`Trainer.default_resource_request(config)` returns one. Ray is only imported when it is
installed and a request is built (Ray Tune asks for it when it schedules a trial), never
by `import corral`.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any


class ResourceRequest:
    """A `PlacementGroupFactory` look-alike for when Ray is not installed.

    Args:
        bundles: one dict of resources (``{"CPU": 1, "GPU": 0}``) per bundle; the
            first is the trial's driver.
        strategy: the placement strategy ("PACK", "SPREAD", "STRICT_PACK",
            "STRICT_SPREAD").
    """

    def __init__(self, bundles: Sequence[dict[str, float]], strategy: str = "PACK") -> None:
        if not bundles:
            raise ValueError("A resource request needs at least one bundle, got none.")
        self.bundles = [{k: v for k, v in b.items() if v} for b in bundles]
        self.strategy = strategy

    @property
    def head_bundle_is_empty(self) -> bool:
        return not self.bundles[0]

    @property
    def required_resources(self) -> dict[str, float]:
        """The sum of all bundles (what the whole trial needs)."""
        total: dict[str, float] = {}
        for bundle in self.bundles:
            for name, amount in bundle.items():
                total[name] = total.get(name, 0) + amount
        return total

    def __getitem__(self, key: str) -> Any:
        # The dict this used to be: request["bundles"], request["strategy"].
        if key in ("bundles", "strategy"):
            return getattr(self, key)
        raise KeyError(key)

    def __eq__(self, other: object) -> bool:
        return (
            getattr(other, "bundles", None) == self.bundles
            and getattr(other, "strategy", None) == self.strategy
        )

    def __repr__(self) -> str:
        return f"ResourceRequest(bundles={self.bundles!r}, strategy={self.strategy!r})"


def resource_request(bundles: Sequence[dict[str, float]], strategy: str = "PACK") -> Any:
    """A Ray `PlacementGroupFactory` when Ray is installed, else a `ResourceRequest`.

    Zero amounts are left out of the bundles (Ray rejects bundles of only zeros; a
    driver bundle with `num_cpus_for_driver: 0` stays an empty head bundle).
    """
    cleaned = [{k: v for k, v in b.items() if v} for b in bundles]
    if importlib.util.find_spec("ray") is None:
        return ResourceRequest(cleaned, strategy)
    from ray.tune.execution.placement_groups import PlacementGroupFactory

    return PlacementGroupFactory(cleaned, strategy=strategy)
