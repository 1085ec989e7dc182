"""`Trainer`: the classic RLlib 1.x training API, orchestration only.

A trainer builds its rollout workers (`WorkerSet`), its learners
(`LearnerGroup`) and, when asked, evaluation workers; `train()` runs one
iteration: `step()` retries `step_attempt()` after worker failures, and
`step_attempt()` runs the algorithm's `training_step()` (sample -> update ->
sync weights) until the iteration's minimum time/steps are reached, then
evaluates when due. An algorithm is a default config, a policy class and a
`training_step`.
"""

from __future__ import annotations

import concurrent.futures
import functools
import json
import logging
import os
import random
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np

from corral.agents.callbacks import DefaultCallbacks
from corral.agents.config import (
    ALLOW_UNKNOWN_SUBKEYS,
    COMMON_CONFIG,
    COMMON_CONFIG_SPECS,
    OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES,
    check_config_values,
    check_not_implemented,
    merge_trainer_configs,
    validate_config,
    with_common_config,
)
from corral.core import _heap  # noqa: F401  (torch loaded, the heap frozen: see there)
from corral.core.learner import LearnerGroup
from corral.core.learner.learner_group import LearnerFailure, check_gpus
from corral.env.env_context import EnvContext
from corral.env.utils import env_id_of, make_env_creator
from corral.evaluation.backend import WorkerFailure, wait_all
from corral.evaluation.episode import Episode
from corral.evaluation.metrics import RolloutMetrics, collect_metrics, summarize_episodes
from corral.evaluation.worker_set import WORKER_START_TIMEOUT_S, WorkerSet
from corral.execution.common import (  # noqa: F401  (the names: RLlib 1.13's trainer has them)
    NUM_AGENT_STEPS_SAMPLED,
    NUM_AGENT_STEPS_TRAINED,
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_TRAINED,
    count_sampled,
    steps_sampled,
)
from corral.policy.policy import Policy
from corral.policy.sample_batch import DEFAULT_POLICY_ID, SampleBatch
from corral.tune.logger import UnifiedLogger, logger_from_config
from corral.tune.result import default_results_dir
from corral.tune.trainable import CheckpointError, ExportFormat, Trainable
from corral.utils import checkpoint_config, checkpoints
from corral.utils.checkpoint_config import qualified_name, resolve_class
from corral.utils.deprecation import DEPRECATED_VALUE, deprecation_warning
from corral.utils.filter import FilterManager
from corral.utils.metrics import stats_to_values
from corral.utils.spaces_json import space_from_json, space_to_json
from corral.utils.sys_usage import SysUsage

__all__ = [
    "COMMON_CONFIG",
    "MAX_WORKER_FAILURE_RETRIES",
    "Trainer",
    "with_common_config",
]

logger = logging.getLogger(__name__)

# How many times `step()` retries `step_attempt()` after worker failures in a
# row; more than a few in a row means something is persistently broken.
MAX_WORKER_FAILURE_RETRIES = 3

CHECKPOINT_FORMAT_VERSION = 1
# File stem of `_extra_checkpoint_state` in a checkpoint directory.
EXTRA_CHECKPOINT_STATE = "extra_state"
# Random generators and unfinished episodes of each rollout worker (exact resumes).
RESUME_CHECKPOINT_STATE = "resume_state"


class AddedPolicy(NamedTuple):
    """A policy added with `Trainer.add_policy`, as needed to add it again (to a
    recreated worker, or to a fresh trainer restoring a checkpoint)."""

    policy_cls: type[Policy]
    observation_space: Any
    action_space: Any
    config: dict
    evaluation_workers: bool


