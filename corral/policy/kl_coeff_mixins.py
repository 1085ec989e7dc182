"""Adaptive KL-coefficient policy mixins of RLlib 1.13 that live in modules of algorithms
corral does not build (served at their RLlib paths by `corral._surface`)."""

from __future__ import annotations

from typing import Any


class MAMLKLCoeffMixin:
    """MAML's `KLCoeffMixin` (`agents.maml.maml_torch_policy.KLCoeffMixin`): one KL
    coefficient per inner adaptation step and worker, each adapted on its own KL.

    `__init__(config)` reads `kl_coeff`, `kl_target`, `inner_adaptation_steps` (1 when
    absent) and `num_workers` (at least 1); `update_kls(sampled_kls)` halves a
    coefficient whose KL fell below `kl_target / 1.5` and doubles one above
    `1.5 * kl_target`, and returns the list.
    """

    def __init__(self, config: dict) -> None:
        steps = int(config.get("inner_adaptation_steps", 1) or 1)
        workers = max(1, int(config.get("num_workers", 1) or 1))
        self.kl_coeff_val = [float(config["kl_coeff"])] * steps * workers
        self.kl_target = float(config["kl_target"])

    def update_kls(self, sampled_kls: Any) -> list[float]:
        for i, kl in enumerate(sampled_kls):
            if kl < self.kl_target / 1.5:
                self.kl_coeff_val[i] *= 0.5
            elif kl > 1.5 * self.kl_target:
                self.kl_coeff_val[i] *= 2.0
        return self.kl_coeff_val
