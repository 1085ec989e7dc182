"""MAML (model-agnostic meta-learning) through the classic Trainer API.

Finn, Abbeel & Levine 2017, "Model-Agnostic Meta-Learning for Fast Adaptation of Deep
Networks" (arXiv:1703.03400), as RLlib 1.13 built it for RL: each rollout worker is one
task of the meta-batch. One training step:

1. the meta-policy's weights go to every worker, and each worker's envs get a task of
   their own, drawn from the driver's env (`set_worker_tasks`; `use_meta_env`);
2. each worker samples `rollout_fragment_length` steps of complete episodes with the
   meta-policy, the driver standardises each worker's advantages, and each worker takes
   one plain policy-gradient step of size `inner_lr` on its own batch
   (`inner_adaptation`); this repeats `inner_adaptation_steps` times, then every worker
   samples once more with its adapted policy;
3. the driver takes `maml_optimizer_steps` Adam steps (`lr`) of the meta-objective on all
   those batches: PPO's clipped loss of each task's adapted policy, differentiated back
   through the inner steps (see `maml_torch_policy`), and adapts the KL coefficients of
   the inner steps towards `kl_target`.

Results report the pre-adaptation episodes as `episode_reward_mean/min/max` and those
after adaptation step N as `episode_reward_mean/min/max_adapt_N`, plus
`adaptation_delta` (mean after the last step minus mean before), all over this
iteration's episodes alone (RLlib 1.13's keys; no smoothing over iterations).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from corral.agents.config import with_common_config
from corral.agents.maml.maml_torch_policy import ADAPT_STEP, TASK_INDEX, MAMLTorchPolicy
from corral.agents.on_policy import ACTOR_CRITIC_CONFIG_SPECS, OnPolicyTrainer
from corral.agents.ppo.ppo import CONFIG_SPECS as PPO_CONFIG_SPECS
from corral.agents.ppo.ppo import move_deprecated_vf_share_layers
from corral.evaluation.backend import wait_all
from corral.evaluation.metrics import RolloutMetrics, get_metrics_from, summarize_episodes
from corral.evaluation.worker_set import WorkerSet
from corral.execution.common import NUM_ENV_STEPS_SAMPLED, count_sampled
from corral.execution.rollout_ops import standardize_fields
from corral.execution.train_ops import learner_results_per_iteration, update_learners
from corral.policy.sample_batch import (
    DEFAULT_POLICY_ID,
    MultiAgentBatch,
    SampleBatch,
    concat_samples,
)
from corral.utils.config_spec import Bool, Float, Int, Rule
from corral.utils.deprecation import DEPRECATED_VALUE

logger = logging.getLogger(__name__)

DEFAULT_CONFIG = with_common_config(
    {
        # Use Generalized Advantage Estimation (GAE) with `lambda` (else returns minus
        # the value baseline).
        "use_gae": True,
        # The GAE lambda: 1.0 = Monte-Carlo returns, 0.0 = one-step TD.
        "lambda": 1.0,
        # Initial coefficient of each inner step's KL penalty in the meta-objective
        # (adapted towards `kl_target`, one coefficient per worker and inner step).
        "kl_coeff": 0.0005,
        # Env steps each worker samples per adaptation step (complete episodes).
        "rollout_fragment_length": 200,
        # The driver's worker has an env: the tasks are drawn from it.
        "create_env_on_driver": True,
        # Learning rate of the meta-update (Adam).
        "lr": 1e-3,
        "model": {
            # Separate policy and value networks by default.
            "vf_share_layers": False,
        },
        # Weight of the value-function loss (inner and outer objectives).
        "vf_loss_coeff": 0.5,
        # Weight of the entropy bonus (inner and outer objectives).
        "entropy_coeff": 0.0,
        # PPO's clip parameter epsilon of the outer objective.
        "clip_param": 0.3,
        # How far the value estimate may move from the sampled one before its error is
        # clipped (PPO2's value clipping); sensitive to the reward scale.
        "vf_clip_param": 10.0,
        # Clip the meta-gradient, and each inner step's gradient (on the workers and in
        # the meta-objective alike), to this global norm (None: no clipping).
        "grad_clip": None,
        # Target of each inner step's mean KL divergence.
        "kl_target": 0.01,
        # MAML samples whole episodes: a task's data must not mix policies.
        "batch_mode": "complete_episodes",
        "observation_filter": "NoFilter",
        # Inner adaptation steps (plain policy-gradient steps) per worker and iteration.
        "inner_adaptation_steps": 1,
        # Meta-update steps (Adam, PPO-style objective) per iteration.
        "maml_optimizer_steps": 5,
        # Step size of the inner adaptation steps (plain SGD).
        "inner_lr": 0.1,
        # Give each worker a task drawn from the env's `sample_tasks` (the env must be a
        # `TaskSettableEnv`); False: the workers' envs keep the tasks they have.
        "use_meta_env": True,
        # Deprecated: use `model: {vf_share_layers: ...}`.
        "vf_share_layers": DEPRECATED_VALUE,
    }
)

# Type and range of MAML's own keys (COMMON_CONFIG's are in COMMON_CONFIG_SPECS), checked
# when the trainer is built; the keys it shares with A2C/PPO and PPO have their specs.
CONFIG_SPECS = {
    **{
        key: ACTOR_CRITIC_CONFIG_SPECS[key]
        for key in ("use_gae", "lambda", "vf_loss_coeff", "entropy_coeff", "grad_clip")
    },
    **{
        key: PPO_CONFIG_SPECS[key]
        for key in ("kl_coeff", "clip_param", "vf_clip_param", "kl_target", "vf_share_layers")
    },
    "inner_adaptation_steps": Int(1),
    "maml_optimizer_steps": Int(1),
    "inner_lr": Float(0, lo_open=True),
    "use_meta_env": Bool(),
}


def task_settable(env: Any) -> Any | None:
    """`env`, or the env inside its wrappers, when it has `sample_tasks` and `set_task`
    (a `TaskSettableEnv`); else None."""
    for candidate in (env, getattr(env, "unwrapped", None)):
        if callable(getattr(candidate, "sample_tasks", None)) and callable(
            getattr(candidate, "set_task", None)
        ):
            return candidate
    return None


def _set_task(task: Any, env: Any) -> None:
    target = task_settable(env)
    if target is None:
        raise ValueError(f"{type(env).__name__} has no `set_task` (it is no TaskSettableEnv).")
    target.set_task(task)


def set_worker_tasks(workers: WorkerSet, use_meta_env: bool) -> None:
    """Gives each remote worker's envs a task of their own, drawn with `sample_tasks` of
    the driver's env (nothing without `use_meta_env`)."""
    if not use_meta_env:
        return
    remote = workers.remote_workers()
    env = task_settable(next(iter(workers.local_worker().foreach_env(lambda e: e)), None))
    if env is None:
        raise ValueError(
            "use_meta_env=True: the driver's worker needs an env with `sample_tasks` "
            "(a TaskSettableEnv); set `create_env_on_driver=True`."
        )
    tasks = env.sample_tasks(len(remote))
    wait_all(
        [
            w.call("foreach_env", functools.partial(_set_task, task))
            for w, task in zip(remote, tasks)
        ]
    )


