"""The trainer's configuration layer: defaults, merging, validation.

`COMMON_CONFIG` holds every key of RLlib 1.x's common trainer config (same names,
same meaning, same defaults, except that `framework` is "torch") plus the keys corral
adds. An algorithm's `DEFAULT_CONFIG` is `with_common_config({...its keys...})`, and a
trainer merges the user's dict over that with `merge_trainer_configs`, then calls
`validate_config` and `check_not_implemented`. Merging is in `config_merge`, checking in
`config_validation`; both are re-exported here (RLlib's `agents.trainer` names).

No torch import here: reading or validating a config must stay cheap.
"""

from __future__ import annotations

from corral.agents.callbacks import DefaultCallbacks
from corral.agents.config_merge import (
    ALLOW_UNKNOWN_SUBKEYS,
    OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES,
    PartialTrainerConfigDict,
    TrainerConfigDict,
    copy_config,
    deep_update,
    merge_trainer_configs,
    unknown_key_error,
)
from corral.models.model_defaults import MODEL_DEFAULTS
from corral.utils.deprecation import DEPRECATED_VALUE

# The comments in this dict are the reference documentation of each key.
COMMON_CONFIG: TrainerConfigDict = {
    # === Rollout workers ===
    # How many remote rollout workers sample in parallel. 0 samples in the driver
    # (the local worker) itself.
    "num_workers": 2,
    # How many env copies each worker steps side by side. Actions for all copies
    # come from one batched forward pass, which pays off when inference dominates.
    "num_envs_per_worker": 1,
    # How a worker steps its `num_envs_per_worker` env copies:
    # "sequential": a list of `gymnasium.Env` objects made by the env creator, stepped
    #   one after the other (any env);
    # "native": one Gymnasium vector env, `gymnasium.make_vec(env, num_envs,
    #   vectorization_mode="vector_entry_point", **env_config)`: numpy-batched envs
    #   (e.g. CartPole-v1), stepped by one call;
    # "envpool": one EnvPool pool, `envpool.make(env, env_type="gymnasium",
    #   num_envs=..., seed=..., **env_config)`, stepped in C++ threads (needs
    #   `pip install corral[envpool]`; `env` is an EnvPool task id, e.g. "Pong-v5").
    # An env creator returning a `gymnasium.vector.VectorEnv` is stepped the same
    # way. Batched vector envs reset a sub-env themselves in the step after its
    # episode ended (that step is not part of the batch); so a hard `horizon`,
    # `restart_failed_sub_environments`, `remote_worker_envs` and `record_env` are
    # refused with them.
    "vectorize_mode": "sequential",
    # With vectorize_mode="envpool": the worker's sub-envs in this many EnvPool pools
    # (groups of num_envs_per_worker // env_splits) that step in turn: while one
    # group's envs step in EnvPool's threads, the sampler records the previous group's
    # step and computes the next group's actions (double-buffered sampling, Sample
    # Factory's `worker_num_splits`; 2 is the usual value). It helps when inference and
    # env stepping cost about the same and the worker has the machine's cores to itself
    # (Atari, one worker on 2 cores: 0.54 of EnvPool alone's steps/s against 0.43-0.48
    # with one pool, `benchmarks/sampling.py --pong-envpool`; with more samplers than
    # cores one pool is faster); seeds (sub-env i gets seed + i), transitions and
    # episodes are those of one pool stepped in lockstep (only the actions' random draws
    # come in another order). On Linux the pools' threads run in the SCHED_IDLE class
    # (only on cores no other thread wants: a group's wake-up never takes the sampler's
    # core), one per core unless env_config sets num_threads. 1: one pool.
    "env_splits": 1,
    # Whether the driver's local worker builds an env too when `num_workers` > 0.
    # It normally needs none, since remote workers sample and evaluation workers
    # evaluate; set True to e.g. call `compute_single_action` against its env.
    "create_env_on_driver": False,
    # Steps per fragment a worker returns from one `sample()` call (per env copy,
    # so a worker hands back `rollout_fragment_length * num_envs_per_worker`
    # steps). Fragments are concatenated until `train_batch_size` is reached.
    # A vector env of the env creator's own with another number of sub-envs
    # (`num_envs_per_worker` 1) steps all of them together, as often as that many
    # steps need (rounded up to whole vector steps).
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
    # Extra keyword arguments for the policy's `torch.optim.Adam` (e.g. `{"eps": 1e-5}`),
    # where the algorithm's policy reads them (PG, A2C/A3C, PPO, MARWIL/BC, SAC, DDPG/TD3,
    # CQL; DQN has `adam_epsilon`, IMPALA/APPO `opt_type`). Adam runs on torch's fused
    # kernel unless this picks `{"foreach": True}` or `{"fused": False}`.
    "optimizer": {},
    # (corral) What a minibatch whose loss or gradient is NaN or infinite does.
    # False: `train()` raises an error naming the policy and the loss term, before
    # the optimiser changes any weight. True: that minibatch's update is skipped
    # (the weights and the optimiser state stay as they were) and counted in the
    # learner results as `num_nonfinite_updates_skipped`. Either way the weights
    # are never left non-finite: if a step itself overflows them, they are put
    # back as they were before the update.
    "skip_nonfinite_updates": False,
    # (RLlib 2.x's names) Run the learner's loss computation through
    # `torch.compile`: a policy's `loss` (DQN: its TD loss; SAC: its three losses,
    # the methods named by the policy's `compiled_loss_methods`); backward, the
    # finite checks, clipping and the optimiser step stay eager (Adam is fused
    # already). The first update of each new shape compiles (several seconds);
    # batch sizes that change compile once more with a dynamic batch dimension.
    # If compiling fails, a warning says why and that policy runs eagerly. Off
    # by default: on a 2-core CPU, PPO's 64x64 update ran 1.4-1.6x faster per
    # minibatch once compiled, but compiling took ~35 s (paid back after ~30,000
    # minibatches), and DQN's 256x256 step on 64 rows gained nothing
    # (benchmarks/README.md, `learner_update.py --torch-compile`).
    "torch_compile_learner": False,
    # The `torch.compile` backend: "inductor" (generated C++/OpenMP kernels; needs a
    # C++ compiler), "aot_eager" (no code generation: for checking), or any
    # backend name `torch._dynamo.list_backends()` gives.
    "torch_compile_learner_dynamo_backend": "inductor",
    # The `torch.compile` mode: None (default), "reduce-overhead" (CUDA graphs: GPU
    # only), "max-autotune", "max-autotune-no-cudagraphs".
    "torch_compile_learner_dynamo_mode": None,
    # === Environment ===
    # Cut episodes after this many steps (a truncation). None uses the env's
    # `spec.max_episode_steps` when it has one.
    "horizon": None,
    # At the horizon, end the logical episode (metrics, a new episode id) but keep
    # stepping the same env without a reset. The cut step is a truncation (its value
    # bootstraps) whose `dones` flag is False, as in RLlib 1.13's sampler.
    "soft_horizon": False,
    # Never mark a step terminated: an episode's end (the env's own or the horizon's)
    # becomes a truncation, so value targets bootstrap through it, and batches' `dones`
    # stay False (RLlib 1.13's); the env is still reset (unless `soft_horizon` keeps
    # it running).
    "no_done_at_end": False,
    # Which env to train on: a name registered with `register_env`, a Gymnasium
    # id, a dotted class path or an env class (called with an `EnvContext`; one whose
    # constructor takes no argument, with none while `env_config` is empty).
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
    # Default observation preprocessing: "deepmind" wraps Atari envs with raw frames
    # (Atari ids, and the Atari envs an env creator or class makes) in DeepMind's
    # processing (`wrap_deepmind`: 84x84 grey frames, 4 stacked, see the model's `dim`
    # and `framestack`); "rllib" or None leave them, and raw 210x160x3 frames are then
    # resized by RLlib's `GenericPixelPreprocessor` (the model's `dim`, `grayscale`,
    # `zero_mean`).
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
    # Sample once, then hand out that same batch from every later `sample()` call of
    # a rollout worker (no env steps, callbacks or output after the first): measures
    # how fast the learner trains alone. Evaluation workers sample their envs anyway.
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
    # entries are its constructor's keyword arguments, checked when the policy is
    # built against the class's `CONFIG_SPECS` (e.g. `final_epsilon` in [0, 1]).
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
    # Sample in a background thread (RLlib's AsyncSampler): each worker's envs run
    # ahead of `sample()`, up to 5 fragments queued, while the driver trains, so the
    # data becomes slightly off-policy. The episode callbacks run in that thread;
    # observation filters must be thread-safe ("NoFilter" or
    # "ConcurrentMeanStdFilter"). Evaluation workers, offline `input` and ExternalEnvs
    # sample synchronously. See `corral.evaluation.async_sampler`.
    "sample_async": False,
    # Name of the class collecting env, model and sampler data into batches.
    "sample_collector": "SimpleListCollector",
    # Per-element observation filter: "NoFilter", "MeanStdFilter" or
    # "ConcurrentMeanStdFilter" (its thread-safe form).
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
    # overhead otherwise. Single-agent envs and `MultiAgentEnv`s alike.
    "remote_worker_envs": False,
    # RLlib's wait (ms, >= 0) for remote env results when polling. corral's sampler
    # steps all remote sub-envs in lockstep and always waits for every one of them (as
    # RLlib with a wait longer than any step); with `remote_worker_envs`, a wait between
    # 0 and 1000 ms gets a warning saying so.
    "remote_env_batch_wait_ms": 0,
    # Each `train()` call lasts at least this many seconds.
    "min_iter_time_s": 0,
    # Each `train()` call samples at least this many env steps; changes only how
    # often results are reported, not what is learnt.
    "timesteps_per_iteration": 0,
    # Random seed: worker i seeds Python, numpy and torch with seed + 1000 * i and
    # its sub-env j with that + j, so identical configs give identical runs (where no
    # wall-clock minimum, `min_iter_time_s` or `min_time_s_per_reporting`, decides how
    # many steps an iteration takes). None: runs differ (sub-envs seed themselves from
    # the OS); the driver's generators are left as they are, and each forked worker
    # draws fresh seeds from the OS.
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
    # Run the GPU code paths (`num_gpus`, `num_gpus_per_learner`,
    # `num_gpus_per_worker`) on the CPU, to test them on machines without a GPU;
    # reserves no GPUs.
    "_fake_gpus": False,
    # CPUs reserved per rollout worker.
    "num_cpus_per_worker": 1,
    # GPUs per remote rollout worker (fractional allowed: Ray packs several workers
    # on one GPU); > 0 runs the workers' inference on cuda: their policies' modules
    # on the GPU, observations copied there per call, actions back, synced weights
    # loaded onto it (the driver's own worker stays on the CPU). For GPU-heavy
    # envs or expensive inference (conv nets); policies acting through their own
    # `compute_actions_from_obs` (SAC, DDPG, TD3) refuse it.
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
    # Where experiences come from: "sampler" (the env, online), a folder, glob
    # or file of JSON files (RLlib's own included; ".parquet" files are read as
    # Parquet), a list of files, a dict {source: probability} mixing sources
    # (e.g. {"sampler": 0.4, "/data/*.json": 0.6}), a callable taking an
    # IOContext and returning an InputReader, a name registered with
    # `register_input`, "minari://<dataset id>" (a local Minari dataset),
    # "d4rl.<env name>" (RLlib's D4RL reader; needs the `d4rl` package) or
    # "dataset" (a Ray Data dataset named by `input_config`).
    "input": "sampler",
    # Arguments for the input, read by readers as `ioctx.input_config`; for
    # input="dataset": {"format": "json" or "parquet", "path": ...} or
    # {"loader_fn": fn}, and "batch_size".
    "input_config": {},
    # Whether offline actions are already normalised to [-1, 1] (true for data
    # written by a corral or RLlib run with `normalize_actions=True`); if False
    # and `normalize_actions` is True, read actions are normalised.
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
    # The offline algorithms (BC, MARWIL, CQL, CQL_DQN) with a Ray Data `input` (a
    # ray.data.Dataset, or "dataset" with `input_config`): stream its rows to the
    # learners through the Learner API's `data_iterators` (one `streaming_split` part per
    # learner) instead of reading them in the rollout workers into the replay buffer.
    # The process that reads a batch prepares it (actions clipped / normalised,
    # `postprocess_inputs` with the weights it trains); every training step is one
    # gradient step on the next `train_batch_size` rows, in the dataset's order (shuffle
    # the dataset itself to mix it, e.g. `ds.randomize_block_order()`). Needs
    # `num_workers` 0 and one policy's data; the replay buffer, `learning_starts` and
    # `input_evaluation` do not apply; a restored trainer starts a new pass.
    "stream_to_learners": False,
    # Where to write experiences: None (nowhere), "logdir" (the trainer's log
    # folder), a folder (JSON lines, RLlib 1.x's files; Parquet with
    # `output_config={"format": "parquet"}`), or a callable taking an IOContext
    # and returning an OutputWriter. Local paths only.
    "output": None,
    # Columns stored compressed in JSON output: base64 of LZ4 of NumPy's .npy
    # bytes (bit-exact, no pickle).
    "output_compress_columns": ["obs", "new_obs"],
    # Bytes per output file: a new file starts before one would grow past it.
    "output_max_file_size": 64 * 1024 * 1024,
    # === Multi-agent ===
    # The policies, which agent acts with which, which ones learn, and how their
    # transitions are replayed and counted.
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
    # (RLlib 1.13) The unit of `evaluation_duration`: "episodes" (whole episodes)
    # or "timesteps" (env steps, shared out among the evaluation workers; the
    # episodes finished in them are reported, the steps as `timesteps_this_iter`).
    "evaluation_duration_unit": "episodes",
    # (RLlib 1.13) Whether every result carries the last evaluation results, also
    # in iterations that did not evaluate (before the first evaluation: the
    # `episode_reward_max/min/mean` keys as NaN).
    "always_attach_evaluation_results": False,
    # (RLlib 1.13) Report each custom metric as the list of its episodes' values
    # (`custom_metrics/<name>`) instead of `<name>_mean`, `_min` and `_max`, in
    # training and evaluation results alike.
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
    # (RLlib 1.13) Each `train()` call repeats its training step until it has
    # trained on at least this many steps (agent steps when `count_steps_by` says
    # so), besides the time and sampling minimums; None: no minimum.
    "min_train_timesteps_per_reporting": None,
    # (RLlib 1.13) Each `train()` call samples at least this many steps; None: no
    # minimum (replaces `timesteps_per_iteration`).
    "min_sample_timesteps_per_reporting": None,
    # (RLlib 1.13) Arguments for the output, read by writers as
    # `ioctx.output_config` (any keys: a custom writer's own too); {"format":
    # "parquet"} writes Parquet files; `output="dataset"` reads "format", "path" and
    # "max_num_samples_per_file" (batches per file). "store_infos" (bool, RLlib 1.13;
    # default False): the batches the workers sample carry an `infos` column, per row
    # the info dict the env returned with that row's step (single- and multi-agent),
    # which `output` writes and the readers read back as dicts. NumPy values in them
    # are written as numbers and lists; other values JSON cannot store raise a
    # TypeError naming their key. Replay buffers drop the column.
    "output_config": {},
    # (RLlib 1.13) TensorFlow eager only: retraces allowed per function; unused by
    # torch.
    "eager_max_retraces": 20,
    # (RLlib 1.13) TensorFlow policies only; unused by torch.
    "_tf_policy_handles_more_than_one_loss": False,
    # (RLlib 1.13) Models get the observations as the env gives them instead of the
    # preprocessor's flat rows: Dict/Tuple structures of [B, ...] tensors, Discrete and
    # MultiDiscrete parts as their integer values (not one-hot), images as images;
    # `input_dict["obs_flat"]` is that same `obs`. The model is built for the env's
    # observation space (the default: FullyConnectedNetwork for a 1-D Box, VisionNetwork
    # for images, ComplexInputNetwork, which one-hots discrete parts itself, for any
    # other space). The sample batches keep holding the flat rows (`obs`), turned back
    # into the structure at each model call. Copied into `model` (as RLlib does). Built
    # for the algorithms whose model the catalog makes (PPO, APPO, IMPALA, PG, A2C/A3C,
    # MARWIL/BC); the others, which build their own models, refuse it; so does a
    # `model.custom_preprocessor`.
    "_disable_preprocessor_api": False,
    # (RLlib 1.13) Tuple/Dict action spaces: keep the actions nested instead of as
    # flat rows in the sample and train batches (`actions`, `prev_actions`: dicts /
    # tuples of [B, ...] arrays, discrete parts as int64), in what the losses hand the
    # action distribution's `logp` and in the `prev_actions` models get; a model reading
    # previous actions of such a space (`lstm_use_prev_action`,
    # `attention_use_n_prev_actions`) needs it. The model's output (the distribution
    # inputs) stays one flat vector, as in RLlib; a distribution may sample nested
    # actions. Output files hold the flat rows either way (offline readers nest them
    # again). Copied into `model` (as RLlib does); no effect on other action spaces.
    # QMIX, whose mixer reads the group's actions as flat rows, refuses it.
    "_disable_action_flattening": False,
    # (RLlib 1.13) True: the trainer runs `training_iteration()` (1.13's new API)
    # even where its class has an `execution_plan` of its own (a subclass's, or
    # `build_trainer(execution_plan=...)`'s). corral's built-in algorithms have none,
    # so for them both values behave the same.
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


def with_common_config(extra_config: PartialTrainerConfigDict) -> TrainerConfigDict:
    """`COMMON_CONFIG` with an algorithm's own keys merged in (new keys allowed).

    This is how an algorithm builds its `DEFAULT_CONFIG`.
    """
    return merge_trainer_configs(COMMON_CONFIG, extra_config, allow_unknown_configs=True)


# Last: `config_validation` reads `COMMON_CONFIG` from this module.
from corral.agents.config_validation import (  # noqa: E402
    COMMON_CONFIG_SPECS,
    NOT_YET_IMPLEMENTED,
    RENAMED_IN_1_13,
    check_config_values,
    check_not_implemented,
    validate_config,
)

__all__ = [
    "ALLOW_UNKNOWN_SUBKEYS",
    "COMMON_CONFIG",
    "COMMON_CONFIG_SPECS",
    "NOT_YET_IMPLEMENTED",
    "OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES",
    "RENAMED_IN_1_13",
    "PartialTrainerConfigDict",
    "TrainerConfigDict",
    "check_config_values",
    "check_not_implemented",
    "copy_config",
    "deep_update",
    "merge_trainer_configs",
    "unknown_key_error",
    "validate_config",
    "with_common_config",
]