class Trainer(Trainable):
    """Coordinates sampling, learning and evaluation for one algorithm.

    Args:
        config: partial config, merged over the algorithm's `DEFAULT_CONFIG`.
        env: a name given to `register_env`, a Gymnasium id, a dotted class
            path or an env class (overrides `config["env"]`).
        logger_creator: `fn(config) -> Logger`; default: a `UnifiedLogger` in
            `~/corral_results/<Trainer>_<env>_<time>...`.
    """

    _name = "Trainer"
    _default_config: dict = COMMON_CONFIG
    # Type/range specs of the config keys this class adds (see
    # `corral.utils.config_spec`); `get_config_specs` merges them along the MRO.
    _config_specs: dict = COMMON_CONFIG_SPECS
    _policy_class: type[Policy] | None = None
    _allow_unknown_configs = False
    _allow_unknown_subkeys = ALLOW_UNKNOWN_SUBKEYS
    _override_all_subkeys_if_type_changes = OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES

    def __init__(
        self,
        config: dict | None = None,
        env: Any = None,
        logger_creator: Callable | None = None,
        remote_checkpoint_dir: str | None = None,
        sync_function_tpl: str | None = None,
    ) -> None:
        config = dict(config or {})
        env = env if env is not None else config.get("env")
        self._env_id = env_id_of(env)
        if env is not None:
            config["env"] = env
        if logger_creator is None:
            logger_creator = self._default_logger_creator
        super().__init__(config, logger_creator)

    def _default_logger_creator(self, config: dict) -> UnifiedLogger:
        results_dir = default_results_dir()
        os.makedirs(results_dir, exist_ok=True)
        timestr = datetime.today().strftime("%Y-%m-%d_%H-%M-%S")
        env = (self._env_id or "NoEnv").replace("/", "_")
        logdir = tempfile.mkdtemp(prefix=f"{self._name}_{env}_{timestr}", dir=results_dir)
        logger_config = config.get("logger_config") or {}
        if logger_config.get("type") is not None:
            return logger_from_config(logger_config, logdir)
        return UnifiedLogger(config, logdir, loggers=None)

    # -- config -------------------------------------------------------------

    @classmethod
    def get_default_config(cls) -> dict:
        return cls._default_config

    @classmethod
    def get_config_specs(cls) -> dict:
        """The type/range spec of each config key: COMMON_CONFIG_SPECS updated with the
        `_config_specs` of every class from `Trainer` down to this one."""
        specs: dict = {}
        for klass in reversed(cls.__mro__):
            specs.update(klass.__dict__.get("_config_specs") or {})
        return specs

    @classmethod
    def merge_trainer_configs(
        cls, config1: dict, config2: dict | None, _allow_unknown_configs: bool | None = None
    ) -> dict:
        if _allow_unknown_configs is None:
            _allow_unknown_configs = cls._allow_unknown_configs
        return merge_trainer_configs(
            config1,
            config2,
            _allow_unknown_configs,
            cls._allow_unknown_subkeys,
            cls._override_all_subkeys_if_type_changes,
        )

    @staticmethod
    def _validate_config(config: dict, trainer_obj_or_none: Trainer | None = None) -> None:
        validate_config(config, trainer_obj_or_none)

    def validate_config(self, config: dict) -> None:
        """Algorithm-specific checks (subclasses extend; call super)."""

    def get_default_policy_class(self, config: dict) -> type[Policy] | None:
        """The policy class of specs that name none; None when this trainer has none
        (RLlib 1.13: every policy spec must then name its class)."""
        return self._policy_class

    @staticmethod
    def validate_env(env: Any, env_context: EnvContext) -> None:
        """Checks each new (sub-)env; override to add your own checks."""

    # -- setup --------------------------------------------------------------

    def setup(self, config: dict) -> None:
        defaults = self.get_default_config()
        self.config = self.merge_trainer_configs(defaults, config, self._allow_unknown_configs)
        self.raw_user_config = config
        # Types and ranges first, so that no later check or setup step trips over a
        # value of the wrong kind with a message that does not name its key.
        check_config_values(self.config, self.get_config_specs())
        self._validate_config(self.config, trainer_obj_or_none=self)
        check_not_implemented(self.config, defaults)
        self.validate_config(self.config)
        check_gpus(self.config)
        if not callable(self.config["callbacks"]):
            raise ValueError(
                "`callbacks` must be a callable that returns a DefaultCallbacks subclass "
                f"instance, got {self.config['callbacks']!r}"
            )
        os.environ.update(
            {k: str(v) for k, v in self.config["extra_python_environs_for_driver"].items()}
        )
        if self.config.get("log_level"):
            logging.getLogger("corral").setLevel(self.config["log_level"])
        _seed_driver(self.config.get("seed"))
        _set_torch_threads(self.config["num_cpus_for_driver"])
        self.env_creator = make_env_creator(
            self.config.get("env"), self.config.get("preprocessor_pref")
        )
        self.callbacks: DefaultCallbacks = self.config["callbacks"]()
        if not isinstance(self.callbacks, DefaultCallbacks):
            raise TypeError(
                "`callbacks` must be a DefaultCallbacks subclass (or a factory returning an "
                f"instance of one); calling {self.config['callbacks']!r} returned "
                f"{self.callbacks!r}."
            )
        self._counters: dict[str, int] = defaultdict(int)
        self._episode_history: list[RolloutMetrics] = []
        self._episodes_total = 0

        self.workers = self._make_workers(
            env_creator=self.env_creator,
            validate_env=self.validate_env,
            policy_class=self.get_default_policy_class(self.config),
            config=self.config,
            num_workers=self.config["num_workers"],
        )
        self._learner_group: LearnerGroup | None = None
        self.evaluation_workers: WorkerSet | None = None
        if self.config["evaluation_num_workers"] > 0 or self.config["evaluation_interval"]:
            self.evaluation_workers = self._make_workers(
                env_creator=self.env_creator,
                validate_env=None,
                policy_class=self.get_default_policy_class(self.config),
                config=self._evaluation_config(),
                num_workers=self.config["evaluation_num_workers"],
            )
        # `log_sys_usage`: the machine's load in each result, as `result["perf"]`.
        self._sys_usage = SysUsage() if self.config["log_sys_usage"] else None
        # Policy-map changes since setup, replayed on recreated workers and restores.
        self._added_policies: dict[str, AddedPolicy] = {}
        self._removed_policies: list[str] = []
        self.callbacks.on_trainer_init(trainer=self)

    @property
    def learner_group(self) -> LearnerGroup:
        """The learners that train the local worker's policies in place.

        Built on first use: an optimiser's first construction imports torch's
        compiler stack (seconds), which acting and sampling never need, so a
        trainer samples (and a restored one acts) without paying for it.
        """
        if self._learner_group is None:
            local = self.workers.local_worker()
            self._learner_group = LearnerGroup(
                self.config,
                local.policy_map,
                self.callbacks,
                policy_ids=[pid for pid in local.policy_map if local.is_policy_to_train(pid)],
            )
        return self._learner_group

    def _evaluation_config(self) -> dict:
        overrides = self.config["evaluation_config"] or {}
        if overrides.get("in_evaluation", True) is not True:
            raise ValueError("evaluation_config must not set `in_evaluation` to False.")
        eval_config = merge_trainer_configs(
            self.config,
            overrides,
            True,
            self._allow_unknown_subkeys,
            self._override_all_subkeys_if_type_changes,
        )
        # Deprecated keys the user left alone were resolved by validating the main
        # config; validating that resolved value again would warn about a setting
        # the user never made.
        for key, default in self.get_default_config().items():
            untouched = key not in self.raw_user_config and key not in overrides
            if type(default) is int and default == DEPRECATED_VALUE and untouched:
                eval_config[key] = DEPRECATED_VALUE
        self._validate_config(eval_config, trainer_obj_or_none=self)
        # Evaluation runs whole episodes; fragments of one step make each
        # sample() end with the first finished episode, so a round of remote
        # sampling yields one episode per worker and no steps are wasted.
        eval_config.update(
            batch_mode="complete_episodes", rollout_fragment_length=1, in_evaluation=True
        )
        return eval_config

    def _make_workers(
        self,
        *,
        env_creator: Callable,
        validate_env: Callable | None,
        policy_class: type[Policy],
        config: dict,
        num_workers: int,
    ) -> WorkerSet:
        return WorkerSet(
            env_creator=env_creator,
            validate_env=validate_env,
            policy_class=policy_class,
            trainer_config=config,
            num_workers=num_workers,
            logdir=self.logdir,
        )

    # -- training -----------------------------------------------------------

    def step(self) -> dict:
        """One iteration, retrying `step_attempt()` after worker failures."""
        recover = self.config["ignore_worker_failures"] or self.config.get(
            "recreate_failed_workers"
        )
        last_error: WorkerFailure | None = None
        for _ in range(1 + MAX_WORKER_FAILURE_RETRIES):
            try:
                result = self.step_attempt()
                self._sync_filters_if_needed(self.workers)
                if self._sys_usage is not None:
                    result["perf"] = self._sys_usage.read()
                return result
            except WorkerFailure as e:
                if not recover:
                    logger.info(
                        "A worker failed during train(). To continue without it, set "
                        "`ignore_worker_failures: True` (or `recreate_failed_workers: True`)."
                    )
                    raise
                last_error = e
                logger.exception("Worker failure in train(); attempting to recover.")
                self.try_recover_from_step_attempt(error=e)
        # The cause (the env's own exception, a crash, a timeout) is part of the message.
        raise RuntimeError(
            f"Failed to recover from worker crash: {MAX_WORKER_FAILURE_RETRIES + 1} attempts "
            f"in a row failed; the last failure was: {last_error}"
        ) from last_error

    def _sync_filters_if_needed(self, worker_set: WorkerSet) -> None:
        """Merges the remote workers' observation-filter statistics into the local
        worker's filters and, with `synchronize_filters`, pushes the result back."""
        if self.config.get("observation_filter", "NoFilter") == "NoFilter":
            return
        FilterManager.synchronize(
            worker_set.local_worker().filters,
            worker_set.healthy_remote_workers(),
            update_remote=self.config["synchronize_filters"],
        )

    def step_attempt(self) -> dict:
        """Trains one iteration and evaluates when `evaluation_interval` says so."""
        interval = self.config["evaluation_interval"]
        evaluate_now = bool(interval) and (self._iteration + 1) % interval == 0
        if evaluate_now and self.config["evaluation_parallel_to_training"]:
            results, evaluation = self._train_and_evaluate_in_parallel()
        else:
            results = self._train_iteration()
            evaluation = self.evaluate() if evaluate_now else None
        if evaluate_now:
            if not isinstance(evaluation, dict):
                raise ValueError("Trainer.evaluate() must return a dict.")
            results.update(evaluation)
        self._update_env_tasks(results)
        return results

    def _train_iteration(self) -> dict:
        start = time.perf_counter()
        # Timesteps count agent steps when `multiagent/count_steps_by` says so.
        count_steps_by = self.config["multiagent"]["count_steps_by"]
        steps_before = steps_sampled(self._counters, count_steps_by)
        min_time = self.config["min_iter_time_s"] or 0
        min_steps = self.config["timesteps_per_iteration"] or 0
        # RLlib 1.13 users override `training_iteration()` (1.13's name), corral's
        # algorithms `training_step()`: an override of the former wins.
        step = (
            self.training_iteration
            if type(self).training_iteration is not Trainer.training_iteration
            else self.training_step
        )
        while True:
            learner_info = step()
            steps = steps_sampled(self._counters, count_steps_by) - steps_before
            if time.perf_counter() - start >= min_time and steps >= min_steps:
                break
        return self._compile_results(learner_info, steps)

    def training_step(self) -> dict:
        """One round of sampling and learning; returns the learner info dict.

        Algorithms implement this (sample with the worker set, update through
        `self.learner_group`, sync weights, count steps in `self._counters`). The
        default is RLlib 1.13's default `training_iteration()`: sample
        `train_batch_size` steps from all workers, train the policies to train on
        them (`multi_gpu_train_one_step`: `num_sgd_iter` epochs of
        `sgd_minibatch_size` minibatches where the config has them, else one update),
        then sync the weights to the workers.
        """
        from corral.execution.rollout_ops import synchronous_parallel_sample
        from corral.execution.train_ops import multi_gpu_train_one_step

        size = self.config["train_batch_size"]
        by_agent = self.config["multiagent"]["count_steps_by"] == "agent_steps"
        batch = synchronous_parallel_sample(
            worker_set=self.workers,
            max_env_steps=None if by_agent else size,
            max_agent_steps=size if by_agent else None,
        ).as_multi_agent()
        sampled = count_sampled(self._counters, batch)
        results = multi_gpu_train_one_step(self, batch)
        self.workers.sync_weights(global_vars={"timestep": sampled})
        return results

    def training_iteration(self) -> dict:
        """RLlib 1.13's name for `training_step()`; override either (an override of
        this one is what `train()` runs)."""
        return self.training_step()

    def _compile_results(self, learner_info: dict, steps_this_iter: int) -> dict:
        result = self.collect_metrics()
        # `on_learn_on_batch` metrics, per policy, next to the episodes' custom metrics
        # (RLlib 1.13's `custom_metrics/<policy_id>/...`).
        for pid, info in (learner_info or {}).items():
            custom = info.get("custom_metrics") if isinstance(info, dict) else None
            if custom:
                result.setdefault("custom_metrics", {})[pid] = dict(custom)
        self._episodes_total += result["episodes_this_iter"]
        counters = dict(self._counters)
        result.update(
            {
                "info": {"learner": learner_info, **counters},
                "timesteps_this_iter": steps_this_iter,
                "timesteps_total": steps_sampled(
                    counters, self.config["multiagent"]["count_steps_by"]
                ),
                "agent_timesteps_total": counters.get(NUM_AGENT_STEPS_SAMPLED, 0),
                "episodes_total": self._episodes_total,
                "num_healthy_workers": len(self.workers.healthy_remote_workers()),
                **counters,
            }
        )
        return result

    def collect_metrics(self, selected_workers: list | None = None) -> dict:
        """Episode metrics of the rollout workers, as `train()` reports them.

        Drains the episodes finished since the last call (they are counted
        once) and smooths over `metrics_smoothing_episodes` episodes.
        `selected_workers`: the remote workers to ask (default: the healthy ones).
        """
        return collect_metrics(
            self.workers.local_worker(),
            self.workers.healthy_remote_workers(),
            min_history=self.config["metrics_smoothing_episodes"],
            selected_workers=selected_workers,
            history=self._episode_history,
        )

    def log_result(self, result: dict) -> None:
        # Callbacks may change the result before it is written.
        self.callbacks.on_train_result(trainer=self, result=result)
        super().log_result(result)

    def learner_info_from(self, results: dict | None) -> dict:
        """Learner results (Stats leaves) -> RLlib's `info/learner` layout."""
        values = stats_to_values(results or {})
        info = {}
        for pid, stats in values.items():
            if pid.startswith("__"):
                continue
            stats = dict(stats)
            trained = stats.pop("num_module_steps_trained", 0)
            custom = stats.pop("custom_metrics", {})
            info[pid] = {
                "learner_stats": stats,
                "num_agent_steps_trained": trained,
                "custom_metrics": custom if isinstance(custom, dict) else {},
            }
        return info

    # -- evaluation ---------------------------------------------------------

    def evaluate(self, episodes_left_fn: Callable[[int], int] | None = None) -> dict:
        """Evaluates the current policies under the `evaluation_config` settings.

        Weights and filters are synced to the evaluation workers first. Then
        `custom_eval_function(trainer, evaluation_workers)` runs if set;
        otherwise episodes are sampled: exactly `evaluation_num_episodes` on a
        local worker, at least that many on remote evaluation workers (one
        round gives one episode per worker asked).

        Args:
            episodes_left_fn: `fn(num_episodes_done) -> num_episodes_left`;
                evaluation stops once it returns <= 0. Default: the configured
                number of episodes minus those done.

        Returns:
            `{"evaluation": metrics}`.
        """
        self._before_evaluate()
        self._sync_evaluation_workers()
        return self._evaluate_synced(episodes_left_fn)

    def _evaluate_synced(self, episodes_left_fn: Callable[[int], int] | None) -> dict:
        eval_workers = self.evaluation_workers
        if self.config["custom_eval_function"]:
            metrics = self.config["custom_eval_function"](self, eval_workers)
            if not metrics or not isinstance(metrics, dict):
                raise ValueError(
                    f"Custom eval function must return dict of metrics, got {metrics}."
                )
            return {"evaluation": metrics}
        num_episodes = self.config["evaluation_num_episodes"]
        if num_episodes == "auto":
            num_episodes = self.config["evaluation_num_workers"] or 1
        exact = episodes_left_fn is None
        if exact:

            def episodes_left_fn(num_episodes_done: int) -> int:
                return num_episodes - num_episodes_done

        if eval_workers is None:
            worker = self.workers.local_worker()
            if worker.sampler is None:
                raise ValueError(_NO_EVALUATION_ENV)
            episodes = _sample_episodes_locally(worker, episodes_left_fn, reset=False)
        elif not eval_workers.remote_workers():
            episodes = _sample_episodes_locally(eval_workers.local_worker(), episodes_left_fn)
        else:
            episodes = _sample_episodes_remotely(eval_workers.remote_workers(), episodes_left_fn)
            exact = False  # whole rounds: at least the episodes asked for
        if exact:
            episodes = episodes[:num_episodes]
        return {"evaluation": summarize_episodes(episodes)}

    def _train_and_evaluate_in_parallel(self) -> tuple[dict, dict]:
        """Runs the training iteration in a thread while evaluating in this one.

        The remote evaluation workers sample while the training workers and
        the learner work, so the two really overlap. Weights are synced before
        training starts: evaluation sees one consistent set of weights, never
        one that the learner is half-way through updating.
        """
        self._before_evaluate()
        self._sync_evaluation_workers()
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="corral-train") as pool:
            training = pool.submit(self._train_iteration)
            episodes_left_fn = None
            if self.config["evaluation_num_episodes"] == "auto":
                per_round = self.config["evaluation_num_workers"]

                def episodes_left_fn(num_episodes_done: int) -> int:
                    # At least one round, then rounds until training is done.
                    if num_episodes_done > 0 and training.done():
                        return 0
                    return per_round

            evaluation = self._evaluate_synced(episodes_left_fn)
            return training.result(), evaluation

    def _before_evaluate(self) -> None:
        """Hook run before each evaluation."""

    def _sync_evaluation_workers(self) -> None:
        if self.evaluation_workers is not None:
            self._sync_weights_to_workers(worker_set=self.evaluation_workers)

    def _sync_weights_to_workers(self, *, worker_set: WorkerSet) -> None:
        """Copies the local worker's weights, filters and global vars to `worker_set`."""
        source = self.workers.local_worker()
        state = source.get_state()
        if worker_set.local_worker() is not source:
            worker_set.local_worker().set_state(state)
        wait_all([w.call("set_state", state) for w in worker_set.remote_workers()])

    def _update_env_tasks(self, results: dict) -> None:
        """Lets `env_task_fn` pick the next task of every rollout worker's envs."""
        task_fn = self.config["env_task_fn"]
        if task_fn is None:
            return
        if not callable(task_fn):
            raise ValueError(
                "`env_task_fn` must be None or a callable taking [train_results, env, "
                "env_ctx] as args!"
            )
        self.workers.foreach_env_with_context(
            functools.partial(_set_env_task, task_fn=task_fn, results=results)
        )

    # -- acting -------------------------------------------------------------

    def compute_single_action(
        self,
        observation: Any = None,
        state: list | None = None,
        *,
        prev_action: Any = None,
        prev_reward: float | None = None,
        info: dict | None = None,
        input_dict: dict | None = None,
        policy_id: str = DEFAULT_POLICY_ID,
        full_fetch: bool = False,
        explore: bool | None = None,
        timestep: int | None = None,
        episode: Any = None,
        unsquash_action: bool | None = None,
        clip_action: bool | None = None,
        unsquash_actions: bool | None = None,
        clip_actions: bool | None = None,
        **kwargs: Any,
    ) -> Any:
        """The action of policy `policy_id` for one observation.

        The observation is preprocessed and filtered (without updating the
        filter) exactly as the sampler does, so the action is the one the
        policy would take in the env. Returns the action, or
        `(action, state_out, extra_fetches)` when `full_fetch` is True or the
        policy is recurrent.

        Raises:
            ValueError: neither or both of `observation` and `input_dict`.
            KeyError: `policy_id` is not a policy of the local worker.
        """
        if unsquash_actions is not None:
            deprecation_warning(
                "Trainer.compute_single_action(`unsquash_actions`=...)",
                "Trainer.compute_single_action(`unsquash_action`=...)",
            )
            unsquash_action = unsquash_actions
        if clip_actions is not None:
            deprecation_warning(
                "Trainer.compute_single_action(`clip_actions`=...)",
                "Trainer.compute_single_action(`clip_action`=...)",
            )
            clip_action = clip_actions
        if input_dict is not None:
            if any(v is not None for v in (observation, state, prev_action, prev_reward)):
                raise ValueError(_EITHER_OBS_OR_INPUT_DICT)
            batch = {k: _batch_of_one(v) for k, v in input_dict.items()}
            observation = input_dict[SampleBatch.OBS]
        elif observation is None:
            raise ValueError(_EITHER_OBS_OR_INPUT_DICT)
        else:
            batch = _single_input_batch(state, prev_action, prev_reward, info)
        policy = self._policy_or_key_error(policy_id)
        batch[SampleBatch.OBS] = self._preprocess_and_filter(policy_id, [observation])
        actions, state_out, extra = policy.compute_actions_from_input_dict(
            batch,
            explore=explore,
            timestep=timestep,
            episodes=None if episode is None else [episode],
            **kwargs,
        )
        action = _to_env_action(policy, _first(actions), unsquash_action, clip_action)
        state_out = [s[0] for s in state_out]
        if state or state_out or full_fetch:
            return action, state_out, {k: _first(v) for k, v in extra.items()}
        return action

    def compute_actions(
        self,
        observations: dict,
        state: dict | None = None,
        *,
        prev_action: Any = None,
        prev_reward: Any = None,
        info: dict | None = None,
        policy_id: str | None = DEFAULT_POLICY_ID,
        full_fetch: bool = False,
        explore: bool | None = None,
        timestep: int | None = None,
        episodes: list | None = None,
        unsquash_actions: bool | None = None,
        clip_actions: bool | None = None,
        normalize_actions: bool | None = None,
        **kwargs: Any,
    ) -> Any:
        """Actions of policy `policy_id` for a dict of observations (agent id -> obs).

        With `policy_id=None`, each agent acts with the policy that the
        `policy_mapping_fn` maps it to (one batch per policy; extra fetches
        are then keyed by policy id), as in a multi-agent episode.

        All observations go through the policy in one batch. `state` maps
        agent ids to their recurrent state (agents missing from it start from
        the policy's initial state). Returns `{agent_id: action}`, or
        `(actions, {agent_id: state_out}, extra_fetches)` (extra fetches
        batched in the order of `observations`) when `full_fetch` is True or
        a `state` was given.
        """
        if normalize_actions is not None:
            deprecation_warning(
                "Trainer.compute_actions(`normalize_actions`=...)",
                "Trainer.compute_actions(`unsquash_actions`=...)",
            )
            unsquash_actions = normalize_actions
        if policy_id is None:
            return self._compute_actions_per_policy(
                observations,
                state,
                prev_action=prev_action,
                prev_reward=prev_reward,
                info=info,
                full_fetch=full_fetch,
                explore=explore,
                timestep=timestep,
                episodes=episodes,
                unsquash_actions=unsquash_actions,
                clip_actions=clip_actions,
                **kwargs,
            )
        policy = self._policy_or_key_error(policy_id)
        agents = list(observations)
        batch = {SampleBatch.OBS: self._preprocess_and_filter(policy_id, observations.values())}
        if state is not None:
            per_agent = [state.get(a, policy.get_initial_state()) for a in agents]
            for i, column in enumerate(zip(*per_agent)):
                batch[f"state_in_{i}"] = np.stack(column)
        for key, value in (
            (SampleBatch.PREV_ACTIONS, prev_action),
            (SampleBatch.PREV_REWARDS, prev_reward),
            (SampleBatch.INFOS, info),
        ):
            if value is not None:
                batch[key] = _per_agent_column(value, agents)
        actions, states_out, extra = policy.compute_actions_from_input_dict(
            batch, explore=explore, timestep=timestep, episodes=episodes, **kwargs
        )
        by_agent = {
            a: _to_env_action(policy, actions[i], unsquash_actions, clip_actions)
            for i, a in enumerate(agents)
        }
        if state is not None or full_fetch:
            states = {a: [s[i] for s in states_out] for i, a in enumerate(agents)}
            return by_agent, states, extra
        return by_agent

    def _compute_actions_per_policy(
        self,
        observations: dict,
        state: dict | None,
        *,
        prev_action: Any,
        prev_reward: Any,
        info: Any,
        full_fetch: bool,
        episodes: list | None,
        **kwargs: Any,
    ) -> Any:
        """`compute_actions(policy_id=None)`: agents grouped by their mapped policy,
        one batched forward pass per policy; results keyed in `observations` order.

        The mapping sees `episodes[0]` when given (so it stays fixed over an
        episode, as while sampling), else a fresh stand-in episode.
        """
        local = self.workers.local_worker()
        episode = (
            episodes[0]
            if episodes
            else Episode(-1, 0, local.policy_map, local.policy_mapping_fn, worker=local)
        )
        groups: dict[str, list] = defaultdict(list)
        policy_of = {agent: episode.policy_for(agent) for agent in observations}
        for agent, pid in policy_of.items():
            groups[pid].append(agent)
        actions, states, extras = {}, {}, {}
        for pid, agents in groups.items():
            actions[pid], states[pid], extras[pid] = self.compute_actions(
                {a: observations[a] for a in agents},
                None if state is None else {a: state[a] for a in agents if a in state},
                prev_action=_agents_subset(prev_action, agents),
                prev_reward=_agents_subset(prev_reward, agents),
                info=_agents_subset(info, agents),
                policy_id=pid,
                full_fetch=True,
                episodes=episodes,
                **kwargs,
            )
        # In the order of `observations`, as with a single policy.
        by_agent = {a: actions[pid][a] for a, pid in policy_of.items()}
        if state is not None or full_fetch:
            states_by_agent = {a: states[pid][a] for a, pid in policy_of.items()}
            return by_agent, states_by_agent, extras
        return by_agent

    def compute_action(self, *args: Any, **kwargs: Any) -> Any:
        """Deprecated alias of `compute_single_action`."""
        deprecation_warning("Trainer.compute_action", "Trainer.compute_single_action")
        return self.compute_single_action(*args, **kwargs)

    def _policy_or_key_error(self, policy_id: str) -> Policy:
        policy = self.get_policy(policy_id)
        if policy is None:
            raise KeyError(
                f"PolicyID '{policy_id}' not found in PolicyMap of the Trainer's local "
                f"worker; policies: {sorted(self.workers.local_worker().policy_map)}."
            )
        return policy

    def _preprocess_and_filter(self, policy_id: str, observations: Any) -> np.ndarray:
        """A batch of observations as the policy sees them while sampling.

        The filter is applied with `update=False`: acting outside of sampling
        must not shift the running statistics the workers share.
        """
        worker = self.workers.local_worker()
        preprocessor = worker.preprocessors.get(policy_id)
        obs_filter = worker.filters[policy_id]
        rows = []
        for obs in observations:
            if preprocessor is not None:
                obs = _transform_checked(preprocessor, obs, policy_id)
            rows.append(obs_filter(obs, update=False))
        return np.stack(rows)

    # -- policies and weights ----------------------------------------------

    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID) -> Policy | None:
        return self.workers.local_worker().get_policy(policy_id)

    def get_weights(self, policies: list[str] | None = None) -> dict:
        return self.workers.local_worker().get_weights(policies)

    def set_weights(self, weights: dict) -> None:
        local = self.workers.local_worker()
        local.set_weights(weights)
        for pid in weights:
            policy = local.policy_map[pid]
            policy.weights_seq = getattr(policy, "weights_seq", 0) + 1
        self.workers.sync_weights()

    def add_policy(
        self,
        policy_id: str,
        policy_cls: type[Policy],
        *,
        observation_space: Any = None,
        action_space: Any = None,
        config: dict | None = None,
        policy_mapping_fn: Callable | None = None,
        policies_to_train: list[str] | Callable | None = None,
        evaluation_workers: bool = True,
    ) -> Policy:
        """Adds a policy to every rollout worker (and evaluation worker) and the learners.

        Spaces left None are taken from the env (the agents `policy_mapping_fn`
        maps to the policy). A new `policy_mapping_fn` applies to episodes
        started afterwards; `policies_to_train` None keeps the current list
        (plus the new policy). Returns the local worker's copy.

        The trainer remembers the policy: workers recreated after a failure
        (`recreate_failed_workers`) get it too, and checkpoints record its id,
        class, spaces and config so that `restore()` on a fresh trainer adds it
        again before loading its weights.
        """

        def add(worker: Any) -> None:
            worker.add_policy(
                policy_id=policy_id,
                policy_cls=policy_cls,
                observation_space=observation_space,
                action_space=action_space,
                config=config,
                policy_mapping_fn=policy_mapping_fn,
                policies_to_train=policies_to_train,
            )

        self.workers.foreach_worker(add)
        if evaluation_workers and self.evaluation_workers is not None:
            self.evaluation_workers.foreach_worker(add)
        self._sync_learner_policies()
        obs_space, act_space = self.workers.local_worker().policy_map.spaces(policy_id)
        self._added_policies[policy_id] = AddedPolicy(
            policy_cls, obs_space, act_space, dict(config or {}), evaluation_workers
        )
        if policy_id in self._removed_policies:
            self._removed_policies.remove(policy_id)
        return self.get_policy(policy_id)

    def remove_policy(
        self,
        policy_id: str = DEFAULT_POLICY_ID,
        *,
        policy_mapping_fn: Callable | None = None,
        policies_to_train: list[str] | Callable | None = None,
        evaluation_workers: bool = True,
    ) -> None:
        """Removes a policy from every rollout worker (and evaluation worker) and the learners."""

        def remove(worker: Any) -> None:
            worker.remove_policy(
                policy_id=policy_id,
                policy_mapping_fn=policy_mapping_fn,
                policies_to_train=policies_to_train,
            )

        self.workers.foreach_worker(remove)
        if evaluation_workers and self.evaluation_workers is not None:
            self.evaluation_workers.foreach_worker(remove)
        self.learner_group.remove_policy(policy_id)
        self._sync_learner_policies()
        if self._added_policies.pop(policy_id, None) is None:
            self._removed_policies.append(policy_id)

    def set_policy_mapping_fn(
        self, policy_mapping_fn: Callable, *, evaluation_workers: bool = True
    ) -> None:
        """Sets the `policy_mapping_fn` of every rollout (and evaluation) worker; it
        applies to episodes started afterwards. A function cannot be stored in a
        checkpoint: after `restore()`, call this again if the config's mapping
        is not the one wanted."""

        def set_fn(worker: Any) -> None:
            worker.set_policy_mapping_fn(policy_mapping_fn)

        self.workers.foreach_worker(set_fn)
        if evaluation_workers and self.evaluation_workers is not None:
            self.evaluation_workers.foreach_worker(set_fn)

    def _replay_policy_changes(self, handle: Any) -> None:
        """Gives a freshly built remote worker the policy map of the local worker:
        the added policies (not in the config it was built from) without the
        removed ones, and the current mapping fn and policies to train."""
        local = self.workers.local_worker()
        added = dict(self._added_policies)
        removed = list(self._removed_policies)
        mapping_fn = local.policy_mapping_fn
        to_train = local.policies_to_train

        def replay(worker: Any) -> None:
            for pid in removed:
                if pid in worker.policy_map:
                    worker.remove_policy(pid)
            for pid, spec in added.items():
                if pid not in worker.policy_map:
                    worker.add_policy(
                        pid,
                        spec.policy_cls,
                        observation_space=spec.observation_space,
                        action_space=spec.action_space,
                        config=spec.config,
                    )
            worker.set_policy_mapping_fn(mapping_fn)
            worker.set_policies_to_train(to_train)
            # Its first episodes started with the config's mapping: start them again.
            worker.reset_sampler()

        handle.apply(replay).result(WORKER_START_TIMEOUT_S)

    def _sync_learner_policies(self) -> None:
        """The learners train exactly the local worker's policies to train."""
        local = self.workers.local_worker()
        self.learner_group.set_policies_to_train(
            [pid for pid in local.policy_map if local.is_policy_to_train(pid)]
        )

    # -- export and import --------------------------------------------------

    def export_policy_model(
        self, export_dir: str, policy_id: str = DEFAULT_POLICY_ID, onnx: int | None = None
    ) -> None:
        """Writes policy `policy_id`'s model to `export_dir` for serving without corral.

        `model.pt` (TorchScript) plus its state dict, or with `onnx=<opset>`
        `model.onnx` (input `obs`, output `output`: action-distribution inputs).
        """
        self._policy_or_key_error(policy_id).export_model(export_dir, onnx)

    def export_policy_checkpoint(
        self, export_dir: str, filename_prefix: str = "model", policy_id: str = DEFAULT_POLICY_ID
    ) -> None:
        """Writes policy `policy_id`'s state (weights as safetensors, the rest JSON)."""
        self._policy_or_key_error(policy_id).export_checkpoint(export_dir, filename_prefix)

    def import_model(self, import_file: str) -> None:
        """Imports weights from `import_file` (HDF5 only, as in RLlib)."""
        if not os.path.exists(import_file):
            raise FileNotFoundError(
                f"`import_file` '{import_file}' does not exist! Can't import Model."
            )
        self.import_policy_model_from_h5(import_file)

    def import_policy_model_from_h5(
        self, import_file: str, policy_id: str = DEFAULT_POLICY_ID
    ) -> None:
        """Loads policy `policy_id`'s weights from an HDF5 file, then syncs them to
        the remote workers so that sampling uses them too."""
        self._policy_or_key_error(policy_id).import_model_from_h5(import_file)
        self.workers.sync_weights()

    def _export_model(self, export_formats: list[str], export_dir: str) -> dict[str, str]:
        ExportFormat.validate(export_formats)
        if ExportFormat.H5 in export_formats:
            raise NotImplementedError("Exporting to h5 is not supported; h5 is import-only.")
        exported = {}
        if ExportFormat.CHECKPOINT in export_formats:
            exported[ExportFormat.CHECKPOINT] = os.path.join(export_dir, ExportFormat.CHECKPOINT)
            self.export_policy_checkpoint(exported[ExportFormat.CHECKPOINT])
        if ExportFormat.MODEL in export_formats:
            exported[ExportFormat.MODEL] = os.path.join(export_dir, ExportFormat.MODEL)
            self.export_policy_model(exported[ExportFormat.MODEL])
        if ExportFormat.ONNX in export_formats:
            exported[ExportFormat.ONNX] = os.path.join(export_dir, ExportFormat.ONNX)
            opset = int(os.getenv("ONNX_OPSET", "11"))
            self.export_policy_model(exported[ExportFormat.ONNX], onnx=opset)
        return exported

    # -- recovery -----------------------------------------------------------

    def try_recover_from_step_attempt(self, error: BaseException | None = None) -> None:
        """Health-checks every remote worker, rollout and evaluation ones; drops
        (or, with `recreate_failed_workers`, recreates) the failed ones.

        A worker has failed when it is dead, does not answer a ping within
        `worker_health_probe_timeout_s`, or is the one `error` (the
        `WorkerFailure` of the failed attempt) came from: a worker whose env
        raised, or that did not answer in time, still answers a ping, yet it
        is broken (its env is mid-step, or it is too slow). A dropped or
        replaced worker is SIGKILLed, so a hung one does not linger.

        A failed data-parallel learner (`LearnerFailure`) restarts the learner
        group instead: as many learners with `recreate_failed_workers`, one fewer
        with `ignore_worker_failures`.
        """
        if isinstance(error, LearnerFailure) and self._learner_group is not None:
            self._learner_group.recover(
                error, keep_failed=bool(self.config.get("recreate_failed_workers"))
            )
            return
        failed = getattr(error, "handle", None)
        self._recover_worker_set(self.workers, failed, error, "rollout")
        if self.evaluation_workers is not None:
            self._recover_worker_set(self.evaluation_workers, failed, error, "evaluation")

    def _recover_worker_set(
        self,
        workers: WorkerSet,
        failed: Any,
        error: BaseException | None,
        kind: str,
    ) -> None:
        if not workers.remote_workers():
            return
        healthy = []
        for w, ok in workers.probe_remote_workers():
            if ok and w is not failed:
                healthy.append(w)
                continue
            if self.config.get("recreate_failed_workers"):
                logger.warning("Recreating failed %s worker %d.", kind, w.worker_index)
                # recreate_worker SIGKILLs the old process before starting the new one.
                healthy.append(
                    workers.recreate_worker(w.worker_index, prepare=self._replay_policy_changes)
                )
            else:
                logger.warning("Removing unhealthy %s worker %d.", kind, w.worker_index)
                w.kill()
        if not healthy:
            cause = f" The last failure was: {error}" if error is not None else ""
            raise RuntimeError(
                f"Not enough healthy workers remain to continue (every {kind} worker "
                f"failed).{cause}"
            ) from error
        # (A new evaluation worker gets the current weights when the next evaluation syncs.)
        workers.reset(healthy)

    # -- checkpoints --------------------------------------------------------

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        """Writes weights (safetensors), optimiser state (tensors) and JSON state.

        Policies added with `add_policy` are recorded by id, class (dotted import
        path), spaces and config, removed ones by id, and the policies to train
        when they are a list (see `load_checkpoint`).
        """
        local = self.workers.local_worker()
        checkpoints.write_trainer_state(
            checkpoint_dir,
            {
                "format_version": CHECKPOINT_FORMAT_VERSION,
                "trainer": self._name,
                "env": self._env_id,
                "config": checkpoint_config.config_to_json(self.config),
                "counters": dict(self._counters),
                "episodes_total": self._episodes_total,
                "episode_history": [m.to_json() for m in self._episode_history],
                "policy_changes": self._policy_changes_state(),
            },
            worker_state=local.get_state(),
            learner_state=self.learner_group.get_state(),
        )
        extra = self._extra_checkpoint_state()
        if extra:
            checkpoints.write_array_state(checkpoint_dir, EXTRA_CHECKPOINT_STATE, extra)
        checkpoints.write_array_state(checkpoint_dir, RESUME_CHECKPOINT_STATE, self._resume_state())
        return None

    def load_checkpoint(self, checkpoint_path: str) -> None:
        """Restores a checkpoint written by `save_checkpoint`.

        Policies the checkpoint's trainer had added at runtime are added first
        (those this trainer already has are kept as they are: add a policy
        yourself before restoring when its class or config could not be
        stored), removed ones are removed, and a stored list of policies to
        train is set. The `policy_mapping_fn` cannot be stored: the config's
        one stays in force; set another with `set_policy_mapping_fn`.
        """
        meta = checkpoints.read_trainer_meta(checkpoint_path)
        if meta.get("trainer") != self._name:
            raise CheckpointError(
                f"Checkpoint {checkpoint_path} was written by {meta.get('trainer')}, not "
                f"{self._name} (expected {self._name}): restore it with a "
                f"{meta.get('trainer')} trainer."
            )
        self._apply_policy_changes(meta.get("policy_changes") or {}, checkpoint_path)
        state, worker_state, learner_state = checkpoints.read_trainer_state(
            checkpoint_path, self.workers.local_worker().get_state()
        )
        self.__setstate__(
            {
                "worker": worker_state,
                "learner": learner_state,
                "counters": state.get("counters", {}),
                "episodes_total": state.get("episodes_total", 0),
                "episode_history": state.get("episode_history", []),
            }
        )
        if checkpoints.has_array_state(checkpoint_path, EXTRA_CHECKPOINT_STATE):
            self._set_extra_checkpoint_state(
                checkpoints.read_array_state(checkpoint_path, EXTRA_CHECKPOINT_STATE)
            )
        if checkpoints.has_array_state(checkpoint_path, RESUME_CHECKPOINT_STATE):
            self._set_resume_state(
                checkpoints.read_array_state(checkpoint_path, RESUME_CHECKPOINT_STATE)
            )

    def _resume_state(self) -> dict:
        """Each rollout worker's random generators and unfinished episodes, by worker
        index (0: the driver's), so that a restored trainer continues exactly as this
        one would (see `corral.evaluation.resume_state` for what can be replayed)."""
        remote = self.workers.remote_workers()
        states = wait_all([w.call("get_resume_state") for w in remote])
        out = {str(w.worker_index): state for w, state in zip(remote, states)}
        out["0"] = self.workers.local_worker().get_resume_state()
        return {"workers": out}

    def _set_resume_state(self, state: dict) -> None:
        """Applies `_resume_state` to the workers with the same indices (others start
        fresh episodes); the driver's generators are set last."""
        saved = state.get("workers") or {}
        remote = [w for w in self.workers.remote_workers() if str(w.worker_index) in saved]
        wait_all([w.call("set_resume_state", saved[str(w.worker_index)]) for w in remote])
        if "0" in saved:
            self.workers.local_worker().set_resume_state(saved["0"])

    def _checkpoint_algorithm(self) -> str:
        return self._name

    @classmethod
    def from_checkpoint(
        cls,
        checkpoint_path: str,
        config_overrides: dict | None = None,
        *,
        logger_creator: Callable | None = None,
    ) -> Trainer:
        """A trainer of the saved algorithm with the saved config, restored from the checkpoint.

        Called on `Trainer` itself, the algorithm is the one the checkpoint
        names (built-in or registered with `register_trainable` in this
        process); called on a subclass, the checkpoint must be of that class.
        Config values that were code (functions, classes that are not imported
        in this process) and envs that are not registered names or Gymnasium
        ids cannot come back from a checkpoint: pass them in `config_overrides`,
        which is merged over the saved config (e.g. fewer workers, exploration
        off: `{"num_workers": 0, "explore": False}`).

        Args:
            checkpoint_path: a checkpoint directory written by `save`, or a path inside it.
            config_overrides: config keys to change (nested dicts are merged).
            logger_creator: as for the constructor.

        Raises:
            CheckpointError: the checkpoint is damaged, of another algorithm, or
                lacks config values that were not passed; the message says which.
        """
        from corral.tune.trainable import _find_checkpoint_dir

        checkpoint_dir = _find_checkpoint_dir(checkpoint_path)
        name, config = checkpoints.read_saved_config(checkpoint_dir)
        trainer_cls = cls
        if cls._name != name:
            if cls is not Trainer:
                raise CheckpointError(
                    f"Checkpoint {checkpoint_dir} was written by {name}, not {cls._name}: "
                    f"use the {name} trainer (or Trainer.from_checkpoint)."
                )
            from corral.agents.registry import get_trainer_class

            try:
                trainer_cls = get_trainer_class(name)
            except (ValueError, NotImplementedError) as e:
                raise CheckpointError(
                    f"Checkpoint {checkpoint_dir} was written by {name!r}, which is not an "
                    f"algorithm known in this process ({e}); register it or call "
                    "from_checkpoint on its class."
                ) from None
        config = checkpoint_config.apply_overrides(config, config_overrides or {})
        checkpoint_config.check_resolved(config, checkpoint_dir)
        defaults = trainer_cls.get_default_config()
        for key, default in defaults.items():
            # A deprecated key's value already moved to its successor when the
            # checkpoint's trainer was built; passing it back would warn again.
            if type(default) is int and default == DEPRECATED_VALUE:
                config.pop(key, None)
        trainer = trainer_cls(config=config, logger_creator=logger_creator)
        try:
            trainer.restore(checkpoint_dir)
        except BaseException:
            trainer.stop()
            raise
        return trainer

    def _policy_changes_state(self) -> dict:
        """The JSON record of `add_policy`/`remove_policy` calls for checkpoints."""
        to_train = self.workers.local_worker().policies_to_train
        return {
            "added": {
                pid: _added_policy_to_json(pid, spec) for pid, spec in self._added_policies.items()
            },
            "removed": list(self._removed_policies),
            "policies_to_train": None if callable(to_train) else list(to_train),
        }

    def _apply_policy_changes(self, changes: dict, checkpoint_path: str) -> None:
        """Makes this trainer's policy map the one a checkpoint was saved with."""
        local = self.workers.local_worker()
        for pid in changes.get("removed", []):
            if pid in local.policy_map:
                self.remove_policy(pid)
        for pid, entry in (changes.get("added") or {}).items():
            if pid in local.policy_map:
                continue
            spec = _added_policy_from_json(pid, entry, checkpoint_path)
            self.add_policy(
                pid,
                spec.policy_cls,
                observation_space=spec.observation_space,
                action_space=spec.action_space,
                config=spec.config,
                evaluation_workers=spec.evaluation_workers,
            )
        to_train = changes.get("policies_to_train")
        if to_train is not None:
            to_train = [pid for pid in to_train if pid in local.policy_map]

            def set_to_train(worker: Any) -> None:
                worker.set_policies_to_train(to_train)

            self.workers.foreach_worker(set_to_train)
            self._sync_learner_policies()

    def _extra_checkpoint_state(self) -> dict:
        """Algorithm state beyond weights and optimisers (e.g. a replay buffer).

        A nested dict of numpy arrays and JSON-able values, written as
        `extra_state.safetensors` + `extra_state.json`; empty: nothing written.
        """
        return {}

    def _set_extra_checkpoint_state(self, state: dict) -> None:
        """Restores what `_extra_checkpoint_state` returned."""

    def __getstate__(self) -> dict:
        return {
            "worker": self.workers.local_worker().get_state(),
            "learner": self.learner_group.get_state(),
            "counters": dict(self._counters),
            "episodes_total": self._episodes_total,
            "episode_history": [m.to_json() for m in self._episode_history],
        }

    def __setstate__(self, state: dict) -> None:
        local = self.workers.local_worker()
        local.set_state(state["worker"])
        for policy in local.policy_map.values():
            policy.weights_seq = getattr(policy, "weights_seq", 0) + 1
        wait_all([w.call("set_state", state["worker"]) for w in self.workers.remote_workers()])
        if state.get("learner"):
            self.learner_group.set_state(state["learner"])
        self._counters = defaultdict(int, state.get("counters", {}))
        self._episodes_total = state.get("episodes_total", 0)
        self._episode_history = [
            RolloutMetrics.from_json(m) for m in state.get("episode_history", [])
        ]

    # -- resources ----------------------------------------------------------

    @classmethod
    def default_resource_request(cls, config: dict) -> Any:
        """What a trial of this config needs, as placement-group bundles.

        One bundle for the driver (`num_cpus_for_driver`, `num_gpus`), one per rollout
        worker and per evaluation worker (`num_cpus_per_worker`, `num_gpus_per_worker`,
        `custom_resources_per_worker`) and one per data-parallel learner
        (`num_cpus_per_learner`, `num_gpus_per_learner`), with `placement_strategy`.

        Returns:
            A Ray Tune `PlacementGroupFactory` when Ray is installed (Ray Tune then
            reserves exactly this for each trial), else a `ResourceRequest` with the
            same `bundles`, `strategy` and `required_resources`.
        """
        from corral.tune.resources import resource_request

        bundles, strategy = cls._resource_bundles(config)
        return resource_request(bundles, strategy)

    @classmethod
    def _resource_bundles(cls, config: dict) -> tuple[list[dict[str, float]], str]:
        cf = dict(cls._default_config, **config)
        eval_cf = cf.get("evaluation_config") or {}
        fake = cf.get("_fake_gpus")
        # Fake GPUs are simulated on the driver's CPU: nothing to reserve for them.
        driver = {"CPU": cf["num_cpus_for_driver"], "GPU": 0 if fake else cf["num_gpus"]}
        bundles = [driver]
        # Fake GPUs on workers and learners are simulated on their CPUs too.
        custom = dict(cf.get("custom_resources_per_worker") or {})
        for _ in range(cf["num_workers"]):
            gpus = 0 if fake else cf["num_gpus_per_worker"]
            bundles.append({"CPU": cf["num_cpus_per_worker"], "GPU": gpus, **custom})
        if cf["evaluation_interval"]:
            for _ in range(cf["evaluation_num_workers"]):
                gpus = eval_cf.get("num_gpus_per_worker", cf["num_gpus_per_worker"])
                bundles.append(
                    {
                        "CPU": eval_cf.get("num_cpus_per_worker", cf["num_cpus_per_worker"]),
                        "GPU": 0 if fake else gpus,
                        **custom,
                    }
                )
        for _ in range(cf.get("num_learners") or 0):
            gpus = 0 if fake else cf.get("num_gpus_per_learner", 0)
            bundles.append({"CPU": cf.get("num_cpus_per_learner", 1), "GPU": gpus})
        return bundles, cf.get("placement_strategy", "PACK")

    @classmethod
    def resource_help(cls, config: dict) -> str:
        return (
            "\n\nYou can adjust the resource requests of corral trainers by setting "
            "`num_workers`, `num_gpus`, and other configs. See the DEFAULT_CONFIG defined "
            f"by each algorithm for more info.\n\nThe config of this trainer is: {config}"
        )

    # -- lifecycle ----------------------------------------------------------

    def cleanup(self) -> None:
        """Stops every worker process (rollout and evaluation) and remote learner."""
        if getattr(self, "_learner_group", None) is not None:
            self._learner_group.stop()
        for name in ("workers", "evaluation_workers"):
            worker_set = getattr(self, name, None)
            if worker_set is not None:
                worker_set.stop()

    @staticmethod
    def with_updates(**overrides: Any) -> type[Trainer]:
        raise NotImplementedError(
            "`with_updates` may only be called on Trainer sub-classes that were generated "
            "via the `corral.agents.trainer_template.build_trainer()` function!"
        )

    def __repr__(self) -> str:
        return self._name


