"""MB-MPO (model-based meta-policy optimisation) through the classic Trainer API.

Clavera, Rothfuss, Schulman, Fujita, Asfour & Abbeel 2018, "Model-Based Reinforcement
Learning via Meta-Policy Optimization" (arXiv:1809.05214), as RLlib 1.13 built it: an
ensemble of learned dynamics models stands in for the real env, and each model is one task
of MAML. One training iteration:

1. (first iteration only) the driver's worker samples the real env twice, acting at random
   (`MBMPOExploration`), and the ensemble is fitted on those transitions;
2. `num_maml_steps` times, one MAML meta-update (`corral.agents.maml`): every remote worker
   gets the meta-policy and samples imagined episodes from its model (`ModelVectorEnv`:
   real resets, model steps, the env's `reward`), the driver computes their advantages
   with a linear baseline (`post_process_samples`), the workers take their inner
   adaptation steps and sample again, and the driver takes `maml_optimizer_steps` steps of
   MAML's meta-objective on all of it;
3. the driver's worker samples the real env with the new meta-policy, the ensemble is
   fitted again on all real transitions so far (the last 10000) and sent to the workers.

Results report the real episodes of step 3 as `episode_reward_mean/min/max` (the meta-policy
in the real env) and those imagined in MAML round i after adaptation step j as
`MAMLIter{i}_DynaTrajInner_{j}_episode_reward_mean/min/max` (RLlib 1.13's keys);
`timesteps_total` counts real env steps only (`num_model_steps_sampled`: the imagined
ones), and `info/dynamics_model` has the last fit's losses and epochs.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch

from corral.agents.config import ALLOW_UNKNOWN_SUBKEYS, with_common_config
from corral.agents.maml.maml import CONFIG_SPECS as MAML_CONFIG_SPECS
from corral.agents.maml.maml import (
    adaptation_rounds,
    broadcast_meta_policy,
    inner_adaptation,
    meta_learning_rules,
)
from corral.agents.mbmpo.mbmpo_torch_policy import MBMPOTorchPolicy, validate_spaces
from corral.agents.mbmpo.model_ensemble import DynamicsEnsembleCustomModel, process_samples
from corral.agents.mbmpo.utils import MBMPOExploration, calculate_gae_advantages
from corral.agents.on_policy import OnPolicyTrainer
from corral.agents.ppo.ppo import move_deprecated_vf_share_layers
from corral.env.env_context import EnvContext
from corral.env.gym_compat import convert_space, ensure_gymnasium_env
from corral.env.multi_agent_env import MultiAgentEnv
from corral.env.wrappers.model_vector_env import find_env_method, model_vector_env
from corral.evaluation.backend import wait_all
from corral.evaluation.metrics import RolloutMetrics, get_metrics_from, summarize_episodes
from corral.evaluation.rollout_worker import get_global_worker
from corral.evaluation.worker_set import WorkerSet
from corral.execution.common import NUM_ENV_STEPS_SAMPLED, count_sampled
from corral.execution.train_ops import learner_results_per_iteration, update_learners
from corral.policy.policy import Policy
from corral.policy.sample_batch import (
    DEFAULT_POLICY_ID,
    MultiAgentBatch,
    SampleBatch,
    concat_samples,
)
from corral.utils.config_spec import (
    AnyOf,
    Bool,
    CallableSpec,
    ClassOrFactory,
    Dict,
    Float,
    Int,
    ListOf,
    Optional,
    Rule,
    Str,
)
from corral.utils.deprecation import DEPRECATED_VALUE
from corral.utils.sgd import standardized

logger = logging.getLogger(__name__)

DEFAULT_CONFIG = with_common_config(
    {
        # Use Generalized Advantage Estimation (GAE) with `lambda` for the value targets
        # of the value-function loss (the advantages come from a linear baseline:
        # `post_process_samples`).
        "use_gae": True,
        # The GAE lambda (of the value targets and of the linear-baseline advantages).
        "lambda": 1.0,
        # Initial coefficient of each inner step's KL penalty in the meta-objective
        # (adapted towards `kl_target`, one coefficient per worker and inner step).
        "kl_coeff": 0.0005,
        # Env steps each sub-env samples per round (complete episodes): each remote
        # worker's imagined episodes per adaptation step, and the driver's real ones.
        "rollout_fragment_length": 200,
        # The driver's worker samples the real env: it must have one.
        "create_env_on_driver": True,
        # Learning rate of the meta-update (Adam).
        "lr": 1e-3,
        # Weight of the value-function loss (inner and outer objectives).
        "vf_loss_coeff": 0.5,
        # Weight of the entropy bonus (inner and outer objectives).
        "entropy_coeff": 0.0,
        # PPO's clip parameter epsilon of the outer objective.
        "clip_param": 0.5,
        # How far the value estimate may move from the sampled one before its error is
        # clipped (PPO2's value clipping); sensitive to the reward scale.
        "vf_clip_param": 10.0,
        # Clip the meta-gradient, and each inner step's gradient, to this global norm
        # (None: no clipping).
        "grad_clip": None,
        # Target of each inner step's mean KL divergence.
        "kl_target": 0.01,
        # MB-MPO samples whole episodes: a task's data must not mix policies or models.
        "batch_mode": "complete_episodes",
        "observation_filter": "NoFilter",
        # Inner adaptation steps (plain policy-gradient steps) per worker and MAML round.
        "inner_adaptation_steps": 1,
        # Meta-update steps (Adam, PPO-style objective) per MAML round.
        "maml_optimizer_steps": 8,
        # Step size of the inner adaptation steps (plain SGD).
        "inner_lr": 1e-3,
        # Episode length of the imagined episodes (and of real episodes that do not end
        # before; 200 in the MB-MPO paper).
        "horizon": 200,
        # The dynamics ensemble.
        "dynamics_model": {
            # A DynamicsEnsembleCustomModel subclass (or its name given to
            # ModelCatalog.register_custom_model); None: DynamicsEnsembleCustomModel.
            "custom_model": None,
            # Number of transition-dynamics models: the tasks the workers sample from
            # (remote worker i steps model (i - 1) % ensemble_size).
            "ensemble_size": 5,
            # Hidden layers of each model.
            "fcnet_hiddens": [512, 512, 512],
            # Learning rate of the models (Adam).
            "lr": 1e-3,
            # Most epochs each model trains per fit (each stops early once its rolling
            # validation loss rises).
            "train_epochs": 500,
            # Minibatch size of the models' training.
            "batch_size": 500,
            # Share of the real transitions each model keeps for validation (its own
            # random split).
            "valid_split_ratio": 0.2,
            # Normalise the models' inputs (observation, action) and targets (the
            # observation change) with the data's means and standard deviations.
            "normalize_data": True,
        },
        # Random actions on the driver's worker for the first `random_timesteps` real env
        # steps (the first fit's data); the other workers sample their policy.
        "exploration_config": {
            "type": MBMPOExploration,
            "random_timesteps": 8000,
        },
        # fn(first sub-env) -> each rollout worker's env (RLlib's `custom_vector_env`);
        # None: `model_vector_env` (remote workers step their dynamics model, the driver's
        # worker and evaluation workers the real env).
        "custom_vector_env": None,
        # MAML rounds (meta-updates) per iteration, between two fits of the ensemble.
        "num_maml_steps": 10,
        # Deprecated: use `model: {vf_share_layers: ...}`.
        "vf_share_layers": DEPRECATED_VALUE,
    }
)

# Type and range of MB-MPO's keys (COMMON_CONFIG's are in COMMON_CONFIG_SPECS); the keys it
# shares with MAML have MAML's specs.
CONFIG_SPECS = {
    **{key: spec for key, spec in MAML_CONFIG_SPECS.items() if key in DEFAULT_CONFIG},
    "dynamics_model": Dict(
        {
            "custom_model": Optional(
                AnyOf(
                    Str(),
                    ClassOrFactory(
                        DynamicsEnsembleCustomModel, "a DynamicsEnsembleCustomModel subclass"
                    ),
                )
            ),
            "ensemble_size": Int(1),
            "fcnet_hiddens": ListOf(Int(1), min_len=1),
            "lr": Float(0, lo_open=True),
            "train_epochs": Int(1),
            "batch_size": Int(1),
            "valid_split_ratio": Float(0, 1, lo_open=True, hi_open=True),
            "normalize_data": Bool(),
        },
        what="a dict of the dynamics ensemble's settings",
    ),
    "custom_vector_env": Optional(CallableSpec()),
    "num_maml_steps": Int(1),
}

# The imagined episodes' keys of each MAML round and adaptation step (RLlib's).
METRICS_KEYS = ["episode_reward_mean", "episode_reward_min", "episode_reward_max"]
# The counter of imagined env steps (`timesteps_total` counts the real ones).
NUM_MODEL_STEPS_SAMPLED = "num_model_steps_sampled"


def post_process_metrics(prefix: str, workers: WorkerSet, metrics: dict) -> dict:
    """Adds `METRICS_KEYS` of the episodes the remote workers finished since they were last
    asked to `metrics`, each named ``<prefix>_<key>``; returns `metrics`."""
    return _add_prefixed_metrics(prefix, get_metrics_from(workers.remote_workers()), metrics)


def _add_prefixed_metrics(prefix: str, episodes: list[RolloutMetrics], metrics: dict) -> dict:
    summary = summarize_episodes(episodes)
    for key in METRICS_KEYS:
        metrics[f"{prefix}_{key}"] = summary[key]
    return metrics


def fit_dynamics(policy: Policy, pid: str, samples: SampleBatch | None = None) -> dict:
    """Fits `policy.dynamics_model` on real transitions (its actions mapped to the env's
    space, as the env took them): `samples`, a batch of `policy`'s; None: what the global
    rollout worker samples now (twice on the first fit, RLlib's initial exploration).

    Returns:
        The ensemble's fit metrics (`DynamicsEnsembleCustomModel.fit`).
    """
    model = policy.dynamics_model  # type: ignore[attr-defined]
    if samples is None:
        worker = get_global_worker()
        if worker is None:
            raise RuntimeError("fit_dynamics(policy, pid) without samples needs a rollout worker.")
        batches = [worker.sample() for _ in range(1 if model.global_itr else 2)]
        samples = concat_samples([b.as_multi_agent().policy_batches[pid] for b in batches])
    config = policy.config
    transitions = process_samples(samples)
    transitions[SampleBatch.ACTIONS] = policy.to_env_actions(  # type: ignore[attr-defined]
        transitions[SampleBatch.ACTIONS],
        unsquash=bool(config.get("normalize_actions")),
        clip=bool(config.get("clip_actions")),
    )
    return model.fit(transitions)


def sync_ensemble(workers: WorkerSet) -> None:
    """Sends the driver's dynamics ensembles (weights and normalisation statistics: its
    whole `state_dict`) to every remote worker's policies."""
    local = workers.local_worker()
    weights = {
        pid: {k: v.detach().cpu().numpy() for k, v in policy.dynamics_model.state_dict().items()}
        for pid, policy in local.policy_map.items()
        if hasattr(policy, "dynamics_model")
    }
    wait_all(
        [
            w.call("foreach_policy", _set_ensemble_weights, weights=weights)
            for w in workers.remote_workers()
        ]
    )


