"""Resource requests of trials: Ray Tune's `PlacementGroupFactory`, or a stand-in.

`Trainer.default_resource_request(config)` returns one. Ray is only imported when it is
installed and a request is built (Ray Tune asks for it when it schedules a trial), never
by `import corral`.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any, NamedTuple


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


class Resources(NamedTuple):
    """Ray Tune 1.13's resources of a trial, as amounts (``tune.run(resources_per_trial=
    Resources(cpu=1, gpu=0))`` takes one, as it takes the same dict).

    Attributes:
        cpu, gpu, memory, object_store_memory: what the trial's driver needs.
        extra_cpu, extra_gpu, extra_memory, extra_object_store_memory: what the actors it
            starts need (one more bundle).
        custom_resources, extra_custom_resources: other resources by name.
        has_placement_group: whether the trial has a placement group (Tune's flag).
    """

    cpu: float
    gpu: float
    memory: float = 0
    object_store_memory: float = 0.0
    extra_cpu: float = 0.0
    extra_gpu: float = 0.0
    extra_memory: float = 0.0
    extra_object_store_memory: float = 0.0
    custom_resources: dict | None = None
    extra_custom_resources: dict | None = None
    has_placement_group: bool = False

    def cpu_total(self) -> float:
        """CPUs of the driver and its actors."""
        return self.cpu + self.extra_cpu

    def gpu_total(self) -> float:
        """GPUs of the driver and its actors."""
        return self.gpu + self.extra_gpu

    def memory_total(self) -> float:
        """Memory of the driver and its actors."""
        return self.memory + self.extra_memory

    def object_store_memory_total(self) -> float:
        """Object store memory of the driver and its actors."""
        return self.object_store_memory + self.extra_object_store_memory

    def get(self, key: str) -> float:
        """The driver's amount of the custom resource ``key`` (0 if none)."""
        return (self.custom_resources or {}).get(key, 0)

    def get_res_total(self, key: str) -> float:
        """The amount of the custom resource ``key`` of the driver and its actors."""
        return self.get(key) + (self.extra_custom_resources or {}).get(key, 0)

    def is_nonnegative(self) -> bool:
        """Whether no CPU, GPU or custom amount is negative."""
        values = [self.cpu, self.gpu, self.extra_cpu, self.extra_gpu]
        values += [*(self.custom_resources or {}).values()]
        values += [*(self.extra_custom_resources or {}).values()]
        return all(v >= 0 for v in values)

    def summary_string(self) -> str:
        """E.g. ``"2 CPUs, 0 GPUs"`` (Tune's summary)."""
        summary = f"{self.cpu_total()} CPUs, {self.gpu_total()} GPUs"
        if self.memory_total():
            summary += f", {round(self.memory_total() / 1024**3, 2)} GiB heap"
        if self.object_store_memory_total():
            summary += f", {round(self.object_store_memory_total() / 1024**3, 2)} GiB objects"
        names = sorted({*(self.custom_resources or {}), *(self.extra_custom_resources or {})})
        if names:
            summary += " (" + ", ".join(f"{self.get_res_total(n)} {n}" for n in names) + ")"
        return summary

    def as_tune_dict(self) -> dict[str, Any]:
        """The same amounts as ``resources_per_trial``'s dict."""
        out = {k: v for k, v in self._asdict().items() if k != "has_placement_group"}
        return {k: v for k, v in out.items() if v is not None}


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


# Ray Tune 1.13's `resources_per_trial` dict: its keys, and the bundle each goes in (the
# trial's driver, or one more bundle for the `extra_*` amounts) under Ray's resource name.
_TUNE_RESOURCE_KEYS = {
    "cpu": (0, "CPU"),
    "gpu": (0, "GPU"),
    "memory": (0, "memory"),
    "object_store_memory": (0, "object_store_memory"),
    "extra_cpu": (1, "CPU"),
    "extra_gpu": (1, "GPU"),
    "extra_memory": (1, "memory"),
    "extra_object_store_memory": (1, "object_store_memory"),
}


def resources_from_tune_argument(resources_per_trial: Any) -> Any:
    """`tune.run(resources_per_trial=...)` as a request (None when not given).

    Args:
        resources_per_trial: None, a request (an object with `bundles`, such as a Ray
            `PlacementGroupFactory` or a `ResourceRequest`), a `Resources`, or Ray Tune
            1.13's dict:
            `cpu` (default 1), `gpu`, `memory`, `object_store_memory`, their `extra_*`
            forms, `custom_resources` and `extra_custom_resources` (dicts of amounts).

    Raises:
        ValueError: an unknown key, or an amount that is not a number >= 0.
    """
    if resources_per_trial is None or hasattr(resources_per_trial, "bundles"):
        return resources_per_trial
    if isinstance(resources_per_trial, Resources):
        resources_per_trial = resources_per_trial.as_tune_dict()
    if not isinstance(resources_per_trial, dict):
        raise ValueError(
            "resources_per_trial must be a dict such as {'cpu': 1, 'gpu': 0} or a "
            f"PlacementGroupFactory, got {resources_per_trial!r}"
        )
    bundles: list[dict[str, float]] = [{"CPU": 1}, {}]
    for key, value in resources_per_trial.items():
        if key in ("custom_resources", "extra_custom_resources"):
            amounts = value or {}
            if not isinstance(amounts, dict):
                raise ValueError(f"resources_per_trial[{key!r}] must be a dict, got {value!r}")
            index = 1 if key.startswith("extra_") else 0
            items = [(f"{key}[{name!r}]", index, name, amount) for name, amount in amounts.items()]
        elif key in _TUNE_RESOURCE_KEYS:
            index, name = _TUNE_RESOURCE_KEYS[key]
            items = [(key, index, name, value)]
        else:
            raise ValueError(
                f"Unknown resources_per_trial key {key!r}; expected one of "
                f"{sorted([*_TUNE_RESOURCE_KEYS, 'custom_resources', 'extra_custom_resources'])}"
            )
        for label, index, name, amount in items:
            amount = 0 if amount is None else amount
            if isinstance(amount, bool) or not isinstance(amount, int | float) or amount < 0:
                raise ValueError(
                    f"resources_per_trial {label} must be a number >= 0, got {amount!r}"
                )
            bundles[index][name] = amount
    return resource_request(bundles if any(bundles[1].values()) else bundles[:1])