def _transform_checked(preprocessor: Any, obs: Any, policy_id: str) -> np.ndarray:
    """`preprocessor.transform(obs)`, with an error saying which observation shape the
    policy expects when `obs` does not fit (instead of a matrix-shape error from
    inside the model)."""
    space = getattr(preprocessor, "original_space", None)
    expected = tuple(getattr(preprocessor, "shape", ()) or ())
    try:
        out = preprocessor.transform(obs)
    except (ValueError, TypeError, IndexError) as err:
        raise ValueError(
            f"The observation {_short(obs)} does not fit policy {policy_id!r}'s observation "
            f"space {space} (preprocessed shape {expected}): {err}"
        ) from None
    if np.shape(out) != expected:
        raise ValueError(
            f"Policy {policy_id!r} expects observations of shape "
            f"{tuple(getattr(space, 'shape', None) or expected)} (observation space {space}), "
            f"got one of shape {np.shape(obs)}: {_short(obs)}."
        )
    return out


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _seed_driver(seed: int | None) -> None:
    if seed is None:
        return
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _set_torch_threads(num_cpus: float) -> None:
    """Gives torch in the driver `num_cpus_for_driver` threads (at least one).

    RL models are small: extra intra-op threads cost more in synchronisation
    than they gain, and on a loaded machine spinning threads slow every op
    down by an order of magnitude.
    """
    import torch

    torch.set_num_threads(max(1, int(num_cpus)))


