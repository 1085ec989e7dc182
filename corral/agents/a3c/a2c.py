"""A2C, the synchronous advantage actor-critic, through the classic Trainer API.

`A2C_DEFAULT_CONFIG` keeps RLlib 1.x's A2C defaults (A3C's loss and settings,
sampled synchronously with 20-step fragments). One training step: sample
`train_batch_size` steps from the workers (advantages computed there), one
gradient step on the whole batch, push the weights to the workers.

With `microbatch_size` set, the batch is gathered in microbatches of that many steps
and the gradients of each are summed (`Learner.compute_gradients`) before one optimiser
step (`Learner.apply_gradients`): A3C's loss is a sum over the batch, so the summed
gradients are those of the whole batch (when `grad_clip` does not bite: each
microbatch's gradients are clipped as computed, as in RLlib), with the memory of one
microbatch. A3C proper (workers computing gradients that the driver applies as they
arrive) is in `corral.agents.a3c.a3c`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from corral.agents.a3c.a3c_torch_policy import A3CTorchPolicy
from corral.agents.on_policy import ActorCriticTrainer, with_actor_critic_config
from corral.execution.common import NUM_ENV_STEPS_SAMPLED, count_sampled, count_trained
from corral.execution.rollout_ops import synchronous_parallel_sample
from corral.execution.train_ops import learner_results_per_iteration
from corral.utils.config_spec import Int, Optional, Rule, Spec

A2C_DEFAULT_CONFIG = with_actor_critic_config(
    {
        # Clip gradients to this global norm (None: no clipping).
        "grad_clip": 40.0,
        # Learning rate (the loss is summed over the batch, not averaged).
        "lr": 0.0001,
        # Weight of the value-function loss.
        "vf_loss_coeff": 0.5,
        # Weight of the entropy bonus.
        "entropy_coeff": 0.01,
        # Steps per fragment collected by each worker per env.
        "rollout_fragment_length": 20,
        # Minimum seconds per `train()` call (RLlib 1.x's A2C reports every 10 s).
        "min_iter_time_s": 10,
        # Gradient accumulation: gather the train batch in microbatches of this many
        # env steps, summing their gradients before one optimiser step (None: one
        # pass over the whole batch). Needs the driver's learner (num_learners 0).
        "microbatch_size": None,
    }
)

# Type and range of A2C's own keys (the actor-critic keys are in
# `ACTOR_CRITIC_CONFIG_SPECS`, COMMON_CONFIG's in COMMON_CONFIG_SPECS), checked when the
# trainer is built (see `corral.utils.config_spec`).
A2C_CONFIG_SPECS: dict[str, Spec] = {
    "microbatch_size": Optional(Int(1)),
}


class A2CTrainer(ActorCriticTrainer):
    """Synchronous advantage actor-critic (arXiv:1602.01783); the training step is
    `OnPolicyTrainer`'s (one update on each sampled batch)."""

    _name = "A2C"
    _default_config = A2C_DEFAULT_CONFIG
    _config_specs = A2C_CONFIG_SPECS
    _policy_class = A3CTorchPolicy

    _config_rules = (
        Rule(
            lambda c: not (c["microbatch_size"] and c["num_learners"]),
            "A2C: microbatch_size={microbatch_size} accumulates gradients on the driver's "
            "learner; set num_learners=0 (got {num_learners}).",
        ),
    )

    @learner_results_per_iteration
    def training_step(self) -> dict:
        """One update on `train_batch_size` steps: whole, or summed over microbatches."""
        micro = self.config["microbatch_size"]
        if not micro:
            return super().training_step()
        learner = self.learner_group.local_learner
        assert learner is not None  # validate_config: num_learners == 0
        local = self.workers.local_worker()
        sums: dict[str, list[np.ndarray | None]] = {}
        info: dict[str, Any] = {}
        gathered = 0
        while gathered < self.config["train_batch_size"]:
            batch = synchronous_parallel_sample(self.workers, max_env_steps=micro)
            batch = batch.as_multi_agent()
            count_sampled(self._counters, batch)
            gathered += batch.env_steps()
            for pid, policy_batch in batch.policy_batches.items():
                if not local.is_policy_to_train(pid, batch):
                    continue
                grads, stats = learner.compute_gradients(pid, policy_batch)
                sums[pid] = grads if pid not in sums else _add(sums[pid], grads)
                trained = info.get(pid, {}).get("num_agent_steps_trained", 0)
                info[pid] = {
                    **stats,
                    "num_agent_steps_trained": trained + policy_batch.count,
                    "custom_metrics": {},
                }
            count_trained(self._counters, batch)
        for pid, grads in sums.items():
            learner.apply_gradients(pid, grads)  # bumps the policy's weights_seq
        self.workers.sync_weights(global_vars={"timestep": self._counters[NUM_ENV_STEPS_SAMPLED]})
        return info


def _add(total: list[np.ndarray | None], grads: list[np.ndarray | None]) -> list[np.ndarray | None]:
    """Element-wise sum of two gradient lists (None: the loss did not reach the parameter)."""
    return [
        g if t is None else t if g is None else t + g for t, g in zip(total, grads, strict=True)
    ]
