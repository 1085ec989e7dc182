"""The trainer's configuration layer: defaults, merging, validation.

`COMMON_CONFIG` holds every key of RLlib 1.x's common trainer config (same names,
same meaning, same defaults, except that `framework` is "torch") plus the keys corral
adds. An algorithm's `DEFAULT_CONFIG` is `with_common_config({...its keys...})`, and a
trainer merges the user's dict over that with `merge_trainer_configs`, then calls
`validate_config` and `check_not_implemented`.

No torch import here: reading or validating a config must stay cheap.
"""

from __future__ import annotations

import copy
import difflib
import functools
import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from corral.agents.callbacks import DefaultCallbacks
from corral.models.model_defaults import MODEL_DEFAULTS, MODEL_SPECS
from corral.utils.config_spec import (
    AnyOf,
    AnyValue,
    Bool,
    CallableSpec,
    ClassOrFactory,
    Dict,
    Float,
    InstanceOf,
    Int,
    ListOf,
    OneOf,
    Optional,
    Satisfies,
    Spec,
    Str,
    SubConfig,
)
from corral.utils.config_spec import check_config_values as _check_values
from corral.utils.deprecation import DEPRECATED_VALUE, deprecation_warning

logger = logging.getLogger(__name__)

# A complete trainer config (every key present) and a user's partial one.
TrainerConfigDict = dict[str, Any]
PartialTrainerConfigDict = dict[str, Any]

# Spelled out rather than imported so that reading a config never pulls in numpy.
_DEFAULT_POLICY_ID = "default_policy"


def copy_config(value: Any) -> Any:
    """Copy the containers (dicts, lists, tuples, sets) of a config, not the leaves.

    `copy.deepcopy` would also clone classes' instances, functions' closures, torch
    modules or gym spaces the config refers to; those are kept by reference.
    """
    if isinstance(value, dict):
        if type(value) is dict:
            return {k: copy_config(v) for k, v in value.items()}
        # dict subclasses (OrderedDict, defaultdict, EnvContext ...) keep their type
        # and attributes.
        new = copy.copy(value)
        for k, v in value.items():
            new[k] = copy_config(v)
        return new
    if isinstance(value, list):
        return [copy_config(v) for v in value]
    if isinstance(value, tuple):
        items = [copy_config(v) for v in value]
        # NamedTuples (e.g. PolicySpec) are rebuilt positionally.
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, set | frozenset):
        return type(value)(value)
    return value


