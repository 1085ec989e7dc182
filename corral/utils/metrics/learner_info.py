"""RLlib 1.13's learner-info layout: ``result["info"]["learner"][policy_id]["learner_stats"]``."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from corral.utils._nest import map_structure
from corral.utils.metrics.metrics_logger import stats_to_values

__all__ = ["LEARNER_INFO", "LEARNER_STATS_KEY", "LearnerInfoBuilder", "all_tower_reduce"]

LEARNER_INFO = "learner"
LEARNER_STATS_KEY = "learner_stats"


def learner_info_from(results: dict | None) -> dict:
    """Learner results (`Learner.update`'s, Stats leaves) -> RLlib's learner-info layout,
    ``{policy_id: {"learner_stats", "num_agent_steps_trained", "custom_metrics"}}``: a
    trainer's ``result["info"]["learner"]``, and per policy what RLlib 1.13's
    ``Policy.learn_on_batch`` returned."""
    values = stats_to_values(results or {})
    info = {}
    for pid, stats in values.items():
        if pid.startswith("__"):
            continue
        stats = dict(stats)
        trained = stats.pop("num_module_steps_trained", 0)
        custom = stats.pop("custom_metrics", {})
        info[pid] = {
            LEARNER_STATS_KEY: stats,
            "num_agent_steps_trained": trained,
            "custom_metrics": custom if isinstance(custom, dict) else {},
        }
    return info


def all_tower_reduce(path: tuple, *tower_data: Any) -> Any:
    """Reduces one stat over towers: ``td_error`` concatenated, ``min_*``/``max_*`` by
    min/max, everything else by the mean (NaNs ignored)."""
    if len(path) == 1 and path[0] == "td_error":
        return np.concatenate(tower_data, axis=0)
    if path[-1].startswith("min_"):
        return np.nanmin(tower_data)
    if path[-1].startswith("max_"):
        return np.nanmax(tower_data)
    return np.nanmean(tower_data)


def _map_with_path(fn: Any, *structs: Any, path: tuple = ()) -> Any:
    first = structs[0]
    if isinstance(first, dict):
        return {k: _map_with_path(fn, *(s[k] for s in structs), path=(*path, k)) for k in first}
    return fn(path, *structs)


class LearnerInfoBuilder:
    """Collects ``learn_on_batch`` results per policy and averages them (``finalize``).

    Args:
        num_devices: towers per result (results with ``tower_<i>`` keys are reduced with
            :func:`all_tower_reduce` first).
    """

    def __init__(self, num_devices: int = 1) -> None:
        self.num_devices = num_devices
        self.results_all_towers: dict[Any, list[dict]] = defaultdict(list)
        self.is_finalized = False

    def add_learn_on_batch_results(self, results: dict, policy_id: Any = "default_policy") -> None:
        """Adds one policy's ``learn_on_batch`` result."""
        assert not self.is_finalized, "LearnerInfo already finalized! Cannot add more results."
        if "tower_0" not in results:
            self.results_all_towers[policy_id].append(results)
            return
        towers = [results.pop(f"tower_{i}") for i in range(self.num_devices)]
        reduced = _map_with_path(all_tower_reduce, *towers)
        for key, value in results.items():
            if key == LEARNER_STATS_KEY:
                reduced.setdefault(LEARNER_STATS_KEY, {}).update(value)
            else:
                reduced[key] = value
        self.results_all_towers[policy_id].append(reduced)

    def add_learn_on_batch_results_multi_agent(self, all_policies_results: dict) -> None:
        """Adds ``{policy_id: result}`` (a ``batch_count`` entry is skipped)."""
        for pid, result in all_policies_results.items():
            if pid != "batch_count":
                self.add_learn_on_batch_results(result, policy_id=pid)

    def finalize(self) -> dict:
        """``{policy_id: results averaged over all added ones}``."""
        self.is_finalized = True
        return {
            pid: map_structure(lambda *s: None if s[0] is None else np.nanmean(s, axis=0), *results)
            for pid, results in self.results_all_towers.items()
        }