def inner_adaptation(workers: WorkerSet, samples: list[SampleBatch]) -> list[dict]:
    """Each remote worker takes its inner adaptation step on its own batch
    (`samples[i]` on worker `i`): its policy's `learn_on_batch`. Returns their infos."""
    return wait_all(
        [w.call("learn_on_batch", batch) for w, batch in zip(workers.remote_workers(), samples)]
    )


def post_process_metrics(adapt_iter: int, workers: WorkerSet, metrics: dict) -> dict:
    """Adds the rewards of the episodes the remote workers finished since they were last
    asked to `metrics`: `episode_reward_max/mean/min`, suffixed `_adapt_<adapt_iter>` after
    adaptation (`adapt_iter` > 0). Returns `metrics`."""
    return _add_reward_metrics(adapt_iter, get_metrics_from(workers.remote_workers()), metrics)


def _add_reward_metrics(adapt_iter: int, episodes: list[RolloutMetrics], metrics: dict) -> dict:
    summary = summarize_episodes(episodes)
    suffix = f"_adapt_{adapt_iter}" if adapt_iter > 0 else ""
    for stat in ("max", "mean", "min"):
        metrics[f"episode_reward_{stat}{suffix}"] = summary[f"episode_reward_{stat}"]
    return metrics


def meta_learning_rules(algorithm: str) -> tuple[Rule, ...]:
    """The config rules of the algorithms that meta-train one feed-forward policy in the
    driver through the inner adaptation steps of the remote workers (MAML, MB-MPO); each
    message names `algorithm`."""
    return (
        Rule(
            lambda c: c["num_workers"] >= 1,
            f"{algorithm} needs `num_workers` >= 1 (each rollout worker samples one task), "
            "got {num_workers}.",
        ),
        Rule(
            lambda c: c["batch_mode"] == "complete_episodes",
            f"{algorithm} samples whole episodes: `batch_mode` must be 'complete_episodes', "
            "got {batch_mode!r}.",
        ),
        Rule(
            lambda c: (c["num_gpus"] or 0) <= 1,
            f"`num_gpus` > 1 is not supported for {algorithm}, got {{num_gpus}}.",
        ),
        Rule(
            lambda c: not c.get("num_learners"),
            f"{algorithm}'s meta-update runs in the driver: `num_learners` must be 0, got "
            "{num_learners}.",
        ),
        Rule(
            lambda c: not c["torch_compile_learner"],
            f"{algorithm}'s meta-loss differentiates through the inner steps (a double "
            "backward), which torch.compile does not support: `torch_compile_learner` must "
            "be False, got {torch_compile_learner!r}.",
        ),
        Rule(
            lambda c: not c["sample_async"],
            f"{algorithm} samples each adaptation step right after the workers adapted: "
            "`sample_async` must be False, got {sample_async!r}.",
        ),
        Rule(
            lambda c: not (c["model"].get("use_lstm") or c["model"].get("use_attention")),
            f"{algorithm}'s policy is feed-forward: `model.use_lstm` and "
            "`model.use_attention` must be False, got {model}.",
        ),
        Rule(
            lambda c: not set(c["multiagent"]["policies"]) - {DEFAULT_POLICY_ID},
            f"{algorithm} trains one policy ('default_policy'): `multiagent.policies` must "
            "be empty, got {multiagent}.",
        ),
    )


