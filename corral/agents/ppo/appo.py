"""APPO, asynchronous PPO, through the classic Trainer API (RLlib 1.13's `APPOTrainer`).

IMPALA's architecture (`corral.agents.impala`: workers sampling with requests in
flight, a learner thread fed by a bounded queue, weights broadcast every
`broadcast_interval` fragments) with PPO's clipped surrogate as the policy loss
(`appo_torch_policy`). The surrogate's "old" policy is a target network, refreshed after
every `target_update_frequency` learner updates; advantages come from V-trace against
it, or from GAE on the workers (`vtrace=False`). An optional KL(target || current) term
(`use_kl_loss`) has an adaptive coefficient, updated when the target is.
"""

from __future__ import annotations

from typing import Any

from corral.agents.impala.impala import CONFIG_SPECS as IMPALA_CONFIG_SPECS
from corral.agents.impala.impala import DEFAULT_CONFIG as IMPALA_DEFAULT_CONFIG
from corral.agents.impala.impala import ImpalaTrainer
from corral.agents.ppo.appo_torch_policy import APPOTorchPolicy
from corral.agents.trainer import Trainer
from corral.execution.algorithm_ops import UpdateKL
from corral.execution.common import (
    LAST_TARGET_UPDATE_TS,
    NUM_TARGET_UPDATES,
    STEPS_SAMPLED_COUNTER,
    _get_shared_metrics,
)
from corral.utils.config_spec import Bool, Float, Int, Optional

DEFAULT_CONFIG = Trainer.merge_trainer_configs(
    IMPALA_DEFAULT_CONFIG,
    {
        # Correct the advantages of lagging samples with V-trace (else: GAE on the workers).
        "vtrace": True,
        # Use a critic (value function); required by V-trace and GAE.
        "use_critic": True,
        # GAE (with `lambda`) when `vtrace` is False.
        "use_gae": True,
        # The GAE lambda.
        "lambda": 1.0,
        # PPO's clip parameter epsilon.
        "clip_param": 0.4,
        # Add a KL(target || current) penalty with an adaptive coefficient.
        "use_kl_loss": False,
        # Initial coefficient of that penalty.
        "kl_coeff": 1.0,
        # The KL the coefficient adapts towards.
        "kl_target": 0.01,
        # Learner updates between two refreshes of the target ("old") policy and of the
        # KL coefficient; None: `num_sgd_iter * minibatch_buffer_size` (each train batch
        # is used up before the target moves; RLlib 1.13's interval).
        "target_update_frequency": None,
        # Steps per fragment collected by each worker per env.
        "rollout_fragment_length": 50,
        # Env (or agent) steps per train batch.
        "train_batch_size": 500,
        # Each `train()` call lasts at least this many seconds.
        "min_time_s_per_reporting": 10,
        # Remote rollout workers.
        "num_workers": 2,
        # GPUs of the learner.
        "num_gpus": 0,
        # Fragments kept for replay (used with `replay_proportion > 0`).
        "replay_buffer_num_slots": 100,
        # Clip gradients to this global norm.
        "grad_clip": 40.0,
        # Learning rate (the loss is a mean over the batch, as PPO's).
        "lr": 0.0005,
        # Weight of the value-function loss.
        "vf_loss_coeff": 0.5,
        # Weight of the entropy bonus.
        "entropy_coeff": 0.01,
    },
    _allow_unknown_configs=True,
)

CONFIG_SPECS = {
    **IMPALA_CONFIG_SPECS,
    "use_critic": Bool(),
    "use_gae": Bool(),
    "lambda": Float(0, 1),
    "clip_param": Float(0),
    "use_kl_loss": Bool(),
    "kl_coeff": Float(0),
    "kl_target": Float(0),
    "target_update_frequency": Optional(Int(1)),
}


class APPOTrainer(ImpalaTrainer):
    """Asynchronous PPO: IMPALA's actors and learner thread, PPO's clipped surrogate."""

    _name = "APPO"
    _default_config = DEFAULT_CONFIG
    _config_specs = CONFIG_SPECS
    _policy_class = APPOTorchPolicy

    def get_default_policy_class(self, config: dict) -> type:
        return APPOTorchPolicy  # V-trace or GAE, both in its loss

    def validate_config(self, config: dict) -> None:
        super().validate_config(config)
        if config["vtrace"] and not config["use_critic"]:
            raise ValueError("`vtrace=True` needs `use_critic=True` (V-trace needs values).")
        if not config["vtrace"] and not (config["use_gae"] and config["use_critic"]):
            raise ValueError(
                "`vtrace=False` takes GAE advantages: it needs `use_gae=True` and "
                f"`use_critic=True`, got use_gae={config['use_gae']}, "
                f"use_critic={config['use_critic']}."
            )


class UpdateTargetAndKL:
    """RLlib 1.13's operator of APPO's execution plan, `for_each` on the learner infos
    (`{policy_id: {"learner_stats": ...}}`): once more than `num_sgd_iter *
    minibatch_buffer_size` env steps were sampled since the last time (RLlib 1.13's
    measure), `update_target()` on each trainable policy of the local worker and, with
    `use_kl_loss`, `UpdateKL` (each policy's `update_kl` with its `kl` stat).

    Counts `num_target_updates` and `last_target_update_ts` in the plan's counters, so
    it runs inside an execution plan (a `LocalIterator` operator). corral's
    `APPOTrainer` needs none: `APPOTorchPolicy.after_update` updates the target and the
    KL coefficient every `target_update_frequency` learner updates itself. This operator
    is for execution plans of your own, e.g. with a policy that defines `update_target`
    (and `update_kl`) but not that `after_update`.

    Args:
        workers: the `WorkerSet`.
        config: the trainer config (`num_sgd_iter`, `minibatch_buffer_size`,
            `use_kl_loss`).
    """

    def __init__(self, workers: Any, config: dict) -> None:
        self.workers = workers
        self.config = config
        self.update_kl = UpdateKL(workers)
        self.target_update_freq = int(config["num_sgd_iter"]) * int(config["minibatch_buffer_size"])

    def __call__(self, fetches: dict) -> None:
        metrics = _get_shared_metrics()
        now = metrics.counters[STEPS_SAMPLED_COUNTER]
        if now - metrics.counters[LAST_TARGET_UPDATE_TS] <= self.target_update_freq:
            return
        metrics.counters[NUM_TARGET_UPDATES] += 1
        metrics.counters[LAST_TARGET_UPDATE_TS] = now
        self.workers.local_worker().foreach_trainable_policy(
            lambda policy, _: policy.update_target()
        )
        if self.config["use_kl_loss"]:
            self.update_kl(fetches)