def _sample_episodes_locally(
    worker: Any, episodes_left_fn: Callable[[int], int], reset: bool = True
) -> list[RolloutMetrics]:
    """Finished episodes of one in-process worker until `episodes_left_fn` says stop."""
    if reset:
        worker.reset_sampler()
    worker.get_metrics()  # drop episodes finished before this evaluation
    episodes: list[RolloutMetrics] = []
    while episodes_left_fn(len(episodes)) > 0:
        worker.sample()
        episodes.extend(worker.get_metrics())
    return episodes


def _sample_episodes_remotely(
    workers: list, episodes_left_fn: Callable[[int], int]
) -> list[RolloutMetrics]:
    """Rounds of one episode per remote worker until `episodes_left_fn` says stop.

    Only the episode metrics travel back, not the sampled batches.
    """
    wait_all([w.apply(_reset_for_evaluation) for w in workers])
    episodes: list[RolloutMetrics] = []
    while (left := episodes_left_fn(len(episodes))) > 0:
        for metrics in wait_all([w.apply(_sample_metrics) for w in workers[:left]]):
            episodes.extend(metrics)
    return episodes


def _reset_for_evaluation(worker: Any) -> None:
    worker.reset_sampler()
    worker.get_metrics()


def _sample_metrics(worker: Any) -> list[RolloutMetrics]:
    worker.sample()
    return worker.get_metrics()