class MAMLTrainer(OnPolicyTrainer):
    """Model-agnostic meta-learning (arXiv:1703.03400): one task per rollout worker."""

    min_num_workers = 1
    _name = "MAML"
    _default_config = DEFAULT_CONFIG
    _config_specs = CONFIG_SPECS
    _policy_class = MAMLTorchPolicy
    _config_rules = (
        *meta_learning_rules("MAML"),
        Rule(
            lambda c: bool(c["create_env_on_driver"]),
            "MAML draws the tasks from an env of the driver's worker: `create_env_on_driver` "
            "must be True, got {create_env_on_driver!r}.",
        ),
    )

    def validate_config(self, config: dict) -> None:
        move_deprecated_vf_share_layers(config)
        super().validate_config(config)

    def setup(self, config: dict) -> None:
        super().setup(config)
        # Per adaptation step (0: before adaptation), the episodes of this iteration.
        self._adaptation_episodes: list[list[RolloutMetrics]] = []
        try:
            if self.config["use_meta_env"]:
                self._check_meta_env()
        except BaseException:
            self.cleanup()
            raise

    def _check_meta_env(self) -> None:
        envs = self.workers.local_worker().foreach_env(lambda e: e)
        if envs and task_settable(envs[0]) is None:
            raise ValueError(
                "MAML with use_meta_env=True gives each worker a task drawn from the env's "
                "`sample_tasks`, so the env must implement TaskSettableEnv (sample_tasks, "
                f"set_task, get_task); env {self.config['env']!r} made a "
                f"{type(getattr(envs[0], 'unwrapped', envs[0])).__name__}, which does not. "
                "Set use_meta_env=False to meta-learn over the tasks the workers' envs have."
            )

    @learner_results_per_iteration
    def training_step(self) -> dict:
        """Samples before and after each inner adaptation step, then meta-updates."""
        workers = self.workers
        broadcast_meta_policy(workers, {"timestep": self._counters[NUM_ENV_STEPS_SAMPLED]})
        set_worker_tasks(workers, self.config["use_meta_env"])
        batch, env_steps, episodes = adaptation_rounds(
            workers, self.config["inner_adaptation_steps"], _standardize_advantages
        )
        # An iteration may run several steps (`min_sample_timesteps_per_reporting`,
        # `min_time_s_per_reporting`): its metrics cover the episodes of all of them.
        if self._adaptation_episodes:
            for reported, new in zip(self._adaptation_episodes, episodes, strict=True):
                reported.extend(new)
        else:
            self._adaptation_episodes = episodes
        train_batch = MultiAgentBatch({DEFAULT_POLICY_ID: batch}, env_steps)
        count_sampled(self._counters, train_batch)
        results = update_learners(self, train_batch, num_epochs=self.config["maml_optimizer_steps"])
        return self.learner_info_from(results)

    def collect_metrics(self, selected_workers: list | None = None) -> dict:
        """The episodes of this iteration: those before adaptation as the usual keys,
        those after adaptation step N as `episode_reward_*_adapt_N`, `adaptation_delta`
        (the mean after the last step minus the mean before); `episodes_this_iter`
        counts all of them. Before any MAML step ran: `Trainer`'s metrics."""
        rounds, self._adaptation_episodes = self._adaptation_episodes, []
        if not rounds:
            return super().collect_metrics(selected_workers)
        result = summarize_episodes(
            rounds[0], keep_custom_metrics=self.config["keep_per_episode_custom_metrics"]
        )
        result["episodes_this_iter"] = sum(len(episodes) for episodes in rounds)
        for step, episodes in enumerate(rounds[1:], start=1):
            _add_reward_metrics(step, episodes, result)
        last = len(rounds) - 1
        result["adaptation_delta"] = (
            result[f"episode_reward_mean_adapt_{last}"] - result["episode_reward_mean"]
        )
        return result