# The comments in this dict are the reference documentation of each key.
COMMON_CONFIG: TrainerConfigDict = {
    # === Rollout workers ===
    # How many remote rollout workers sample in parallel. 0 samples in the driver
    # (the local worker) itself.
    "num_workers": 2,
    # How many env copies each worker steps side by side. Actions for all copies
    # come from one batched forward pass, which pays off when inference dominates.
    "num_envs_per_worker": 1,
    # Whether the driver's local worker builds an env too when `num_workers` > 0.
    # It normally needs none, since remote workers sample and evaluation workers
    # evaluate; set True to e.g. call `compute_single_action` against its env.
    "create_env_on_driver": False,
    # Steps per fragment a worker returns from one `sample()` call (per env copy,
    # so a worker hands back `rollout_fragment_length * num_envs_per_worker`
    # steps). Fragments are concatenated until `train_batch_size` is reached.
    "rollout_fragment_length": 200,
    # How fragments are cut ("steps" are env or agent steps, see
    # `multiagent/count_steps_by`):
    # "truncate_episodes": exactly `rollout_fragment_length` steps per fragment,
    #   cutting episodes where needed (values bootstrap at the cut);
    # "complete_episodes": only whole episodes (up to a horizon), so fragments
    #   may be longer than `rollout_fragment_length`.
    "batch_mode": "truncate_episodes",
    # === Training ===
    # Discount factor of future rewards.
    "gamma": 0.99,
    # Learning rate of the policy's optimiser.
    "lr": 0.0001,
    # Steps per training batch (where the algorithm uses one); should be at
    # least `rollout_fragment_length`.
    "train_batch_size": 200,
    # Options of the policy's model (network sizes, activations, LSTM, custom
    # models ...); see `corral.models.model_defaults.MODEL_DEFAULTS`.
    "model": copy_config(MODEL_DEFAULTS),
    # Extra arguments for the policy's optimiser; their meaning is per algorithm.
    "optimizer": {},
    # (corral) What a minibatch whose loss or gradient is NaN or infinite does.
    # False: `train()` raises an error naming the policy and the loss term, before
    # the optimiser changes any weight. True: that minibatch's update is skipped
    # (the weights and the optimiser state stay as they were) and counted in the
    # learner results as `num_nonfinite_updates_skipped`. Either way the weights
    # are never left non-finite: if a step itself overflows them, they are put
    # back as they were before the update.
    "skip_nonfinite_updates": False,
    # === Environment ===
    # Cut episodes after this many steps (a truncation). None uses the env's
    # `spec.max_episode_steps` when it has one.
    "horizon": None,
    # At the horizon, end the logical episode (metrics, value bootstrapping) but
    # keep stepping the same env without a reset.
    "soft_horizon": False,
    # Do not mark the last step of an episode as done. Together with
    # `soft_horizon`:
    #   False/False: reset at the horizon and mark the step done;
    #   True/False: reset at the horizon, but leave the step not done;
    #   False/True: no reset, but mark the horizon step done;
    #   True/True: no reset and no done at the horizon.
    "no_done_at_end": False,
    # Which env to train on: a name registered with `register_env`, a Gymnasium
    # id, a dotted class path or an env class (called with an `EnvContext`).
    "env": None,
    # Observation space of the policies; None takes it from the env.
    "observation_space": None,
    # Action space of the policies; None takes it from the env.
    "action_space": None,
    # Passed to the env creator as an `EnvContext`: this dict plus `worker_index`,
    # `vector_index`, `num_workers` and `remote`.
    "env_config": {},
    # fn(last_train_result, base_env, env_context) -> new task, for curriculum
    # learning; the env must be a `TaskSettableEnv`.
    "env_task_fn": None,
    # Render the env on the local worker (or worker 1 when there are remote
    # workers); only the first copy of a vectorised env renders. The env's
    # `render()` either draws a window itself or returns an RGB uint8 image.
    # Gymnasium ids are created with render_mode="human" when they support it
    # (else "rgb_array"); custom envs must set their own `render_mode`. An env that
    # cannot render is skipped with a warning.
    "render_env": False,
    # Record videos of the env: True uses a folder in the trial's logdir, a
    # relative path a folder below it, an absolute path that very folder; False
    # records nothing. Supersedes the deprecated `monitor`. Records every episode
    # of the first sub-env of the local worker (worker 1 when there are remote
    # workers) with Gymnasium's RecordVideo: needs moviepy (the `video` extra) and
    # render_mode="rgb_array" (set for Gymnasium ids; custom envs must set it).
    "record_env": False,
    # Reward clipping in postprocessing: None clips Atari envs only (to the sign);
    # True clips to the sign (-1, 0, 1); False never clips; a float c clips to
    # [-c, c]; a pair (lo, hi) clips to [lo, hi].
    "clip_rewards": None,
    # Let the policy act in a normalised action space (Box parts centred on 0 with
    # a small spread) and map actions back to the env's bounds (then clip) just
    # before stepping the env.
    "normalize_actions": True,
    # Clip actions to the env's bounds before stepping the env.
    "clip_actions": False,
    # Default observation preprocessors: "deepmind" (Atari wrappers) or "rllib".
    "preprocessor_pref": "deepmind",
    # === Debugging ===
    # Log level of the `corral` loggers in the driver and its workers: DEBUG,
    # INFO, WARN or ERROR. DEBUG also logs periodic summaries of the data flow.
    "log_level": "WARN",
    # A `DefaultCallbacks` subclass (or any factory returning one, such as
    # `MultiCallbacks([...])`) whose hooks run during sampling and training.
    "callbacks": DefaultCallbacks,
    # Keep training when a remote worker dies, with the workers that are left;
    # the number still alive is reported as `num_healthy_workers`.
    "ignore_worker_failures": False,
    # Add system resource usage (CPU, RAM; needs psutil, and GPUtil for GPUs) to
    # the results.
    "log_sys_usage": True,
    # Replace real sampling by an infinitely fast fake sampler (testing only).
    "fake_sampler": False,
    # (RLlib 1.13) Skip the checks of what the env gives against its spaces: the
    # bounds of Box observations (out of bounds is an error otherwise) and the
    # config's `observation_space` / `action_space` against the env's. NaN and
    # infinite observations are an error whatever this says.
    "disable_env_checking": False,
    # === Deep learning framework ===
    # Only "torch" is built into corral. The TensorFlow values RLlib knows
    # ("tf", "tf2", "tfe") raise an error saying so.
    "framework": "torch",
    # TensorFlow eager only: trace eager functions into graphs.
    "eager_tracing": False,
    # === Exploration ===
    # Whether `compute_action(s)` explores when its `explore` argument is None.
    # False gives the deterministic (greedy) action.
    "explore": True,
    # Configures the Exploration object: "type" names the class (a class in
    # `corral.utils.exploration`, a dotted path or the class itself); the other
    # entries are its constructor's keyword arguments.
    "exploration_config": {
        "type": "StochasticSampling",
    },
    # === Evaluation ===
    # Evaluate every this many `train()` calls (None: never). Results appear under
    # the "evaluation" key of the train result.
    "evaluation_interval": None,
    # Episodes per evaluation. With evaluation workers, at least this many run in
    # total. "auto" (with `evaluation_parallel_to_training`) evaluates for as long
    # as the training step takes.
    "evaluation_num_episodes": 10,
    # Run evaluation in a thread, while the same `train()` call trains. Weights
    # synced at the start of evaluation may then be mid-update.
    "evaluation_parallel_to_training": False,
    # Set to True in the config of evaluation workers; not meant for users.
    "in_evaluation": False,
    # Overrides applied on top of this config for evaluation workers, e.g.
    # another `env_config` or `"explore": False`. Policy-gradient methods learn a
    # stochastic optimum, so turning exploration off may evaluate a worse policy.
    "evaluation_config": {},
    # Number of dedicated evaluation workers. 0 evaluates in the driver (when
    # `evaluation_interval` is set); more workers evaluate in parallel, in
    # addition to the rollout workers.
    "evaluation_num_workers": 0,
    # fn(trainer, eval_workers) -> metrics dict replacing the default evaluation;
    # the eval workers already hold the current weights when it is called.
    "custom_eval_function": None,
    # === Advanced rollout settings ===
    # Sample in a background thread (the data becomes slightly off-policy).
    "sample_async": False,
    # Name of the class collecting env, model and sampler data into batches.
    "sample_collector": "SimpleListCollector",
    # Per-element observation filter: "NoFilter" or "MeanStdFilter".
    "observation_filter": "NoFilter",
    # Merge the filter statistics of all workers and send them back out after
    # each iteration.
    "synchronize_filters": True,
    # TensorFlow session options; kept for config compatibility, unused by torch.
    "tf_session_args": {
        "intra_op_parallelism_threads": 2,
        "inter_op_parallelism_threads": 2,
        "gpu_options": {
            "allow_growth": True,
        },
        "log_device_placement": False,
        "device_count": {"CPU": 1},
        "allow_soft_placement": True,
    },
    # TensorFlow session overrides for the local worker; unused by torch.
    "local_tf_session_args": {
        "intra_op_parallelism_threads": 8,
        "inter_op_parallelism_threads": 8,
    },
    # LZ4-compress each observation in sample batches (the `obs`/`new_obs` columns,
    # row by row): replay buffers keep them compressed and unpack sampled rows;
    # learners unpack before training. Saves memory for image observations.
    "compress_observations": False,
    # Seconds to wait for the workers' episode metrics; later ones count in the
    # next iteration.
    "collect_metrics_timeout": 180,
    # Window (in episodes) over which episode metrics are averaged.
    "metrics_smoothing_episodes": 100,
    # Run each of a worker's `num_envs_per_worker` envs (must be > 1) in its own
    # process (forked, created by the env creator with `EnvContext.remote=True`),
    # stepped in parallel; for envs whose steps are slow, costs noticeable
    # overhead otherwise. Single-agent envs only.
    "remote_worker_envs": False,
    # With `remote_worker_envs`: milliseconds to wait for env results when
    # polling (0: go on as soon as one env is ready). corral's sampler steps all
    # sub-envs in lockstep and always waits for every one of them, so any value is
    # accepted and has no effect.
    "remote_env_batch_wait_ms": 0,
    # Each `train()` call lasts at least this many seconds.
    "min_iter_time_s": 0,
    # Each `train()` call samples at least this many env steps; changes only how
    # often results are reported, not what is learnt.
    "timesteps_per_iteration": 0,
    # Random seed; each worker adds its worker index, so identical configs give
    # identical runs.
    "seed": None,
    # Environment variables to set in the driver, e.g. {"OMP_NUM_THREADS": "16"}.
    "extra_python_environs_for_driver": {},
    # Environment variables to set in each worker process.
    "extra_python_environs_for_worker": {},
    # === Resources ===
    # GPUs for the driver (where learning happens); may be fractional. > 0 trains
    # the driver's learner on cuda: on copies of the policies, each update's batch
    # copied to the GPU once, the new weights back to the CPU policies after it.
    # One GPU is used; several GPUs are `num_learners` learners with
    # `num_gpus_per_learner: 1` each (RLlib 1.x's multi-GPU towers).
    "num_gpus": 0,
    # Run the GPU code paths (`num_gpus`, `num_gpus_per_learner`) on the CPU, to test
    # them on machines without a GPU; reserves no GPUs.
    "_fake_gpus": False,
    # CPUs reserved per rollout worker.
    "num_cpus_per_worker": 1,
    # GPUs per rollout worker (fractional allowed); only for GPU-heavy envs or
    # unusually expensive inference.
    "num_gpus_per_worker": 0,
    # Extra custom Ray resources to request per worker, e.g. {"my_env_slot": 1}
    # (backend="ray" only).
    "custom_resources_per_worker": {},
    # CPUs reserved for the driver (only matters under Tune).
    "num_cpus_for_driver": 1,
    # Placement strategy of the resource request (`default_resource_request`):
    # one bundle for the driver plus one per worker, placed "PACK" (as few nodes
    # as possible), "SPREAD" (as many as possible), "STRICT_PACK" (one node) or
    # "STRICT_SPREAD" (a distinct node each). With backend="ray" the rollout
    # workers' actors are placed in a placement group with this strategy.
    "placement_strategy": "PACK",
    # === Offline data ===
    # Where experiences come from: "sampler" (the env, online), a directory or
    # glob of JSON files, a list of files, a dict {source: probability} mixing
    # sources, a callable returning an InputReader, or a name registered as
    # an input.
    "input": "sampler",
    # Arguments available to custom inputs through the IOContext.
    "input_config": {},
    # Whether offline actions are already normalised to [-1, 1] (true for data
    # written by a run with `normalize_actions=True`).
    "actions_in_input_normalized": False,
    # Off-policy estimators run on offline input ("input" != "sampler"): "is"
    # (importance sampling), "wis" (weighted importance sampling), "simulation"
    # (evaluate by running the env in the background).
    "input_evaluation": ["is", "wis"],
    # Run the current policy's postprocessing on offline fragments (usually wrong
    # for on-policy algorithms, since the data came from another policy).
    "postprocess_inputs": False,
    # Shuffle offline batches through a sliding buffer of this many batches
    # (0: no shuffling); input waits until the buffer is full.
    "shuffle_buffer_size": 0,
    # Where to write experiences: None (nowhere), "logdir", a directory/URI, or a
    # function returning an OutputWriter.
    "output": None,
    # Sample batch columns to LZ4-compress in the output.
    "output_compress_columns": ["obs", "new_obs"],
    # Bytes per output file before starting a new one.
    "output_max_file_size": 64 * 1024 * 1024,
    # === Multi-agent ===
    "multiagent": {
        # Policy id -> PolicySpec(policy_class, observation_space, action_space,
        # config) (a 4-tuple also works); a set of ids gets default specs. Empty
        # means the single "default_policy".
        "policies": {},
        # How many policies stay in memory; the least recently used ones beyond
        # that are written to disk.
        "policy_map_capacity": 100,
        # Folder for policies swapped out of memory (None: the default output dir).
        "policy_map_cache": None,
        # fn(agent_id, episode, worker, **kwargs) -> policy id.
        "policy_mapping_fn": None,
        # Ids of the policies to train (None: all).
        "policies_to_train": None,
        # Optional function rewriting each agent's observation, e.g. to add other
        # agents' state.
        "observation_fn": None,
        # "independent": replay each policy's transitions on their own;
        # "lockstep": replay all agents' transitions of one env step together.
        "replay_mode": "independent",
        # What one step of a batch counts: "env_steps" (one per env step, however
        # many agents acted) or "agent_steps" (one per agent action).
        "count_steps_by": "env_steps",
    },
    # === Logging ===
    # The result logger (RLlib 1.13): None writes result.json, progress.csv and
    # TensorBoard events into the trial's folder; {"type": LoggerClass or its dotted
    # path, "logdir": folder (default: the trial's), **options} builds that logger
    # with the options as its config (see `corral.tune.logger.logger_from_config`;
    # e.g. `corral.tune.integration.wandb.WandbLogger` for Weights & Biases).
    "logger_config": None,
    # === Deprecated ===
    # Formerly chose the simple (single-device) optimiser; now derived
    # automatically, setting it only logs a warning.
    "simple_optimizer": DEPRECATED_VALUE,
    # Replaced by `record_env`, to which a value set here is copied.
    "monitor": DEPRECATED_VALUE,
    # === RLlib 1.13 additions ===
    # (RLlib 1.13) How long each evaluation runs, in `evaluation_duration_unit`s:
    # an int > 0, or "auto" (with `evaluation_parallel_to_training`: as long as the
    # training step takes). Replaces `evaluation_num_episodes`.
    "evaluation_duration": 10,
    # (RLlib 1.13) The unit of `evaluation_duration`: "episodes" (whole episodes;
    # "timesteps" is not built yet).
    "evaluation_duration_unit": "episodes",
    # (RLlib 1.13) Whether every result carries the last evaluation results, also
    # in iterations that did not evaluate (not built yet: only False).
    "always_attach_evaluation_results": False,
    # (RLlib 1.13) Keep each episode's custom metric values as lists instead of
    # their mean/min/max (not built yet: only False).
    "keep_per_episode_custom_metrics": False,
    # (RLlib 1.13) Seconds to wait for the workers' episode metrics (replaces
    # `collect_metrics_timeout`).
    "metrics_episode_collection_timeout_s": 180,
    # (RLlib 1.13) Window (in episodes) over which episode metrics are averaged
    # (replaces `metrics_smoothing_episodes`).
    "metrics_num_episodes_for_smoothing": 100,
    # (RLlib 1.13) Each `train()` call lasts at least this many seconds; None: no
    # minimum (replaces `min_iter_time_s`).
    "min_time_s_per_reporting": None,
    # (RLlib 1.13) Each `train()` call trains on at least this many steps; None:
    # no minimum (not built yet: only None).
    "min_train_timesteps_per_reporting": None,
    # (RLlib 1.13) Each `train()` call samples at least this many steps; None: no
    # minimum (replaces `timesteps_per_iteration`).
    "min_sample_timesteps_per_reporting": None,
    # (RLlib 1.13) Extra arguments for custom outputs (with `output`).
    "output_config": {},
    # (RLlib 1.13) TensorFlow eager only: retraces allowed per function; unused by
    # torch.
    "eager_max_retraces": 20,
    # (RLlib 1.13) TensorFlow policies only; unused by torch.
    "_tf_policy_handles_more_than_one_loss": False,
    # (RLlib 1.13) Feed raw (not preprocessed) observations to models (not built
    # yet: only False).
    "_disable_preprocessor_api": False,
    # (RLlib 1.13) Give models nested (not flattened) actions (not built yet:
    # only False).
    "_disable_action_flattening": False,
    # (RLlib 1.13) True: the trainer runs `training_iteration()` (1.13's new API)
    # instead of an `execution_plan`. corral trainers always run
    # `training_iteration()` / `training_step()`, so both values behave the same.
    "_disable_execution_plan_api": False,
    # === corral additions ===
    # Where remote workers run: "local" (worker processes on this machine, via
    # multiprocessing) or "ray" (Ray actors, on a cluster when one is connected;
    # needs the `ray` extra; corral calls `ray.init()` if Ray is not initialised).
    "backend": "local",
    # Learners: 0 trains in the driver; n > 0 runs n data-parallel learners whose
    # gradients are averaged (processes on this machine with backend="local", Ray
    # actors with backend="ray"). Each splits off 1/n of every train batch and runs
    # minibatches of `sgd_minibatch_size / n` rows, so n learners compute what one
    # learner would (RLlib 1.x's multi-GPU towers are n learners with one GPU each).
    "num_learners": 0,
    # CPUs reserved per learner (num_learners > 0); also its torch thread count.
    "num_cpus_per_learner": 1,
    # GPUs per learner (num_learners > 0; fractional allowed): > 0 trains that
    # learner on cuda (on the CPU with `_fake_gpus`).
    "num_gpus_per_learner": 0,
    # Replace a remote worker that died by a fresh one holding the current weights
    # (instead of failing, or carrying on without it as `ignore_worker_failures`
    # does).
    "recreate_failed_workers": False,
    # (RLlib 2.0's name) A sub-env that raises in reset() or step() is closed and
    # built anew; its unfinished episode is dropped from the batch and from the
    # metrics (counted as `num_faulty_episodes` and `num_env_restarts` in the
    # result) instead of failing its worker. False: the exception fails the
    # worker, and `ignore_worker_failures` / `recreate_failed_workers` decide.
    "restart_failed_sub_environments": False,
    # Seconds the driver waits for one call on a remote worker (a `sample()`,
    # a weight sync, ...) before it treats the worker as failed (hung or
    # stopped): then recovery drops or recreates it (and SIGKILLs it), or the
    # error names the worker, its pid and how long it was waited for.
    "sample_timeout_s": 600.0,
    # Seconds a health probe (a ping of every remote worker, after a failure)
    # may take; a worker that does not answer in time counts as failed.
    "worker_health_probe_timeout_s": 30.0,
}