def _set_env_task(env: Any, env_context: EnvContext, task_fn: Callable, results: dict) -> None:
    new_task = task_fn(results, env, env_context)
    if env.get_task() != new_task:
        env.set_task(new_task)


_NO_EVALUATION_ENV = (
    "Cannot evaluate w/o an evaluation worker set in the Trainer or w/o an env on the "
    "local worker!\nTry one of the following:\n1) Set `evaluation_interval` >= 0 to force "
    "creating a separate evaluation worker set.\n2) Set `create_env_on_driver=True` to "
    "force the local (non-eval) worker to have an environment to evaluate on."
)


_EITHER_OBS_OR_INPUT_DICT = (
    "Provide either `input_dict` OR [`observation`, ...] as args to Trainer.compute_single_action!"
)


def _added_policy_to_json(policy_id: str, spec: AddedPolicy) -> dict:
    """An added policy as JSON: its class as a dotted import path, its spaces via
    `space_to_json`, its config as is. What cannot be stored so is named under
    "unrestorable" (restore then needs the policy added by hand first)."""
    cls = spec.policy_cls
    entry: dict[str, Any] = {
        "policy_class": qualified_name(cls),
        "evaluation_workers": spec.evaluation_workers,
    }
    problems = []
    if "<locals>" in cls.__qualname__:
        problems.append(f"class {entry['policy_class']} is defined inside a function")
    try:
        entry["observation_space"] = space_to_json(spec.observation_space)
        entry["action_space"] = space_to_json(spec.action_space)
    except TypeError as e:
        problems.append(str(e))
    try:
        entry["config"] = json.loads(json.dumps(spec.config, allow_nan=False))
    except (TypeError, ValueError) as e:
        problems.append(f"its config is not JSON-serialisable ({e})")
    if problems:
        logger.warning(
            "Checkpoint cannot fully record added policy %r (%s); add it with "
            "`add_policy` before restoring.",
            policy_id,
            "; ".join(problems),
        )
        entry["unrestorable"] = "; ".join(problems)
    return entry