def broadcast_meta_policy(workers: WorkerSet, global_vars: dict) -> None:
    """Gives every remote worker the meta-policy's weights and `global_vars` (the local
    worker gets the global vars too). `sync_weights` would skip workers it believes
    current: their inner steps changed their weights behind its back."""
    local = workers.local_worker()
    local.set_global_vars(global_vars)
    weights = local.get_weights([DEFAULT_POLICY_ID])
    wait_all([w.call("set_weights", weights, global_vars) for w in workers.remote_workers()])


def adaptation_rounds(
    workers: WorkerSet,
    inner_adaptation_steps: int,
    process_batches: Callable[[list[SampleBatch]], Any],
) -> tuple[SampleBatch, int, list[list[RolloutMetrics]]]:
    """The data of one meta-update: every remote worker samples, adapts on its batch
    (`inner_adaptation`), samples again, ... `inner_adaptation_steps` times.

    Args:
        workers: the worker set; its remote workers hold the meta-policy (see
            `broadcast_meta_policy`), one task each.
        inner_adaptation_steps: inner steps per worker.
        process_batches: fn(batches) run on each round's batches (one per remote worker,
            in order) before the workers adapt on them, e.g. standardising advantages in
            place.

    Returns:
        (train batch, env steps sampled, episodes): every worker's batch of every round,
        with the `TASK_INDEX` (the worker's slot, `worker_index - 1`: it stays with the
        worker when another one is dropped, and a recreated worker takes its
        predecessor's) and `ADAPT_STEP` (the round; 0: before adaptation) columns the
        meta-loss reads; and per round, the episodes the workers finished in it.
    """
    remote = workers.remote_workers()
    slots = [w.worker_index - 1 for w in remote]
    train_batches: list[SampleBatch] = []
    episodes: list[list[RolloutMetrics]] = []
    env_steps = 0
    for step in range(inner_adaptation_steps + 1):
        samples = _sample_each(remote)
        env_steps += sum(b.env_steps() for b in samples)
        batches = [b.as_multi_agent().policy_batches[DEFAULT_POLICY_ID] for b in samples]
        process_batches(batches)
        episodes.append(get_metrics_from(remote))
        if step < inner_adaptation_steps:
            inner_adaptation(workers, batches)
        for task, batch in zip(slots, batches, strict=True):
            batch[TASK_INDEX] = np.full(batch.count, task, np.int64)
            batch[ADAPT_STEP] = np.full(batch.count, step, np.int64)
        train_batches.extend(batches)
    return concat_samples(train_batches), env_steps, episodes


def _standardize_advantages(batches: list[SampleBatch]) -> None:
    for batch in batches:
        standardize_fields(batch, [SampleBatch.ADVANTAGES])


def _sample_each(remote: list) -> list[SampleBatch | MultiAgentBatch]:
    """One batch from each remote worker, of episodes begun after this call: each worker's
    sampler drops its unfinished episodes first (they began under the previous policy or
    task)."""
    resets = [w.call("reset_sampler") for w in remote]
    samples = [w.call("sample") for w in remote]
    wait_all(resets)
    return wait_all(samples)


__all__ = [
    "DEFAULT_CONFIG",
    "MAMLTrainer",
    "adaptation_rounds",
    "broadcast_meta_policy",
    "inner_adaptation",
    "meta_learning_rules",
    "post_process_metrics",
    "set_worker_tasks",
]