def _common_specs() -> dict[str, Spec]:
    # The env variables a worker or the driver sets must be strings (os.environ's rule).
    environ = Dict(values=Str(), what="a dict of environment variables {name: str value}")
    fn = CallableSpec("a callable")
    ids = ListOf(Str(), sets_ok=True)
    deprecated = OneOf(DEPRECATED_VALUE)
    space = Optional(
        AnyOf(
            InstanceOf("gymnasium.spaces:Space", "a gymnasium Space"),
            Satisfies("corral.env.gym_compat:is_old_gym_space", "an old gym Space"),
        )
    )
    return {
        # Rollout workers
        "num_workers": Int(0),
        "num_envs_per_worker": Int(1),
        "create_env_on_driver": Bool(),
        "rollout_fragment_length": Int(1),
        "batch_mode": OneOf("truncate_episodes", "complete_episodes"),
        # Training
        "gamma": Float(0, 1),
        "lr": Float(0),
        "train_batch_size": Int(1),
        "model": Optional(Dict(MODEL_SPECS, what="a dict of model options")),
        "optimizer": Dict(what="a dict of keyword arguments for the optimiser"),
        "skip_nonfinite_updates": Bool(),
        # Environment
        "horizon": Optional(Int(1)),
        "soft_horizon": Bool(),
        "no_done_at_end": Bool(),
        "env": Optional(AnyOf(Str(), CallableSpec("an env class or creator"))),
        "observation_space": space,
        "action_space": space,
        "env_config": Dict(),
        "env_task_fn": Optional(fn),
        "render_env": Bool(),
        "record_env": AnyOf(Bool(), Str()),
        "clip_rewards": Optional(AnyOf(Bool(), Float(0), ListOf(Float(), length=2))),
        "normalize_actions": Bool(),
        "clip_actions": Bool(),
        "preprocessor_pref": OneOf("deepmind", "rllib", None),
        # Debugging
        "log_level": OneOf("DEBUG", "INFO", "WARN", "WARNING", "ERROR", "CRITICAL"),
        "callbacks": Optional(
            ClassOrFactory(DefaultCallbacks, "a DefaultCallbacks subclass (or a factory of one)")
        ),
        "ignore_worker_failures": Bool(),
        "log_sys_usage": Bool(),
        "fake_sampler": Bool(),
        "disable_env_checking": Bool(),
        # Framework: validate_config says which frameworks exist and which corral has.
        "framework": Str(),
        "eager_tracing": Bool(),
        # Exploration
        "explore": Bool(),
        "exploration_config": Dict(
            {"type": AnyOf(Str(), CallableSpec("an Exploration class"))},
            what='a dict {"type": ..., **constructor arguments}',
        ),
        # Evaluation (an interval of 0 is RLlib's old spelling of None)
        "evaluation_interval": Optional(Int(0)),
        "evaluation_num_episodes": AnyOf(Int(1), OneOf("auto")),
        "evaluation_parallel_to_training": Bool(),
        "in_evaluation": Bool(),
        "evaluation_config": SubConfig(),
        "evaluation_num_workers": Int(0),
        "custom_eval_function": Optional(fn),
        # Advanced rollout settings
        "sample_async": Bool(),
        "sample_collector": AnyOf(Str(), CallableSpec("a collector class")),
        "observation_filter": AnyOf(
            OneOf("NoFilter", "MeanStdFilter", "ConcurrentMeanStdFilter"),
            CallableSpec("a function shape -> Filter"),
        ),
        "synchronize_filters": Bool(),
        "tf_session_args": Dict(),
        "local_tf_session_args": Dict(),
        "compress_observations": Bool(),
        "collect_metrics_timeout": Float(0),
        "metrics_smoothing_episodes": Int(1),
        "remote_worker_envs": Bool(),
        "remote_env_batch_wait_ms": Float(0),
        "min_iter_time_s": Optional(Float(0)),
        "timesteps_per_iteration": Int(0),
        # Workers add their index (and sub-envs theirs) to the seed; Gymnasium wants
        # seeds >= 0.
        "seed": Optional(Int(0, 2**62)),
        "extra_python_environs_for_driver": environ,
        "extra_python_environs_for_worker": environ,
        # Resources
        "num_gpus": Float(0),
        "_fake_gpus": Bool(),
        "num_cpus_per_worker": Float(0),
        "num_gpus_per_worker": Float(0),
        "custom_resources_per_worker": Dict(values=Float(0)),
        "num_cpus_for_driver": Float(0),
        "placement_strategy": OneOf("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"),
        # Offline data
        "input": AnyValue("a str, list, dict or callable naming the input"),
        "input_config": Dict(),
        "actions_in_input_normalized": Bool(),
        "input_evaluation": ListOf(Str()),
        "postprocess_inputs": Bool(),
        "shuffle_buffer_size": Int(0),
        "output": Optional(AnyOf(Str(), CallableSpec("a function returning an OutputWriter"))),
        "output_compress_columns": ListOf(Str()),
        "output_max_file_size": Int(1, integral_float_ok=True),
        # Multi-agent ("policies" is normalised and checked by validate_config)
        "multiagent": Optional(
            Dict(
                {
                    "policies": AnyValue(),
                    "policy_map_capacity": Int(1),
                    "policy_map_cache": Optional(Str()),
                    "policy_mapping_fn": Optional(fn),
                    "policies_to_train": Optional(AnyOf(ids, fn)),
                    "observation_fn": Optional(fn),
                    "replay_mode": OneOf("independent", "lockstep"),
                    "count_steps_by": OneOf("env_steps", "agent_steps"),
                },
                what="a dict of multi-agent settings",
            )
        ),
        # Logging
        "logger_config": Optional(Dict()),
        # Deprecated
        "simple_optimizer": AnyOf(deprecated, Bool()),
        "monitor": AnyOf(deprecated, Bool(), Str()),
        # RLlib 1.13 additions
        "evaluation_duration": AnyOf(Int(1), OneOf("auto")),
        "evaluation_duration_unit": OneOf("episodes", "timesteps"),
        "always_attach_evaluation_results": Bool(),
        "keep_per_episode_custom_metrics": Bool(),
        "metrics_episode_collection_timeout_s": Float(0),
        "metrics_num_episodes_for_smoothing": Int(1),
        "min_time_s_per_reporting": Optional(Float(0)),
        "min_train_timesteps_per_reporting": Optional(Int(0)),
        "min_sample_timesteps_per_reporting": Optional(Int(0)),
        "output_config": Dict(),
        "eager_max_retraces": Optional(Int(0)),
        "_tf_policy_handles_more_than_one_loss": Bool(),
        "_disable_preprocessor_api": Bool(),
        "_disable_action_flattening": Bool(),
        "_disable_execution_plan_api": Bool(),
        # corral additions
        "backend": OneOf("local", "ray"),
        "num_learners": Int(0),
        "num_cpus_per_learner": Float(0),
        "num_gpus_per_learner": Float(0),
        "recreate_failed_workers": Bool(),
        "restart_failed_sub_environments": Bool(),
        "sample_timeout_s": Float(0, lo_open=True),
        "worker_health_probe_timeout_s": Float(0, lo_open=True),
    }