def _added_policy_from_json(policy_id: str, entry: dict, checkpoint_path: str) -> AddedPolicy:
    """Inverse of `_added_policy_to_json`. The policy class is looked up among the
    modules already imported (never imported on the checkpoint's word) and must be a
    `Policy` subclass."""
    hint = (
        f"add policy {policy_id!r} with `trainer.add_policy(...)` before `restore()` "
        "(policies the trainer already has are not re-added)"
    )
    if entry.get("unrestorable"):
        raise CheckpointError(
            f"Checkpoint {checkpoint_path} cannot rebuild added policy {policy_id!r}: "
            f"{entry['unrestorable']}; {hint}."
        )
    cls = resolve_class(
        entry.get("policy_class"),
        Policy,
        f"{checkpoint_path} (added policy {policy_id!r}; or {hint})",
    )
    try:
        obs_space = space_from_json(entry["observation_space"])
        act_space = space_from_json(entry["action_space"])
    except (KeyError, ValueError, TypeError) as e:
        raise CheckpointError(
            f"Checkpoint {checkpoint_path}: the spaces of added policy {policy_id!r} are "
            f"malformed ({e}); expected space descriptions of corral.utils.spaces_json."
        ) from e
    return AddedPolicy(
        cls,
        obs_space,
        act_space,
        dict(entry.get("config") or {}),
        bool(entry.get("evaluation_workers", True)),
    )