def _set_ensemble_weights(policy: Any, pid: str, weights: dict) -> None:
    if pid in weights:
        state = {k: torch.as_tensor(v, device=policy.device) for k, v in weights[pid].items()}
        policy.dynamics_model.load_state_dict(state)


def sync_stats(workers: WorkerSet) -> None:
    """Sends the driver's normalisation statistics to every remote worker's ensemble
    (`sync_ensemble` sends them too, as part of the ensemble's state)."""
    policy = cast(MBMPOTorchPolicy, workers.local_worker().get_policy())
    norms = policy.dynamics_model.normalizations
    wait_all(
        [
            w.call("foreach_policy", _set_normalizations, normalizations=norms)
            for w in workers.remote_workers()
        ]
    )


def _set_normalizations(policy: Any, pid: str, normalizations: dict) -> None:
    policy.dynamics_model.set_norms(normalizations)


def post_process_samples(
    samples: list[SampleBatch], config: dict
) -> tuple[list[SampleBatch], list[int]]:
    """Replaces each batch's advantages, in place, by GAE advantages on a linear baseline
    fitted to that batch's episodes (`calculate_gae_advantages` with `gamma` and `lambda`),
    standardised per batch.

    Returns:
        (`samples`, each batch's row count).
    """
    split_lst = []
    for sample in samples:
        paths = [
            {"rewards": episode[SampleBatch.REWARDS], "observations": episode[SampleBatch.OBS]}
            for episode in sample.split_by_episode()
        ]
        paths = calculate_gae_advantages(paths, config["gamma"], config["lambda"])
        advantages = np.concatenate([p["advantages"] for p in paths])
        sample[SampleBatch.ADVANTAGES] = standardized(advantages).astype(np.float32)
        split_lst.append(sample.count)
    return samples, split_lst