# Type and range of every key of COMMON_CONFIG (see `corral.utils.config_spec`),
# checked when a trainer is built, before anything uses the values. A key added to
# COMMON_CONFIG needs an entry here (tests/agents/test_config_values.py checks it);
# an algorithm's own keys are in its `CONFIG_SPECS`, next to its `DEFAULT_CONFIG`.
COMMON_CONFIG_SPECS: dict[str, Spec] = _common_specs()


# Dict-valued top-level keys whose dicts may receive sub-keys that the defaults lack
# (env options, model extras, per-class exploration arguments, ...).
ALLOW_UNKNOWN_SUBKEYS: list[str] = [
    "tf_session_args",
    "local_tf_session_args",
    "env_config",
    "model",
    "optimizer",
    "multiagent",
    "custom_resources_per_worker",
    "evaluation_config",
    "exploration_config",
    "extra_python_environs_for_driver",
    "extra_python_environs_for_worker",
    "input_config",
    "logger_config",
]

# Dict-valued top-level keys replaced as a whole (not merged) when the new dict names a
# different "type": the old class's arguments would not fit the new class.
OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES: list[str] = ["exploration_config"]


def _close_matches(key: Any, valid: Iterable[Any]) -> list[str]:
    """Valid keys resembling `key`, best first, ignoring case."""
    by_lower: dict[str, str] = {}
    for k in valid:
        by_lower.setdefault(str(k).lower(), str(k))
    hits = difflib.get_close_matches(str(key).lower(), list(by_lower), n=3, cutoff=0.6)
    return [by_lower[h] for h in hits]