def _batch_of_one(value: Any) -> Any:
    """`value` as a batch of size one (infos stay a list)."""
    if isinstance(value, dict):
        return [value]
    return np.expand_dims(np.asarray(value), 0)


def _single_input_batch(
    state: list | None, prev_action: Any, prev_reward: Any, info: dict | None
) -> dict[str, Any]:
    """The non-observation columns of a one-row input dict."""
    batch: dict[str, Any] = {}
    for i, s in enumerate(state or []):
        batch[f"state_in_{i}"] = _batch_of_one(s)
    if prev_action is not None:
        batch[SampleBatch.PREV_ACTIONS] = _batch_of_one(prev_action)
    if prev_reward is not None:
        batch[SampleBatch.PREV_REWARDS] = _batch_of_one(prev_reward)
    if info is not None:
        batch[SampleBatch.INFOS] = [info]
    return batch


def _per_agent_column(value: Any, agents: list) -> Any:
    """A per-agent dict as a column in `agents` order; anything else as given."""
    if isinstance(value, dict) and set(agents) <= set(value):
        column = [value[a] for a in agents]
        return column if isinstance(column[0], dict) else np.stack(column)
    return value


def _first(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return type(value)(_first(v) for v in value)
    if isinstance(value, dict):
        return {k: _first(v) for k, v in value.items()}
    return value[0]


def _to_env_action(policy: Policy, action: Any, unsquash: bool | None, clip: bool | None) -> Any:
    """Maps a policy-space action into the env's action space.

    `None` means the policy's config decides (`normalize_actions`,
    `clip_actions`), as it does while sampling. Policies without
    `to_env_actions` act in the env's space already.
    """
    to_env = getattr(policy, "to_env_actions", None)
    if to_env is None:
        return action
    if unsquash is None:
        unsquash = policy.config.get("normalize_actions", False)
    if clip is None:
        clip = policy.config.get("clip_actions", False)
    return to_env(action, bool(unsquash), bool(clip))


def _agents_subset(value: Any, agents: list) -> Any:
    """The entries of a per-agent dict that belong to `agents` (None stays None)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(
            "With policy_id=None, prev_action/prev_reward/info must be dicts keyed by agent id."
        )
    return {a: value[a] for a in agents if a in value} or None
