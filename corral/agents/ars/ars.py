"""Augmented random search (Mania et al., 2018, arXiv:1803.07055) through the classic
Trainer API.

ES's machinery (`corral.agents.es`: the shared noise table, the `Worker`s that evaluate
antithetic perturbations, the filter merge) with ARS's update, as RLlib 1.13's ARS: each
worker call evaluates one perturbation pair; a step collects `num_rollouts` episodes,
keeps the `rollouts_used / num_rollouts` best directions (by the better of their two
returns), and takes a plain SGD step of `sgd_stepsize` along
`g = sum_k (r_k+ - r_k-) eps_k / (n * std(r))` (ARS V2-t: raw returns scaled by their
standard deviation, observations normalised by the MeanStdFilter).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from corral.agents.ars.ars_torch_policy import ARSTorchPolicy
from corral.agents.config import with_common_config
from corral.agents.es import optimizers, utils
from corral.agents.es.es import ESTrainer, Result, SharedNoiseTable, create_shared_noise
from corral.agents.es.es import Worker as ESWorker
from corral.env.env_context import EnvContext
from corral.policy.policy import Policy
from corral.utils.config_spec import Float, Int, Spec

DEFAULT_CONFIG = with_common_config(
    {
        # Std of the Gaussian noise added to float Box actions in the perturbed episodes.
        "action_noise_std": 0.0,
        # Std of the weight perturbations (`theta +/- noise_stdev * eps`).
        "noise_stdev": 0.02,
        # Each step collects at least this many perturbed episodes (two per direction).
        "num_rollouts": 32,
        # The best `rollouts_used / num_rollouts` of the directions enter the update.
        "rollouts_used": 32,
        # ARS workers (processes or Ray actors); 0: the driver evaluates the perturbations.
        "num_workers": 2,
        # SGD's step size.
        "sgd_stepsize": 0.01,
        # The policy's observation filter, its statistics merged from the workers.
        "observation_filter": "MeanStdFilter",
        # Floats in the shared noise table (float32: 4 bytes each).
        "noise_size": 250000000,
        # Probability that a worker runs an episode of the unperturbed weights (these
        # give the reported `episode_reward_mean`) instead of a perturbation pair.
        "eval_prob": 0.03,
        # `episode_reward_mean` averages the evaluation returns of this many last steps.
        "report_length": 10,
        # Subtracted (as |offset|) from every reward, e.g. a survival bonus.
        "offset": 0,
        # ARS sends the model's output to the env as it is; acting does the same.
        "normalize_actions": False,
        "clip_actions": False,
        # Evaluation workers act through the policy one env at a time (RLlib's setting).
        "evaluation_config": {"num_envs_per_worker": 1},
    }
)

# Type and range of ARS's own keys (COMMON_CONFIG's are in COMMON_CONFIG_SPECS).
CONFIG_SPECS: dict[str, Spec] = {
    "action_noise_std": Float(0),
    "noise_stdev": Float(0, lo_open=True),
    "num_rollouts": Int(1),
    "rollouts_used": Int(1),
    "sgd_stepsize": Float(0, lo_open=True),
    "noise_size": Int(1, integral_float_ok=True),
    "eval_prob": Float(0, 1),
    "report_length": Int(1),
    "offset": Float(),
}


class Worker(ESWorker):
    """ES's worker with ARS's signature and policy: each `do_rollouts` call evaluates
    exactly one perturbation pair (`min_task_runtime` is not used)."""

    policy_class = ARSTorchPolicy

    def __init__(
        self,
        config: dict,
        env_creator: Callable[[EnvContext], Any],
        noise: Any,
        worker_index: int,
        min_task_runtime: float = 0.2,
    ) -> None:
        super().__init__(config, {}, env_creator, noise, worker_index, min_task_runtime=0.0)


def _build_ars_worker(
    config: dict,
    policy_params: dict,
    env_creator: Callable[[EnvContext], Any],
    noise: Any,
    worker_index: int,
    min_task_runtime: float,
) -> Worker:
    """An ARS `Worker` from ES's worker arguments (what `ESTrainer` passes)."""
    return Worker({**config, **policy_params}, env_creator, noise, worker_index, min_task_runtime)


def get_policy_class(config: dict) -> type[Policy]:
    """ARS's policy class (torch is corral's only framework)."""
    return ARSTorchPolicy


class ARSTrainer(ESTrainer):
    """Augmented random search: the best directions' raw return differences, scaled by
    their standard deviation, one SGD step."""

    _name = "ARS"
    _default_config = DEFAULT_CONFIG
    _config_specs = CONFIG_SPECS
    _policy_class = ARSTorchPolicy
    _worker_factory = staticmethod(_build_ars_worker)
    _min_task_runtime = 0.0

    def _make_optimizer(self) -> optimizers.Optimizer:
        return optimizers.SGD(self.policy, self.config["sgd_stepsize"])

    def _collection_target(self) -> tuple[int, int]:
        return self.config["num_rollouts"], 0

    def _step_direction(
        self, noise_indices: np.ndarray, noisy_returns: np.ndarray, theta: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """ARS: keep the directions whose better return reaches the
        `100 (1 - rollouts_used / num_rollouts)` percentile (Algorithm 2, step 6),
        `g = sum_k (r_k+ - r_k-) eps_k / (n std(r))` over them (step 7)."""
        used = min(self.config["rollouts_used"], self.config["num_rollouts"])
        best = noisy_returns.max(axis=1)
        percentile = 100 * (1 - used / self.config["num_rollouts"])
        keep = best >= np.percentile(best, percentile)
        kept_indices, kept_returns = noise_indices[keep], noisy_returns[keep]
        g, _ = utils.batched_weighted_sum(
            kept_returns[:, 0] - kept_returns[:, 1],
            (self.noise.get(i, self.policy.num_params) for i in kept_indices),
            batch_size=min(500, len(kept_returns)),
        )
        g = np.asarray(g, np.float32) / kept_indices.size
        std = np.std(kept_returns)
        if not np.isclose(std, 0.0):
            g = g / std
        return g, -g


__all__ = [
    "DEFAULT_CONFIG",
    "ARSTrainer",
    "Result",
    "SharedNoiseTable",
    "Worker",
    "create_shared_noise",
    "get_policy_class",
]