def unknown_key_error(
    key: Any, valid: Iterable[Any], prefix: str = "", hint: str = ""
) -> ValueError:
    """Build the error for a config key that does not exist, with suggestions.

    :param key: the unknown key.
    :param valid: the keys that would have been accepted at that place.
    :param prefix: path of the enclosing dict, e.g. "model/".
    :param hint: extra advice appended to the message.
    """
    valid = list(valid)
    msg = f"Unknown config key '{prefix}{key}'."
    matches = _close_matches(key, valid)
    if matches:
        msg += " Did you mean: " + ", ".join(f"'{prefix}{m}'" for m in matches) + "?"
    elif prefix:
        msg += " Valid keys there: " + ", ".join(sorted(f"'{k}'" for k in map(str, valid))) + "."
    else:
        msg += " See COMMON_CONFIG and the algorithm's DEFAULT_CONFIG for the valid keys."
    if hint:
        msg += " " + hint
    return ValueError(msg)


def _update(
    original: dict,
    new: Mapping,
    new_keys_allowed: bool,
    allow_new_subkey_list: Collection[str],
    override_all_if_type_changes: Collection[str],
    prefix: str,
) -> dict:
    for key, value in new.items():
        if key not in original and not new_keys_allowed:
            raise unknown_key_error(key, original.keys(), prefix)
        old = original.get(key)
        if isinstance(old, dict) and isinstance(value, Mapping):
            if (
                key in override_all_if_type_changes
                and "type" in value
                and "type" in old
                and value["type"] != old["type"]
            ):
                original[key] = copy_config(dict(value))
            else:
                # Below the top level, sub-keys are either all allowed (keys in the
                # allow list) or inherit the caller's rule; the lists apply only at
                # the top.
                sub_allowed = key in allow_new_subkey_list or new_keys_allowed
                _update(old, value, sub_allowed, (), (), f"{prefix}{key}/")
        else:
            original[key] = copy_config(value)
    return original