class MBMPOTrainer(OnPolicyTrainer):
    """Model-based meta-policy optimisation (arXiv:1809.05214): MAML over an ensemble of
    learned dynamics models, one model per rollout worker."""

    min_num_workers = 1
    _name = "MBMPO"
    _default_config = DEFAULT_CONFIG
    _config_specs = CONFIG_SPECS
    _policy_class = MBMPOTorchPolicy
    _allow_unknown_subkeys = [*ALLOW_UNKNOWN_SUBKEYS, "dynamics_model"]
    _config_rules = (
        *meta_learning_rules("MB-MPO"),
        Rule(
            lambda c: bool(c["create_env_on_driver"]),
            "MB-MPO samples the real env on the driver's worker: `create_env_on_driver` must "
            "be True, got {create_env_on_driver!r}.",
        ),
    )

    def validate_config(self, config: dict) -> None:
        move_deprecated_vf_share_layers(config)
        super().validate_config(config)
        ensemble_size = config["dynamics_model"]["ensemble_size"]
        if config["num_workers"] < ensemble_size:
            logger.warning(
                "MB-MPO: num_workers=%d < dynamics_model.ensemble_size=%d: remote worker i "
                "samples model (i - 1) %% %d, so some models are never a task.",
                config["num_workers"],
                ensemble_size,
                ensemble_size,
            )

    @staticmethod
    def validate_env(env: Any, env_context: EnvContext) -> None:
        """MB-MPO rewards imagined steps with the env's own reward function: the env must
        have ``reward(obs, action, obs_next)``."""
        if find_env_method(env, "reward") is None:
            raise ValueError(
                f"Env {env} (a {type(getattr(env, 'unwrapped', env)).__name__}) does not have "
                "a `reward(obs, action, obs_next)` method, which MB-MPO needs: it rewards the "
                "steps of its learned dynamics models with it. It takes batches (one row per "
                "transition) and returns one reward per row; see corral.env.mbmpo_env for "
                "envs that have one."
            )

    def _make_workers(self, *, env_creator: Any, config: dict, **kwargs: Any) -> WorkerSet:
        if not config.get("in_evaluation"):
            self._check_env_on_driver(env_creator, config)
        vectorize = config.get("custom_vector_env") or model_vector_env
        return super()._make_workers(
            env_creator=env_creator, config={**config, "custom_vector_env": vectorize}, **kwargs
        )

    def _check_env_on_driver(self, env_creator: Any, config: dict) -> None:
        """Builds one env in the driver before the workers: an env without `reward`, or
        with spaces the ensemble cannot model, fails with its own error here rather than
        inside a remote worker (which the driver sees as a worker failure)."""
        context = EnvContext(
            config.get("env_config") or {}, worker_index=0, num_workers=config["num_workers"]
        )
        env = ensure_gymnasium_env(env_creator(context))
        if env is None:
            return
        try:
            if isinstance(env, MultiAgentEnv):
                raise ValueError(
                    f"MB-MPO learns the dynamics of a single-agent env; env {env} is a "
                    "MultiAgentEnv."
                )
            if not isinstance(env, gym.Env):  # a vector env: the workers check its parts
                return
            self.validate_env(env, context)
            validate_spaces(
                None,
                convert_space(config.get("observation_space")) or env.observation_space,
                convert_space(config.get("action_space")) or env.action_space,
                config,
            )
        finally:
            close = getattr(env, "close", None)
            if callable(close):
                close()

    def setup(self, config: dict) -> None:
        super().setup(config)
        # Whether the ensemble has been fitted (the first iteration fits it first).
        self._fitted = False
        # This iteration's real episodes, and per MAML round and adaptation step its
        # imagined ones.
        self._real_episodes: list[RolloutMetrics] = []
        self._maml_episodes: list[list[list[RolloutMetrics]]] = []
        # The last fit's metrics.
        self._fit_stats: dict[str, Any] = {}
        # The remote workers the ensemble was last sent to (recreated ones need it).
        self._ensemble_holders: set[int] = set()

    @learner_results_per_iteration
    def training_step(self) -> dict:
        """`num_maml_steps` MAML meta-updates on imagined episodes, then a real-env round
        and a fit of the ensemble (see the module doc)."""
        cfg = self.config
        if not self._fitted:
            self._fit_dynamics(initial=True)
        self._sync_ensemble_if_needed()
        process = functools.partial(post_process_samples, config=cfg)
        for _ in range(cfg["num_maml_steps"]):
            broadcast_meta_policy(self.workers, {"timestep": self._counters[NUM_ENV_STEPS_SAMPLED]})
            batch, model_steps, episodes = adaptation_rounds(
                self.workers, cfg["inner_adaptation_steps"], process
            )
            self._maml_episodes.append(episodes)
            self._counters[NUM_MODEL_STEPS_SAMPLED] += model_steps
            train_batch = MultiAgentBatch({DEFAULT_POLICY_ID: batch}, model_steps)
            update_learners(self, train_batch, num_epochs=cfg["maml_optimizer_steps"])
        self._fit_dynamics()
        return {}

    def _fit_dynamics(self, initial: bool = False) -> None:
        """Samples the real env with the driver's worker (twice the first time, acting
        at random while `random_timesteps` last), fits the ensemble on all real data so far
        and sends it to the workers."""
        local = self.workers.local_worker()
        batches = []
        for _ in range(2 if initial else 1):
            local.set_global_vars({"timestep": self._counters[NUM_ENV_STEPS_SAMPLED]})
            batch = local.sample()
            count_sampled(self._counters, batch)
            batches.append(batch.as_multi_agent().policy_batches[DEFAULT_POLICY_ID])
        episodes = local.get_metrics()
        if not initial:  # The first, random episodes are not reported (RLlib's rule).
            self._real_episodes.extend(episodes)
        self._fit_stats = fit_dynamics(
            self._driver_policy(), DEFAULT_POLICY_ID, concat_samples(batches)
        )
        self._fitted = True
        self._sync_ensemble()

    def _driver_policy(self) -> MBMPOTorchPolicy:
        """The meta-policy, which holds the ensemble the driver fits."""
        return cast(MBMPOTorchPolicy, self.workers.local_worker().get_policy())

    def _sync_ensemble(self) -> None:
        sync_ensemble(self.workers)
        self._ensemble_holders = {id(w) for w in self.workers.remote_workers()}

    def _sync_ensemble_if_needed(self) -> None:
        """Sends the ensemble to workers that lack it (recreated after a failure)."""
        if {id(w) for w in self.workers.remote_workers()} - self._ensemble_holders:
            self._sync_ensemble()

    def collect_metrics(self, selected_workers: list | None = None) -> dict:
        """This iteration's real episodes as the usual keys (`episodes_this_iter` counts
        them), and its imagined ones per MAML round i and adaptation step j as
        `MAMLIter{i}_DynaTrajInner_{j}_episode_reward_mean/min/max`. Before any MB-MPO
        iteration ran: `Trainer`'s metrics."""
        real, self._real_episodes = self._real_episodes, []
        rounds, self._maml_episodes = self._maml_episodes, []
        if not real and not rounds:
            return super().collect_metrics(selected_workers)
        result = summarize_episodes(
            real, keep_custom_metrics=self.config["keep_per_episode_custom_metrics"]
        )
        for i, steps in enumerate(rounds):
            for j, episodes in enumerate(steps):
                _add_prefixed_metrics(f"MAMLIter{i}_DynaTrajInner_{j}", episodes, result)
        return result

    def _compile_results(self, learner_info: dict, steps_this_iter: int) -> dict:
        result = super()._compile_results(learner_info, steps_this_iter)
        result["info"]["dynamics_model"] = {
            k: v for k, v in self._fit_stats.items() if k in ("epochs", "train_loss", "valid_loss")
        }
        return result

    def _extra_checkpoint_state(self) -> dict:
        """The ensemble (weights, statistics, optimiser, real transitions) and whether it
        was fitted."""
        model = self._driver_policy().dynamics_model
        return {
            **super()._extra_checkpoint_state(),
            "dynamics_model": model.get_ensemble_state(),
            "fitted": self._fitted,
        }

    def _set_extra_checkpoint_state(self, state: dict) -> None:
        super()._set_extra_checkpoint_state(state)
        if "dynamics_model" in state:
            model = self._driver_policy().dynamics_model
            model.set_ensemble_state(state["dynamics_model"])
            self._fitted = bool(state.get("fitted"))
            self._sync_ensemble()


__all__ = [
    "DEFAULT_CONFIG",
    "METRICS_KEYS",
    "MBMPOTrainer",
    "fit_dynamics",
    "inner_adaptation",
    "post_process_metrics",
    "post_process_samples",
    "sync_ensemble",
    "sync_stats",
]
