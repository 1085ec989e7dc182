"""APPO (asynchronous PPO) through the classic Trainer API, with RLlib 1.13's defaults.

The loss is RLlib 1.13's APPO loss (see `appo_torch_policy`): PPO's clipped surrogate on
V-trace advantages computed against a target network that follows every training step.
RLlib runs it on IMPALA's asynchronous actor-learner architecture; corral samples
synchronously instead: each training step collects `train_batch_size` steps from all
workers, makes `num_sgd_iter` passes over them, then sends the new weights out. The
behaviour policy therefore equals the target policy up to one update, so the V-trace
corrections stay near 1 (the algorithm is the same, without the asynchrony's lag). The
keys of IMPALA's learner thread and queues are accepted and have no effect.
"""

from __future__ import annotations

from corral.agents.config import with_common_config
from corral.agents.ppo.appo_torch_policy import APPOTorchPolicy
from corral.agents.trainer import (
    NUM_AGENT_STEPS_SAMPLED,
    NUM_AGENT_STEPS_TRAINED,
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_TRAINED,
    Trainer,
)
from corral.execution.rollout_ops import synchronous_parallel_sample
from corral.utils.config_spec import AnyValue, Bool, Float, Int, Optional, Schedule

DEFAULT_CONFIG = with_common_config(
    {
        # Correct the advantages of off-policy samples with V-trace (else: GAE).
        "vtrace": True,
        # V-trace's rho-bar: clip of the importance weights in the value targets.
        "vtrace_clip_rho_threshold": 1.0,
        # V-trace's clip of the importance weights in the policy-gradient advantages.
        "vtrace_clip_pg_rho_threshold": 1.0,
        # Kept for IMPALA's config; corral bootstraps each trajectory piece itself.
        "vtrace_drop_last_ts": True,
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
        # Steps per fragment collected by each worker per env.
        "rollout_fragment_length": 50,
        # Env steps per training step.
        "train_batch_size": 500,
        # Each `train()` call lasts at least this many seconds.
        "min_time_s_per_reporting": 10,
        "num_workers": 2,
        "num_gpus": 0,
        # IMPALA's learner settings: accepted, no effect (corral learns synchronously).
        "num_multi_gpu_tower_stacks": 1,
        "minibatch_buffer_size": 1,
        # Passes over each train batch.
        "num_sgd_iter": 1,
        # IMPALA's replay mix-in (not built: only 0.0).
        "replay_proportion": 0.0,
        "replay_buffer_num_slots": 100,
        "learner_queue_size": 16,
        "learner_queue_timeout": 300,
        "max_sample_requests_in_flight_per_worker": 2,
        "broadcast_interval": 1,
        "num_aggregation_workers": 0,
        # Clip gradients to this global norm.
        "grad_clip": 40.0,
        # "adam" (RMSProp's "rmsprop" is not built).
        "opt_type": "adam",
        "lr": 0.0005,
        "lr_schedule": None,
        # RMSProp's decay, momentum and epsilon (used with opt_type "rmsprop" only).
        "decay": 0.99,
        "momentum": 0.0,
        "epsilon": 0.1,
        # Weight of the value-function loss.
        "vf_loss_coeff": 0.5,
        # Weight of the entropy bonus, and its schedule.
        "entropy_coeff": 0.01,
        "entropy_coeff_schedule": None,
        # IMPALA's separate value-function optimiser (TF only in RLlib; not built).
        "_separate_vf_optimizer": False,
        "_lr_vf": 0.0005,
        # fn(workers, config) run after each training step (not built: only None).
        "after_train_step": None,
    }
)

CONFIG_SPECS = {
    "vtrace": Bool(),
    "vtrace_clip_rho_threshold": Float(0),
    "vtrace_clip_pg_rho_threshold": Float(0),
    "vtrace_drop_last_ts": Bool(),
    "use_critic": Bool(),
    "use_gae": Bool(),
    "lambda": Float(0, 1),
    "clip_param": Float(0),
    "use_kl_loss": Bool(),
    "kl_coeff": Float(0),
    "kl_target": Float(0),
    "num_multi_gpu_tower_stacks": Int(1),
    "minibatch_buffer_size": Int(1),
    "num_sgd_iter": Int(1),
    "replay_proportion": Float(0),
    "replay_buffer_num_slots": Int(0),
    "learner_queue_size": Int(1),
    "learner_queue_timeout": Float(0),
    "max_sample_requests_in_flight_per_worker": Int(1),
    "broadcast_interval": Int(1),
    "num_aggregation_workers": Int(0),
    "grad_clip": Optional(Float(0)),
    "opt_type": AnyValue(),
    "lr_schedule": Schedule(Float(0)),
    "decay": Float(0),
    "momentum": Float(0),
    "epsilon": Float(0),
    "vf_loss_coeff": Float(0),
    "entropy_coeff": Float(0),
    "entropy_coeff_schedule": Schedule(Float(0)),
    "_separate_vf_optimizer": Bool(),
    "_lr_vf": Float(0),
    "after_train_step": AnyValue(),
}


class APPOTrainer(Trainer):
    """Asynchronous PPO's loss (V-trace + clipped surrogate), sampled synchronously."""

    _name = "APPO"
    _default_config = DEFAULT_CONFIG
    _config_specs = CONFIG_SPECS
    _policy_class = APPOTorchPolicy

    def validate_config(self, config: dict) -> None:
        super().validate_config(config)
        if config["entropy_coeff"] < 0.0:
            raise ValueError(f"`entropy_coeff` must be >= 0.0, got {config['entropy_coeff']}.")
        if config["vtrace"] and not config["use_critic"]:
            raise ValueError("`vtrace=True` needs `use_critic=True` (V-trace needs values).")
        for key, off in (
            ("replay_proportion", 0.0),
            ("opt_type", "adam"),
            ("_separate_vf_optimizer", False),
            ("after_train_step", None),
        ):
            if config[key] != off:
                raise NotImplementedError(
                    f"APPO: `{key}` = {config[key]!r} is not built in corral (only {off!r})."
                )

    def training_step(self) -> dict:
        by_agent = self.config["multiagent"]["count_steps_by"] == "agent_steps"
        size = self.config["train_batch_size"]
        batch = synchronous_parallel_sample(
            worker_set=self.workers,
            max_env_steps=None if by_agent else size,
            max_agent_steps=size if by_agent else None,
        ).as_multi_agent()
        self._counters[NUM_ENV_STEPS_SAMPLED] += batch.env_steps()
        self._counters[NUM_AGENT_STEPS_SAMPLED] += batch.agent_steps()
        # Whole batches in time order: V-trace runs backwards through each trajectory.
        results = self.learner_group.update(
            batch=batch,
            num_epochs=self.config["num_sgd_iter"],
            minibatch_size=None,
            timesteps={"num_env_steps_sampled_lifetime": self._counters[NUM_ENV_STEPS_SAMPLED]},
        )
        self._counters[NUM_ENV_STEPS_TRAINED] += batch.env_steps()
        self._counters[NUM_AGENT_STEPS_TRAINED] += batch.agent_steps()
        self.workers.sync_weights(global_vars={"timestep": self._counters[NUM_ENV_STEPS_SAMPLED]})
        return self.learner_info_from(results)