def deep_update(
    original: dict,
    new_dict: Mapping,
    new_keys_allowed: bool = False,
    allow_new_subkey_list: Collection[str] | None = None,
    override_all_if_type_changes: Collection[str] | None = None,
) -> dict:
    """Merge `new_dict` into `original` recursively, in place, and return `original`.

    Dicts present on both sides merge key by key; anything else in `new_dict` replaces
    the old value (containers copied, other objects by reference).

    :param original: the dict to update (changed in place).
    :param new_dict: the updates.
    :param new_keys_allowed: whether top-level keys missing from `original` may be
        added; otherwise they raise `ValueError` naming the key and close matches.
    :param allow_new_subkey_list: top-level keys whose dict values may gain new
        sub-keys at any depth. Other dict values may not (unless `new_keys_allowed`):
        a new sub-key raises `ValueError` naming its path ("key/subkey").
    :param override_all_if_type_changes: top-level keys whose dict value is replaced
        as a whole when the new dict's "type" entry differs from the old one.
    """
    return _update(
        original,
        new_dict,
        new_keys_allowed,
        allow_new_subkey_list or (),
        override_all_if_type_changes or (),
        "",
    )


def merge_trainer_configs(
    config1: Mapping[str, Any],
    config2: Mapping[str, Any] | None,
    allow_unknown_configs: bool = False,
    allow_unknown_subkeys: Collection[str] = ALLOW_UNKNOWN_SUBKEYS,
    override_all_subkeys_if_type_changes: Collection[str] = OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES,
) -> TrainerConfigDict:
    """Return a new config: `config2` merged over a copy of `config1`.

    Neither input is modified. A legacy dict given as `callbacks` becomes a factory of
    `DefaultCallbacks(legacy_callbacks_dict=...)`.

    :param config1: the base, usually the algorithm's `DEFAULT_CONFIG`.
    :param config2: the (partial) user config; None means no changes.
    :param allow_unknown_configs: accept top-level keys `config1` lacks.
    :param allow_unknown_subkeys: see `deep_update`'s `allow_new_subkey_list`.
    :param override_all_subkeys_if_type_changes: see `deep_update`.
    """
    if config2 is None:
        config2 = {}
    if not isinstance(config2, Mapping):
        raise ValueError(
            f"A trainer config must be a dict, got {type(config2).__name__}: {config2!r}"
        )
    merged = copy_config(dict(config1))
    updates = dict(config2)
    if type(updates.get("callbacks")) is dict:
        # A partial (not a closure) so the factory pickles into worker processes.
        updates["callbacks"] = functools.partial(
            DefaultCallbacks, legacy_callbacks_dict=updates["callbacks"]
        )
    return deep_update(
        merged,
        updates,
        allow_unknown_configs,
        allow_unknown_subkeys,
        override_all_subkeys_if_type_changes,
    )


def with_common_config(extra_config: PartialTrainerConfigDict) -> TrainerConfigDict:
    """`COMMON_CONFIG` with an algorithm's own keys merged in (new keys allowed).

    This is how an algorithm builds its `DEFAULT_CONFIG`.
    """
    return merge_trainer_configs(COMMON_CONFIG, extra_config, allow_unknown_configs=True)


# --------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------

_TF_FRAMEWORKS = ("tf", "tf2", "tfe", "jax")
_BACKENDS = ("local", "ray")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_int(config: Mapping[str, Any], key: str, minimum: int) -> None:
    value = config.get(key, COMMON_CONFIG.get(key))
    if not _is_int(value) or value < minimum:
        raise ValueError(f"`{key}` must be an int >= {minimum}, got {value!r}.")


def _validate_framework_and_backend(config: TrainerConfigDict) -> None:
    framework = config.get("framework", "torch")
    if framework in _TF_FRAMEWORKS:
        raise ValueError(
            f"framework={framework!r} is not available: corral is built on PyTorch only. "
            "Set framework='torch' (the default)."
        )
    if framework != "torch":
        raise ValueError(f"Unknown framework {framework!r}; corral supports only 'torch'.")

    backend = config.get("backend", "local")
    if backend not in _BACKENDS:
        raise ValueError(f"`backend` must be one of {list(_BACKENDS)}, got {backend!r}.")
    if backend == "ray":
        from corral.evaluation.ray_backend import RAY_MISSING, ray_available

        if not ray_available():
            raise ImportError(RAY_MISSING)
    elif config.get("custom_resources_per_worker"):
        raise ValueError(
            f"custom_resources_per_worker={config['custom_resources_per_worker']!r} are Ray "
            "resources; they need backend='ray' (the local backend has no resource scheduler)."
        )

    _check_int(config, "num_learners", 0)
    _check_int(config, "num_workers", 0)
    _check_int(config, "num_envs_per_worker", 1)
    _check_int(config, "evaluation_num_workers", 0)

    if config.get("recreate_failed_workers") and config.get("ignore_worker_failures"):
        raise ValueError(
            "Only one of `ignore_worker_failures` (carry on without a dead worker) and "
            "`recreate_failed_workers` (replace it) may be True."
        )


def _policy_specs(multiagent: dict) -> dict[str, Any]:
    """Normalise `multiagent["policies"]` into {policy id: PolicySpec}."""
    from corral.policy.policy import PolicySpec

    policies = multiagent.get("policies")
    if not policies:
        policies = {_DEFAULT_POLICY_ID}
    if isinstance(policies, set | frozenset | list | tuple):
        # A collection of ids: each gets a default spec (class and spaces inferred).
        for pid in policies:
            if not isinstance(pid, str):
                raise ValueError(f"Policy keys must be strs, got {type(pid)}")
        policies = {pid: PolicySpec() for pid in policies}
    elif not isinstance(policies, Mapping):
        raise ValueError(
            "`multiagent/policies` must be a dict {policy id: PolicySpec} or a set of "
            f"policy ids, got {type(policies).__name__}."
        )

    specs: dict[str, Any] = {}
    for pid, spec in policies.items():
        if not isinstance(pid, str):
            raise ValueError(f"Policy keys must be strs, got {type(pid)}")
        if not isinstance(spec, PolicySpec):
            if not isinstance(spec, list | tuple) or len(spec) != 4:
                raise ValueError(
                    "Policy specs must be tuples/lists of "
                    f"(cls or None, obs_space, action_space, config), got {spec}"
                )
            spec = PolicySpec(*spec)
        if spec.config is None:
            spec = spec._replace(config={})
        elif not isinstance(spec.config, dict):
            raise ValueError(
                f"Multiagent policy config for {pid} must be a dict, but got {type(spec.config)}!"
            )
        specs[pid] = spec
    return specs


def _all_torch_policies(specs: Mapping[str, Any], trainer: Any, config: TrainerConfigDict) -> bool:
    default_cls = getattr(trainer, "_policy_class", None)
    if default_cls is None and hasattr(trainer, "get_default_policy_class"):
        default_cls = trainer.get_default_policy_class(config)
    classes = [spec.policy_class or default_cls for spec in specs.values()]
    if any(not isinstance(c, type) for c in classes):
        return False
    try:
        from corral.policy.torch_policy import TorchPolicy
    except ImportError:
        return False
    return all(issubclass(c, TorchPolicy) for c in classes)


def _validate_model(model_config: dict) -> None:
    prev_a_r = model_config.get("lstm_use_prev_action_reward", DEPRECATED_VALUE)
    if prev_a_r != DEPRECATED_VALUE:
        deprecation_warning(
            "model.lstm_use_prev_action_reward",
            "model.lstm_use_prev_action and model.lstm_use_prev_reward",
            error=False,
        )
        model_config["lstm_use_prev_action"] = prev_a_r
        model_config["lstm_use_prev_reward"] = prev_a_r
    # "model" accepts new sub-keys (like RLlib) because a custom model may read them.
    # Without a custom model nothing would, so an unknown key there is a typo.
    if not model_config.get("custom_model"):
        for key in model_config:
            if key not in MODEL_DEFAULTS:
                raise unknown_key_error(
                    key,
                    MODEL_DEFAULTS,
                    prefix="model/",
                    hint="Extra model keys are only read by a `custom_model`; put a custom "
                    "model's own options into `model/custom_model_config`.",
                )


def _validate_evaluation(config: TrainerConfigDict) -> None:
    interval = config.get("evaluation_interval")
    if interval == 0 and _is_int(interval):
        # RLlib treated 0 like None (no evaluation); normalise so later code sees None.
        config["evaluation_interval"] = interval = None
    if interval is not None and (not _is_int(interval) or interval < 1):
        raise ValueError(f"`evaluation_interval` must be None or an int >= 1, got {interval!r}.")

    num_eval_workers = config.get("evaluation_num_workers", 0)
    if num_eval_workers > 0 and not interval:
        logger.warning(
            "You have specified %d evaluation workers, but no evaluation interval! Setting "
            "`evaluation_interval` to 1 (evaluate on every `train()` call); set it to a "
            "larger value if that is too often.",
            num_eval_workers,
        )
        config["evaluation_interval"] = 1
    elif num_eval_workers == 0 and config.get("evaluation_parallel_to_training"):
        logger.warning(
            "`evaluation_parallel_to_training` needs `evaluation_num_workers` > 0! Setting "
            "`evaluation_parallel_to_training` to False."
        )
        config["evaluation_parallel_to_training"] = False

    episodes = config.get("evaluation_num_episodes", COMMON_CONFIG["evaluation_num_episodes"])
    if episodes == "auto":
        if not config.get("evaluation_parallel_to_training"):
            raise ValueError(
                "`evaluation_num_episodes='auto'` is only supported with "
                "`evaluation_parallel_to_training=True` (and `evaluation_num_workers` > 0)!"
            )
    elif not _is_int(episodes) or episodes <= 0:
        raise ValueError(f"`evaluation_num_episodes` ({episodes!r}) must be an int > 0 or 'auto'!")

    eval_config = config.get("evaluation_config")
    if eval_config is None:
        config["evaluation_config"] = eval_config = {}
    if not isinstance(eval_config, dict):
        raise ValueError(
            f"`evaluation_config` must be a dict of config overrides, got {eval_config!r}."
        )
    for key in eval_config:
        if key not in config:
            raise unknown_key_error(key, config.keys(), prefix="evaluation_config/")


def check_config_values(config: Mapping[str, Any], specs: Mapping[str, Spec] | None = None) -> None:
    """Check the type and range of every key of `config` that has a spec.

    The overrides in `evaluation_config` and in each policy's config
    (`multiagent.policies`) are checked against the same table.

    Args:
        config: a merged trainer config (numpy scalars in it become Python numbers).
        specs: key -> spec; default `COMMON_CONFIG_SPECS` (a trainer passes its
            `get_config_specs()`, which adds the algorithm's keys).

    Raises:
        ValueError: a value out of range; TypeError: a value of the wrong type. The
            message names the key's full path, the value and what is expected.
    """
    specs = COMMON_CONFIG_SPECS if specs is None else specs
    _check_values(config, specs)
    policies = (config.get("multiagent") or {}).get("policies")
    if isinstance(policies, Mapping):
        for pid, spec in policies.items():
            if isinstance(spec, tuple) and hasattr(spec, "_fields"):  # a PolicySpec
                overrides = getattr(spec, "config", None)
            elif isinstance(spec, list | tuple) and len(spec) == 4:
                overrides = spec[3]
            else:
                continue  # validate_config names a malformed spec
            if isinstance(overrides, Mapping):
                _check_values(overrides, specs, prefix=f"multiagent.policies.{pid}.config.")


def validate_config(config: TrainerConfigDict, trainer: Any = None) -> None:
    """Check a merged trainer config and fill in derived values, in place.

    Follows RLlib 1.x's `Trainer._validate_config`: resolves deprecated keys (with a
    warning), normalises `multiagent/policies` to {id: PolicySpec} and
    `input_evaluation` to a list, and raises `ValueError` for values that cannot
    work. corral adds the checks of its own keys; features it does not have yet raise
    `NotImplementedError` (see also `check_not_implemented`).

    :param config: the full config (`merge_trainer_configs` output); changed in place.
    :param trainer: the trainer being built, if any (its default policy class decides
        `simple_optimizer` in multi-agent setups).
    """
    if not isinstance(config, dict):
        raise ValueError(f"A trainer config must be a dict, got {type(config).__name__}.")
    _validate_framework_and_backend(config)

    model_config = config.get("model")
    if model_config is None:
        config["model"] = model_config = {}
    if not isinstance(model_config, dict):
        raise ValueError(f"`model` must be a dict of model options, got {model_config!r}.")

    if config.get("monitor", DEPRECATED_VALUE) != DEPRECATED_VALUE:
        deprecation_warning("monitor", "record_env", error=False)
        config["record_env"] = config.get("monitor", False)
    # An empty folder name means "the default folder" and must not read as False.
    if config.get("record_env") == "":
        config["record_env"] = True

    if config.get("callbacks") is None:
        config["callbacks"] = DefaultCallbacks
    if not callable(config["callbacks"]):
        raise ValueError(
            "`callbacks` must be a callable method that returns a subclass of "
            f"DefaultCallbacks, got {config['callbacks']}"
        )

    simple_optimizer = config.get("simple_optimizer", DEPRECATED_VALUE)
    if simple_optimizer != DEPRECATED_VALUE:
        deprecation_warning(old="simple_optimizer", error=False)

    multiagent = config.get("multiagent")
    if multiagent is None:
        config["multiagent"] = multiagent = copy_config(COMMON_CONFIG["multiagent"])
    if not isinstance(multiagent, dict):
        raise ValueError(f"`multiagent` must be a dict, got {multiagent!r}.")
    specs = multiagent["policies"] = _policy_specs(multiagent)
    is_multiagent = len(specs) > 1 or _DEFAULT_POLICY_ID not in specs

    num_gpus = config.get("num_gpus", 0) or 0
    if num_gpus > 1:
        if simple_optimizer is True:
            raise ValueError(
                "Cannot use `simple_optimizer` if `num_gpus` > 1! Consider not setting "
                "`simple_optimizer` in your config."
            )
        config["simple_optimizer"] = False
    elif simple_optimizer == DEPRECATED_VALUE:
        # The multi-device path needs every policy to be a TorchPolicy.
        config["simple_optimizer"] = is_multiagent and not _all_torch_policies(
            specs, trainer, config
        )

    input_evaluation = config.get("input_evaluation", [])
    if isinstance(input_evaluation, tuple):
        config["input_evaluation"] = list(input_evaluation)
    elif not isinstance(input_evaluation, list):
        raise ValueError(f"`input_evaluation` must be a list of strings, got {input_evaluation}!")

    _validate_model(model_config)

    batch_mode = config.get("batch_mode", "truncate_episodes")
    if batch_mode not in ("truncate_episodes", "complete_episodes"):
        raise ValueError(
            f"`batch_mode` must be one of [truncate_episodes|complete_episodes]! Got {batch_mode}"
        )
    count_steps_by = multiagent.get("count_steps_by", "env_steps")
    if count_steps_by not in ("env_steps", "agent_steps"):
        raise ValueError(
            f"`count_steps_by` must be one of [env_steps|agent_steps]! Got {count_steps_by}"
        )
    replay_mode = multiagent.get("replay_mode", "independent")
    if replay_mode not in ("independent", "lockstep"):
        raise ValueError(
            f"`multiagent.replay_mode` must be one of [independent|lockstep]! Got {replay_mode}"
        )

    _resolve_renamed_keys(config, trainer)
    _validate_evaluation(config)


# RLlib 1.13's new key -> the pre-1.13 key corral's code reads. A new key set away
# from its default is copied onto the old one; an old key set by the user still
# works, with a deprecation warning naming its replacement.
RENAMED_IN_1_13: dict[str, str] = {
    "evaluation_duration": "evaluation_num_episodes",
    "metrics_num_episodes_for_smoothing": "metrics_smoothing_episodes",
    "metrics_episode_collection_timeout_s": "collect_metrics_timeout",
    "min_time_s_per_reporting": "min_iter_time_s",
    "min_sample_timesteps_per_reporting": "timesteps_per_iteration",
}


def _resolve_renamed_keys(config: TrainerConfigDict, trainer: Any = None) -> None:
    # An algorithm's own defaults for the old keys (e.g. DQN's timesteps_per_iteration)
    # are not the user's doing: no warning for them.
    defaults = COMMON_CONFIG
    if trainer is not None and callable(getattr(trainer, "get_default_config", None)):
        defaults = trainer.get_default_config()
    for new, old in RENAMED_IN_1_13.items():
        if new not in config or old not in config:
            continue
        new_default = defaults.get(new, COMMON_CONFIG[new])
        old_default = defaults.get(old, COMMON_CONFIG[old])
        if not _same(config[new], new_default):  # the user set the new key
            value = config[new]
            # None means "no minimum" in 1.13, 0 in the old keys.
            config[old] = COMMON_CONFIG[old] if value is None else value
        elif not _same(config[old], old_default):  # the user set the old key
            deprecation_warning(old, new, error=False)
            config[new] = config[old]
        elif not _same(config[new], COMMON_CONFIG[new]):  # the algorithm set the new key
            config[old] = config[new]


# --------------------------------------------------------------------------------------
# Keys accepted for compatibility but not built yet
# --------------------------------------------------------------------------------------

# Config path -> what is missing. Setting one of these away from its default raises
# NotImplementedError instead of being silently ignored. Remove an entry when the
# feature lands.
NOT_YET_IMPLEMENTED: dict[str, str] = {
    "sample_async": "sampling in a background thread",
    "input": "offline input (only 'sampler')",
    "output": "writing experiences to disk",
    "postprocess_inputs": "postprocessing of offline input",
    "shuffle_buffer_size": "shuffling of offline input",
    "actions_in_input_normalized": "normalised offline actions",
    "fake_sampler": "the fake sampler",
    "num_gpus_per_worker": "GPUs in rollout workers",
    "eager_tracing": "TensorFlow eager tracing (corral is torch-only)",
    "model/use_attention": "attention (GTrXL) models",
    "model/custom_preprocessor": "custom preprocessors",
    "evaluation_duration_unit": "evaluation durations in timesteps (only 'episodes')",
    "always_attach_evaluation_results": "attaching the last evaluation to every result",
    "keep_per_episode_custom_metrics": "per-episode custom metric lists",
    "min_train_timesteps_per_reporting": "a minimum of trained steps per iteration",
    "_disable_preprocessor_api": "raw observations for models",
    "_disable_action_flattening": "nested actions for models",
}


# Keys whose "off" value is fixed, whatever an algorithm's defaults say.
_OFF_VALUE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "input": lambda v: v == "sampler",
}

_MISSING = object()


def _lookup(config: Mapping[str, Any], path: str) -> Any:
    node: Any = config
    for part in path.split("/"):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _normalised(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_normalised(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _normalised(v) for k, v in value.items()}
    return value


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(_normalised(a) == _normalised(b))
    except Exception:
        # e.g. numpy arrays, whose == is element-wise.
        return False


def _short_repr(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_not_implemented(
    config: Mapping[str, Any], defaults: Mapping[str, Any] | None = None
) -> None:
    """Raise `NotImplementedError` if `config` turns on a feature corral lacks.

    Each path of `NOT_YET_IMPLEMENTED` found in `config` (and in its
    `evaluation_config`) must hold its default: the value in `defaults` (the
    algorithm's `DEFAULT_CONFIG`; `COMMON_CONFIG` when None or when the path is missing
    there), or for a few keys a fixed value ("NoFilter", "sampler", no extra dense
    layers, the single default policy). The error lists every offending key.
    """
    defaults = COMMON_CONFIG if defaults is None else defaults
    problems = []
    eval_config = config.get("evaluation_config")
    sources = [("", config)]
    if isinstance(eval_config, Mapping):
        sources.append(("evaluation_config/", eval_config))
    for prefix, source in sources:
        for path, reason in NOT_YET_IMPLEMENTED.items():
            value = _lookup(source, path)
            if value is _MISSING:
                continue
            check = _OFF_VALUE_CHECKS.get(path)
            if check is not None:
                if check(value):
                    continue
                default = _lookup(COMMON_CONFIG, path)
            else:
                default = _lookup(defaults, path)
                if default is _MISSING:
                    default = _lookup(COMMON_CONFIG, path)
                if default is _MISSING or _same(value, default):
                    continue
            problems.append(
                f"'{prefix}{path}' = {_short_repr(value)} ({reason}; default: "
                f"{_short_repr(default)})"
            )
    if problems:
        raise NotImplementedError(
            "corral does not implement these config settings yet: "
            + "; ".join(problems)
            + ". Leave them at their defaults."
        )
