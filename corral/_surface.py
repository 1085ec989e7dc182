"""RLlib 1.13's public surface in corral: the one table of what corral builds and what not.

Every ``ray.rllib.X`` module of RLlib 1.13 exists as ``corral.X`` with every public name it
had (``ray.rllib.X.Y`` -> ``corral.X.Y``, the porting rule of the project's API contract).
This module is the single source of truth for those names:

- :data:`_SNAPSHOT`: RLlib 1.13's module list with each module's public names (a compact
  copy of the reference list, so the surface exists in any checkout);
- :data:`NOT_BUILT`: the algorithms and features corral does not build; their names import
  and raise :class:`NotBuiltError` (a ``NotImplementedError``) naming them on use. The
  README's list and ``corral.agents.registry``'s "not built yet" answers are read from here;
- :data:`_PENDING`: names another part of corral is about to provide (a stand-in raising
  ``NotImplementedError`` until the real module or name lands; the real one then wins);
- :data:`_NOT_PROVIDED`: single RLlib names of modules corral builds that corral leaves out
  (mostly RLlib's function-built policy pieces, where corral's policies are classes);
- TensorFlow/JAX-only names (``*TFPolicy``, ``TFModelV2``, ``models.tf.*``, ``tf_utils``,
  ``*_tf_*`` modules) are recognised by rule; they import without TensorFlow and raise
  :class:`TensorFlowOnlyError` (an ``ImportError`` and a ``NotImplementedError``) naming the
  torch counterpart on use;
- :data:`_ALIASES`: names corral builds under another path (re-exported lazily).

Every other listed name is real corral code in the module of the same path, or, for a
package, in the deepest listed submodule that defines it (RLlib's packages re-export
their submodules' names; corral serves those re-exports lazily).

The mechanism: :func:`install` (called by ``corral/__init__.py``) puts one finder on
``sys.meta_path``. Only ``corral.*`` module names of the table are looked at. A module with
a file is loaded as always, then given a module ``__getattr__`` that serves the names it
does not define itself from this table (a real definition always wins). A module with no
file is created empty (a package) with the same ``__getattr__``. Nothing here imports
torch; the table is parsed on the first lookup.

"Use" of a stand-in is calling it or instantiating it (also through a subclass: user code
may subclass ``TFModelV2`` at import time), indexing it, or reading an attribute of it.
Class factories of TF policies (``build_tf_policy(...)``, ``SomeTFPolicy.with_updates(...)``)
return another stand-in class, so a module defining a TF and a torch policy side by side
still imports; instantiating that class raises.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import re
import sys
from typing import Any

__all__ = [
    "NOT_BUILT",
    "NotBuiltError",
    "TensorFlowOnlyError",
    "Verdict",
    "classify",
    "install",
    "is_stand_in",
    "markdown_not_built",
    "not_built_algorithms",
    "surface",
]


class NotBuiltError(NotImplementedError):
    """Raised on use of an RLlib name whose feature corral does not build (yet)."""


class TensorFlowOnlyError(ImportError, NotImplementedError):
    """Raised on use of a TensorFlow- or JAX-only RLlib name; corral runs on PyTorch."""


class Feature:
    """An RLlib algorithm or feature corral does not build.

    Args:
        name: what users call it ("IMPALA").
        what: one line on what it is.
        modules: module paths (relative to ``corral``) that belong wholly to it.
        names: single names ``"module:Name"`` that belong to it.
        algorithms: its ``get_trainer_class`` names.
    """

    __slots__ = ("algorithms", "modules", "name", "names", "what")

    def __init__(
        self,
        name: str,
        what: str,
        modules: tuple[str, ...] = (),
        names: tuple[str, ...] = (),
        algorithms: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.what = what
        self.modules = modules
        self.names = names
        self.algorithms = algorithms

    def __repr__(self) -> str:
        return f"Feature({self.name!r})"


# What corral does not build. README.md's list and `corral.agents.registry` read this.
NOT_BUILT: tuple[Feature, ...] = (
    Feature(
        "Execution plans",
        "RLlib's iterator-based execution-plan operators (corral trainers run "
        "`training_iteration()`; `synchronous_parallel_sample`, `train_one_step` and the "
        "1.13 `MultiAgentReplayBuffer` are built)",
        (
            "execution.concurrency_ops",
            "execution.learner_thread",
            "execution.metric_ops",
            "execution.multi_gpu_impl",
            "execution.multi_gpu_learner_thread",
            "execution.parallel_requests",
            "execution.replay_ops",
            "execution.tree_agg",
            "execution.buffers.minibatch_buffer",
            "execution.buffers.mixin_replay_buffer",
        ),
        (
            "execution.rollout_ops:ParallelRollouts",
            "execution.rollout_ops:AsyncGradients",
            "execution.rollout_ops:ConcatBatches",
            "execution.rollout_ops:SelectExperiences",
            "execution.rollout_ops:StandardizeFields",
            "execution.train_ops:TrainOneStep",
            "execution.train_ops:MultiGPUTrainOneStep",
            "execution.train_ops:ComputeGradients",
            "execution.train_ops:ApplyGradients",
            "execution.train_ops:AverageGradients",
            "execution.train_ops:UpdateTargetNetwork",
            "execution.buffers.multi_agent_replay_buffer:ReplayActor",
            "execution.buffers.replay_buffer:warn_replay_capacity",
            "execution.buffers.replay_buffer:warn_replay_buffer_size",
        ),
    ),
    Feature(
        "A3C",
        "asynchronous advantage actor-critic (A2C, its synchronous form, is built)",
        names=("agents.a3c.a3c:A3CTrainer",),
        algorithms=("A3C",),
    ),
    Feature(
        "AlphaStar",
        "league-based multi-agent self-play",
        ("agents.alpha_star",),
        (),
        ("AlphaStar",),
    ),
    Feature(
        "Ape-X DDPG",
        "distributed prioritized replay for DDPG",
        ("agents.ddpg.apex",),
        (),
        ("APEX_DDPG",),
    ),
    Feature("ARS", "augmented random search", ("agents.ars",), (), ("ARS",)),
    Feature(
        "Bandits",
        "contextual bandits (LinUCB, LinTS) and their explorations",
        (
            "agents.bandit",
            "utils.exploration.thompson_sampling",
            "utils.exploration.upper_confidence_bound",
        ),
        (),
        ("BanditLinTS", "BanditLinUCB"),
    ),
    Feature("BC", "behaviour cloning from offline data", ("agents.marwil.bc",), (), ("BC",)),
    Feature("CQL", "conservative Q-learning (offline)", ("agents.cql",), (), ("CQL",)),
    Feature("DD-PPO", "decentralized distributed PPO", ("agents.ppo.ddppo",), (), ("DDPPO",)),
    Feature(
        "Dreamer",
        "model-based RL with a learned world model",
        ("agents.dreamer", "models.torch.modules.convtranspose2d_stack"),
        (),
        ("DREAMER",),
    ),
    Feature("ES", "evolution strategies", ("agents.es",), (), ("ES",)),
    Feature(
        "IMPALA",
        "asynchronous actor-learner training with V-trace, and its learner threads",
        (
            "agents.impala",
            "execution.learner_thread",
            "execution.multi_gpu_learner_thread",
            "execution.tree_agg",
            "agents.dqn.learner_thread",
        ),
        (),
        ("IMPALA",),
    ),
    Feature("MAML", "model-agnostic meta-learning", ("agents.maml",), (), ("MAML",)),
    Feature(
        "MARWIL",
        "monotonic advantage re-weighted imitation learning (offline)",
        ("agents.marwil",),
        (),
        ("MARWIL",),
    ),
    Feature(
        "MB-MPO",
        "model-based meta-policy optimization",
        ("agents.mbmpo", "env.wrappers.model_vector_env"),
        (),
        ("MBMPO",),
    ),
    Feature(
        "QMIX",
        "monotonic value factorisation for grouped agents, and agent grouping",
        ("agents.qmix", "env.wrappers.group_agents_wrapper"),
        ("env:GroupAgentsWrapper",),
        ("QMIX",),
    ),
    Feature(
        "R2D2",
        "recurrent replay distributed DQN",
        ("agents.dqn.r2d2", "agents.dqn.r2d2_tf_policy", "agents.dqn.r2d2_torch_policy"),
        (),
        ("R2D2",),
    ),
    Feature(
        "RNNSAC",
        "SAC with recurrent models",
        ("agents.sac.rnnsac", "agents.sac.rnnsac_torch_model", "agents.sac.rnnsac_torch_policy"),
        ("agents.sac:RNNSAC_DEFAULT_CONFIG",),
        ("RNNSAC",),
    ),
    Feature(
        "SlateQ",
        "slate recommendation Q-learning and its explorations",
        (
            "agents.slateq",
            "utils.exploration.slate_epsilon_greedy",
            "utils.exploration.slate_soft_q",
        ),
        ("models.torch.torch_action_dist:TorchSlateMultiCategorical",),
        ("SlateQ",),
    ),
    Feature(
        "Curiosity and RE3",
        "intrinsic-motivation explorations",
        ("utils.exploration.curiosity", "utils.exploration.random_encoder"),
        ("agents.callbacks:RE3UpdateCallbacks",),
    ),
    Feature(
        "Parameter-space noise",
        "the ParameterNoise exploration",
        ("utils.exploration.parameter_noise",),
    ),
    Feature(
        "External envs and policy serving",
        "ExternalEnv, PolicyClient/PolicyServerInput (envs that drive the agent)",
        (
            "env.external_env",
            "env.external_multi_agent_env",
            "env.policy_client",
            "env.policy_server_input",
        ),
    ),
    Feature(
        "Remote envs",
        "BaseEnv-level remote env actors (`remote_worker_envs`)",
        ("env.remote_base_env",),
    ),
    Feature(
        "Third-party env wrappers",
        "DeepMind env/dm_control, Unity3D, Kaggle football, OpenSpiel and RecSim wrappers",
        (
            "env.wrappers.dm_control_wrapper",
            "env.wrappers.dm_env_wrapper",
            "env.wrappers.kaggle_wrapper",
            "env.wrappers.open_spiel",
            "env.wrappers.recsim",
            "env.wrappers.recsim_wrapper",
            "env.wrappers.unity3d_env",
            "env.wrappers.uncertainty_wrappers",
        ),
    ),
    Feature(
        "Attention nets",
        "GTrXL attention models and their layers",
        (
            "models.torch.attention_net",
            "models.torch.modules",
        ),
    ),
    Feature(
        "Offline data",
        "reading and writing experiences (`input`/`output`: JSON, datasets, D4RL) and "
        "off-policy estimation",
        ("offline",),
    ),
    Feature(
        "Ray actor utilities",
        "co-located actor helpers (corral's workers are processes: `corral.evaluation.backend`)",
        ("utils.actors",),
    ),
)

# Names (or whole modules) another part of corral provides. Until the real code lands they
# raise NotImplementedError; once a real module file or name exists it wins, and the
# surface test accepts either. Value: who provides it.

_PENDING_BY: dict[str, str] = {
    "policy.torch_policy_template": "`corral.policy.torch_policy_template.build_torch_policy`",
    # RLlib 1.x env helpers (corral.env is being extended for old gym envs).
    "env.base_env": "`corral.env` (RLlib 1.x env helpers)",
    "env.utils": "`corral.env` (RLlib 1.x env helpers)",
    "env.vector_env": "`corral.env` (RLlib 1.x env helpers)",
    "env.wrappers.exception_wrapper": "`corral.env` (RLlib 1.x env helpers)",
    "env.wrappers.pettingzoo_env": "`corral.env` (RLlib 1.x env helpers)",
    "utils.pre_checks": "`corral.env` (env checking)",
    "utils:check_env": "`corral.env` (env checking)",
}

# Single names of modules corral builds that corral leaves out: module -> (reason, names).
_FUNCTION_POLICY = (
    "it is one of the functions RLlib's function-built policies are made of; corral's torch "
    "policies are classes: subclass the policy and override the method (e.g. `loss`)"
)
_EXEC_PLAN = (
    "it is an execution-plan operator of RLlib's trainer; corral's trainer does this inside "
    "`training_step`"
)
_NOT_PROVIDED: dict[str, tuple[str, str]] = {
    "": ("it is Ray's usage-statistics library (corral collects none)", "usage_lib"),
    "agents.a3c.a3c_torch_policy": (
        _FUNCTION_POLICY,
        "add_advantages actor_critic_loss stats vf_preds_fetches torch_optimizer "
        "ValueNetworkMixin setup_mixins",
    ),
    "agents.ddpg.ddpg_torch_policy": (
        _FUNCTION_POLICY,
        "build_ddpg_models_and_action_dist ddpg_actor_critic_loss make_ddpg_optimizers "
        "apply_gradients_fn build_ddpg_stats before_init_fn ComputeTDErrorMixin setup_late_mixins",
    ),
    "agents.dqn.dqn_torch_policy": (
        _FUNCTION_POLICY,
        "QLoss ComputeTDErrorMixin build_q_model_and_distribution "
        "get_distribution_inputs_and_class build_q_losses adam_optimizer build_q_stats "
        "setup_early_mixins before_loss_init compute_q_values grad_process_and_td_error_fn "
        "extra_action_out_fn",
    ),
    "agents.dqn.simple_q_torch_policy": (
        _FUNCTION_POLICY,
        "TargetNetworkMixin build_q_model_and_distribution build_q_losses stats_fn "
        "extra_action_out_fn setup_late_mixins",
    ),
    "agents.sac.sac_torch_policy": (
        _FUNCTION_POLICY,
        "build_sac_model_and_action_dist action_distribution_fn actor_critic_loss stats "
        "optimizer_fn ComputeTDErrorMixin TargetNetworkMixin setup_late_mixins",
    ),
    "agents.ppo.ppo": (_EXEC_PLAN, "UpdateKL warn_about_bad_reward_scales"),
    "agents.ppo.appo": (_EXEC_PLAN, "UpdateTargetAndKL"),
    "agents.ppo.appo_torch_policy": (
        _FUNCTION_POLICY,
        "appo_surrogate_loss stats add_values setup_early_mixins setup_late_mixins",
    ),
    "agents.dqn.apex": (_EXEC_PLAN, "UpdateWorkerWeights"),
    "agents.dqn.dqn": (
        "RLlib 1.13 builds DQN on a generic off-policy trainer; corral's is "
        "`corral.agents.off_policy.OffPolicyTrainer`",
        "calculate_rr_weights GenericOffPolicyTrainer",
    ),
    "evaluate": (
        "RLlib's `rllib evaluate` script; use corral's command line (`corral evaluate`)",
        "EXAMPLE_USAGE create_parser RolloutSaver run DefaultMapping "
        "default_policy_agent_mapping keep_going rollout main",
    ),
    "rollout": ("RLlib's old `rllib rollout` script; use `corral evaluate`", "RolloutSaver"),
    "train": (
        "RLlib's `rllib train` script; use corral's command line (`corral train`)",
        "EXAMPLE_USAGE create_parser run main",
    ),
    "scripts": (
        "RLlib's `rllib` command; corral's is `corral` (corral/cli.py)",
        "EXAMPLE_USAGE cli",
    ),
    "evaluation.collectors.sample_collector": (
        "corral's samplers write preallocated buffers instead (corral.evaluation.sampler)",
        "SampleCollector",
    ),
    "evaluation.collectors.simple_list_collector": (
        "corral's samplers write preallocated buffers instead (corral.evaluation.sampler)",
        "to_float_np_array SimpleListCollector",
    ),
    "evaluation.observation_function": (
        "corral has no observation-function hook",
        "ObservationFunction",
    ),
    "evaluation.rollout_worker": (
        "corral keeps no process-global worker",
        "get_global_worker",
    ),
    "evaluation.sampler": (
        "corral's samplers are `corral.evaluation.sampler` / `multi_agent_sampler`, built by "
        "the RolloutWorker",
        "SyncSampler AsyncSampler PolicyEvalData StateBatch NewEpisodeDefaultDict SamplerInput",
    ),
    "evaluation": (
        "corral's samplers are `corral.evaluation.sampler` / `multi_agent_sampler`, built by "
        "the RolloutWorker",
        "SyncSampler AsyncSampler",
    ),
    "models.torch.complex_input_net": (
        "corral's built-in models take Dict/Tuple observations flattened "
        "(`restore_original_dimensions` gives a custom model the structure back)",
        "ComplexInputNetwork",
    ),
    "models.torch.torch_action_dist": (
        "corral's action distributions are Categorical, MultiCategorical, DiagGaussian, "
        "Deterministic and MultiActionDistribution (SAC squashes inside its policy)",
        "TorchSquashedGaussian TorchBeta TorchDirichlet",
    ),
    "policy.rnn_sequencing": (
        "corral pads and chops sequences inside its recurrent models' policy code",
        "pad_batch_to_sequences_of_same_size add_time_dimension chop_into_sequences "
        "timeslice_along_seq_lens_with_overlap",
    ),
    "policy.torch_policy": (
        "corral's TorchPolicy steps its optimizers itself",
        "DirectStepOptimizer",
    ),
    "env.wrappers.atari_wrappers": (
        "corral's `wrap_deepmind` builds on Gymnasium's AtariPreprocessing and FrameStack",
        "is_atari get_wrapper_by_cls MonitorEnv NoopResetEnv ClipRewardEnv FireResetEnv "
        "EpisodicLifeEnv MaxAndSkipEnv WarpFrame FrameStack FrameStackTrajectoryView "
        "ScaledFloatFrame",
    ),
    "utils.replay_buffers.multi_agent_mixin_replay_buffer": (
        "corral's buffers are ReplayBuffer, PrioritizedReplayBuffer, MultiAgentReplayBuffer",
        "MultiAgentMixInReplayBuffer",
    ),
    "utils.replay_buffers.multi_agent_prioritized_replay_buffer": (
        "corral's MultiAgentReplayBuffer takes prioritized replay from its config",
        "MultiAgentPrioritizedReplayBuffer ReplayActor",
    ),
    "utils.replay_buffers.multi_agent_replay_buffer": (
        "corral's MultiAgentReplayBuffer replays each policy independently",
        "ReplayMode merge_dicts_with_warning ReplayActor",
    ),
    "utils.replay_buffers.replay_buffer": ("corral's buffers store timesteps", "StorageUnit"),
    "utils.replay_buffers.reservoir_buffer": ("not built in corral", "ReservoirBuffer"),
    "utils.replay_buffers.simple_replay_buffer": ("not built in corral", "SimpleReplayBuffer"),
    "utils.replay_buffers": (
        "corral's buffers are ReplayBuffer, PrioritizedReplayBuffer, MultiAgentReplayBuffer",
        "MultiAgentMixInReplayBuffer MultiAgentPrioritizedReplayBuffer ReplayMode StorageUnit "
        "ReservoirBuffer SimpleReplayBuffer",
    ),
    "utils.replay_buffers.utils": (
        "corral's off-policy trainer updates priorities and samples itself",
        "update_priorities_in_replay_buffer sample_min_n_steps_from_buffer "
        "validate_buffer_config warn_replay_buffer_capacity",
    ),
    "utils.filter": (
        "corral's MeanStdFilter is synchronised by the trainer",
        "ConcurrentMeanStdFilter",
    ),
    "models.preprocessors": (
        "corral does not resize raw Atari frames in a preprocessor: `wrap_deepmind` (Gymnasium's "
        "AtariPreprocessing) and the vision net handle images",
        "GenericPixelPreprocessor",
    ),
    "utils.images": (
        "corral has no OpenCV image helpers (Gymnasium's wrappers resize frames)",
        "resize rgb2gray imread",
    ),
    "utils.debug.memory": ("corral has no memory-leak checker", "check_memory_leaks Suspect"),
    "utils.from_config": (
        "corral builds components from config dicts itself (e.g. `exploration_config`)",
        "from_config from_file lookup_type",
    ),
    "utils.test_utils": (
        "it runs RLlib's tuned-example YAML files on a Ray cluster; run corral's with "
        "`corral train -f`",
        "run_learning_tests_from_yaml",
    ),
}

# Names corral builds under another path: "module:Name" -> "corral.where:Name" (or any
# importable "module:attr"; no attr: the module itself).
_ALIASES: dict[str, str] = {
    "agents.maml.maml_torch_policy:KLCoeffMixin": (
        "corral.policy.kl_coeff_mixins:MAMLKLCoeffMixin"
    ),
    "execution.segment_tree:SegmentTree": "corral.utils.replay_buffers.segment_tree:SegmentTree",
    "execution.segment_tree:SumSegmentTree": (
        "corral.utils.replay_buffers.segment_tree:SumSegmentTree"
    ),
    "execution.segment_tree:MinSegmentTree": (
        "corral.utils.replay_buffers.segment_tree:MinSegmentTree"
    ),
    "execution.buffers.replay_buffer:ReplayBuffer": (
        "corral.utils.replay_buffers.replay_buffer:ReplayBuffer"
    ),
    "execution.buffers.replay_buffer:PrioritizedReplayBuffer": (
        "corral.utils.replay_buffers.prioritized_replay_buffer:PrioritizedReplayBuffer"
    ),
    ":register_trainable": "corral.tune.registry:register_trainable",
    "evaluation:SampleBatch": "corral.policy.sample_batch:SampleBatch",
    "evaluation:MultiAgentBatch": "corral.policy.sample_batch:MultiAgentBatch",
    "evaluation.episode:MultiAgentEpisode": "corral.evaluation.episode:Episode",
    "agents.dqn.simple_q:DEFAULT_CONFIG": "corral.agents.dqn.simple_q:SIMPLE_Q_DEFAULT_CONFIG",
    "agents.dqn.simple_q_torch_policy:SimpleQTorchPolicy": (
        "corral.agents.dqn.dqn_torch_policy:DQNTorchPolicy"
    ),
    "utils.schedules.constant_schedule:ConstantSchedule": "corral.utils.schedules:ConstantSchedule",
    "utils.schedules.linear_schedule:LinearSchedule": "corral.utils.schedules:LinearSchedule",
    "utils.schedules.piecewise_schedule:PiecewiseSchedule": (
        "corral.utils.schedules:PiecewiseSchedule"
    ),
    "utils.schedules.polynomial_schedule:PolynomialSchedule": (
        "corral.utils.schedules:PolynomialSchedule"
    ),
    "utils.schedules.exponential_schedule:ExponentialSchedule": (
        "corral.utils.schedules:ExponentialSchedule"
    ),
    "utils.schedules.schedule:Schedule": "corral.utils.schedules:Schedule",
    "utils.window_stat:WindowStat": "corral.utils.metrics.window_stat:WindowStat",
    "utils.filter_manager:FilterManager": "corral.utils.filter:FilterManager",
    "utils:deep_update": "corral.agents.config:deep_update",
    "evaluation.worker_set:T": "corral.utils.typing:T",
}

# TF-only names the naming rule does not catch.
_TF_NAMES: tuple[str, ...] = (
    "execution.multi_gpu_impl:LocalSyncParallelOptimizer",
    "agents.ddpg.noop_model:NoopModel",
)

# Torch counterparts the renaming rule does not find: "module:Name" or "module" -> text.
_TF_COUNTERPARTS: dict[str, str] = {
    "agents.ddpg.noop_model:NoopModel": "corral.agents.ddpg.noop_model.TorchNoopModel",
}

# TF policy class factories: calling one returns a stand-in class (instantiating raises).
_TF_CLASS_FACTORIES = frozenset(
    {
        "policy.tf_policy_template:build_tf_policy",
        "policy.eager_tf_policy:build_eager_tf_policy",
    }
)
_TF_CLASS_FACTORY_METHODS = frozenset({"with_updates", "as_eager", "with_traced_eager"})

# RLlib 1.13's modules ("." is ray.rllib itself) and their public names; continuation
# lines start with spaces. The surface test checks it against the reference list.
_SNAPSHOT = """\
.: BaseEnv, ExternalEnv, MultiAgentEnv, VectorEnv, RolloutWorker, Policy, SampleBatch,
    TFPolicy, TorchPolicy, register_trainable, usage_lib
agents: DefaultCallbacks, MemoryTrackingCallbacks, MultiCallbacks, Trainer, with_common_config,
    TrainerConfig
agents.a3c: A3CTrainer, DEFAULT_CONFIG, A2CTrainer
agents.a3c.a2c: A2C_DEFAULT_CONFIG, A2CTrainer
agents.a3c.a3c: DEFAULT_CONFIG, A3CTrainer
agents.a3c.a3c_tf_policy: postprocess_advantages, A3CLoss, actor_critic_loss,
    add_value_function_fetch, stats, grad_stats, clip_gradients, setup_mixins, A3CTFPolicy
agents.a3c.a3c_torch_policy: add_advantages, actor_critic_loss, stats, vf_preds_fetches,
    torch_optimizer, ValueNetworkMixin, setup_mixins, A3CTorchPolicy
agents.alpha_star: DEFAULT_CONFIG, AlphaStarTrainer
agents.alpha_star.alpha_star: DEFAULT_CONFIG, AlphaStarTrainer
agents.alpha_star.distributed_learners: DistributedLearners
agents.alpha_star.league_builder: LeagueBuilder, NoLeagueBuilder, AlphaStarLeagueBuilder
agents.ars: ARSTrainer, DEFAULT_CONFIG, ARSTFPolicy, ARSTorchPolicy
agents.ars.ars: Result, DEFAULT_CONFIG, create_shared_noise, SharedNoiseTable, Worker,
    get_policy_class, ARSTrainer
agents.ars.ars_tf_policy: ARSTFPolicy
agents.ars.ars_torch_policy: ARSTorchPolicy
agents.bandit: BanditLinTSTrainer, BanditLinUCBTrainer
agents.bandit.bandit: DEFAULT_CONFIG, BanditLinTSTrainer, BanditLinUCBTrainer
agents.bandit.bandit_tf_model: OnlineLinearRegression, DiscreteLinearModel,
    DiscreteLinearModelUCB, DiscreteLinearModelThompsonSampling, ParametricLinearModel,
    ParametricLinearModelUCB, ParametricLinearModelThompsonSampling
agents.bandit.bandit_tf_policy: BanditPolicyOverrides, make_model, after_init, BanditTFPolicy
agents.bandit.bandit_torch_model: OnlineLinearRegression, DiscreteLinearModel,
    DiscreteLinearModelUCB, DiscreteLinearModelThompsonSampling, ParametricLinearModel,
    ParametricLinearModelUCB, ParametricLinearModelThompsonSampling
agents.bandit.bandit_torch_policy: BanditPolicyOverrides, make_model_and_action_dist,
    init_cum_regret, BanditTorchPolicy
agents.callbacks: DefaultCallbacks, MemoryTrackingCallbacks, MultiCallbacks, RE3UpdateCallbacks
agents.cql: CQLTrainer, CQL_DEFAULT_CONFIG, CQLTorchPolicy
agents.cql.cql: CQL_DEFAULT_CONFIG, CQLTrainer
agents.cql.cql_tf_policy: MEAN_MIN, MEAN_MAX, policy_actions_repeat, q_values_repeat, cql_loss,
    cql_stats, ActorCriticOptimizerMixin, setup_early_mixins, compute_gradients_fn,
    apply_gradients_fn, CQLTFPolicy
agents.cql.cql_torch_policy: F, MEAN_MIN, MEAN_MAX, policy_actions_repeat, q_values_repeat,
    cql_loss, cql_stats, cql_optimizer_fn, cql_setup_late_mixins, compute_gradients_fn,
    apply_gradients_fn, CQLTorchPolicy
agents.ddpg: ApexDDPGTrainer, DDPGTrainer, DEFAULT_CONFIG, TD3Trainer
agents.ddpg.apex: APEX_DDPG_DEFAULT_CONFIG, ApexDDPGTrainer
agents.ddpg.ddpg: DEFAULT_CONFIG, DDPGTrainer
agents.ddpg.ddpg_tf_model: DDPGTFModel
agents.ddpg.ddpg_tf_policy: build_ddpg_models, get_distribution_inputs_and_class,
    ddpg_actor_critic_loss, build_apply_op, gradients_fn, build_ddpg_stats,
    ActorCriticOptimizerMixin, setup_early_mixins, ComputeTDErrorMixin, setup_mid_mixins,
    TargetNetworkMixin, setup_late_mixins, validate_spaces, DDPGTFPolicy
agents.ddpg.ddpg_torch_model: DDPGTorchModel
agents.ddpg.ddpg_torch_policy: build_ddpg_models_and_action_dist, ddpg_actor_critic_loss,
    make_ddpg_optimizers, apply_gradients_fn, build_ddpg_stats, before_init_fn,
    ComputeTDErrorMixin, setup_late_mixins, DDPGTorchPolicy
agents.ddpg.noop_model: NoopModel, TorchNoopModel
agents.ddpg.td3: TD3_DEFAULT_CONFIG, TD3Trainer
agents.dqn: ApexTrainer, APEX_DEFAULT_CONFIG, DQNTrainer, DEFAULT_CONFIG, DQNTFPolicy,
    DQNTorchPolicy, R2D2Trainer, R2D2_DEFAULT_CONFIG, R2D2TorchPolicy, SimpleQTrainer,
    SIMPLE_Q_DEFAULT_CONFIG, SimpleQTFPolicy, SimpleQTorchPolicy
agents.dqn.apex: APEX_DEFAULT_CONFIG, UpdateWorkerWeights, ApexTrainer
agents.dqn.distributional_q_tf_model: DistributionalQTFModel
agents.dqn.dqn: DEFAULT_CONFIG, calculate_rr_weights, DQNTrainer, GenericOffPolicyTrainer
agents.dqn.dqn_tf_policy: Q_SCOPE, Q_TARGET_SCOPE, PRIO_WEIGHTS, QLoss, ComputeTDErrorMixin,
    build_q_model, get_distribution_inputs_and_class, build_q_losses, adam_optimizer,
    clip_gradients, build_q_stats, setup_mid_mixins, setup_late_mixins, compute_q_values,
    postprocess_nstep_and_prio, DQNTFPolicy
agents.dqn.dqn_torch_model: DQNTorchModel
agents.dqn.dqn_torch_policy: F, QLoss, ComputeTDErrorMixin, build_q_model_and_distribution,
    get_distribution_inputs_and_class, build_q_losses, adam_optimizer, build_q_stats,
    setup_early_mixins, before_loss_init, compute_q_values, grad_process_and_td_error_fn,
    extra_action_out_fn, DQNTorchPolicy
agents.dqn.learner_thread: LEARNER_QUEUE_MAX_SIZE, LearnerThread
agents.dqn.r2d2: R2D2_DEFAULT_CONFIG, R2D2Trainer
agents.dqn.r2d2_tf_policy: build_r2d2_model, r2d2_loss, h_function, h_inverse,
    ComputeTDErrorMixin, get_distribution_inputs_and_class, adam_optimizer, build_q_stats,
    setup_early_mixins, before_loss_init, R2D2TFPolicy
agents.dqn.r2d2_torch_policy: F, build_r2d2_model_and_distribution, r2d2_loss, h_function,
    h_inverse, ComputeTDErrorMixin, build_q_stats, setup_early_mixins, before_loss_init,
    grad_process_and_td_error_fn, extra_action_out_fn, R2D2TorchPolicy
agents.dqn.simple_q: DEFAULT_CONFIG, SimpleQTrainer
agents.dqn.simple_q_tf_policy: Q_SCOPE, Q_TARGET_SCOPE, TargetNetworkMixin, build_q_models,
    get_distribution_inputs_and_class, build_q_losses, compute_q_values, setup_late_mixins,
    SimpleQTFPolicy
agents.dqn.simple_q_torch_policy: F, TargetNetworkMixin, build_q_model_and_distribution,
    build_q_losses, stats_fn, extra_action_out_fn, setup_late_mixins, SimpleQTorchPolicy
agents.dreamer: DREAMERTrainer, DEFAULT_CONFIG
agents.dreamer.dreamer: DEFAULT_CONFIG, EpisodicBuffer, total_sampled_timesteps,
    DreamerIteration, DREAMERTrainer
agents.dreamer.dreamer_model: ActFunc, ConvEncoder, ConvDecoder, DenseDecoder, ActionDecoder,
    RSSM, DreamerModel
agents.dreamer.dreamer_torch_policy: compute_dreamer_loss, lambda_return, log_summary,
    dreamer_loss, build_dreamer_model, action_sampler_fn, dreamer_stats, dreamer_optimizer_fn,
    preprocess_episode, DreamerTorchPolicy
agents.dreamer.utils: FreezeParameters
agents.es: ESTrainer, DEFAULT_CONFIG, ESTFPolicy, ESTorchPolicy
agents.es.es: Result, DEFAULT_CONFIG, create_shared_noise, SharedNoiseTable, Worker,
    get_policy_class, ESTrainer
agents.es.es_tf_policy: rollout, make_session, ESTFPolicy
agents.es.es_torch_policy: before_init, after_init, make_model_and_action_dist, ESTorchPolicy
agents.es.optimizers: Optimizer, SGD, Adam
agents.es.utils: compute_ranks, compute_centered_ranks, itergroups, batched_weighted_sum
agents.impala: DEFAULT_CONFIG, ImpalaTrainer
agents.impala.impala: DEFAULT_CONFIG, make_learner_thread, gather_experiences_directly,
    BroadcastUpdateLearnerWeights, ImpalaTrainer
agents.impala.vtrace_tf: VTraceFromLogitsReturns, VTraceReturns,
    log_probs_from_logits_and_actions, multi_log_probs_from_logits_and_actions, from_logits,
    multi_from_logits, from_importance_weights, get_log_rhos
agents.impala.vtrace_tf_policy: VTraceLoss, build_vtrace_loss, stats, grad_stats,
    choose_optimizer, clip_gradients, setup_mixins, VTraceTFPolicy
agents.impala.vtrace_torch: log_probs_from_logits_and_actions,
    multi_log_probs_from_logits_and_actions, from_logits, multi_from_logits,
    from_importance_weights, get_log_rhos
agents.impala.vtrace_torch_policy: VTraceLoss, build_vtrace_loss, make_time_major, stats,
    choose_optimizer, setup_mixins, VTraceTorchPolicy
agents.maml: MAMLTrainer, DEFAULT_CONFIG
agents.maml.maml: DEFAULT_CONFIG, set_worker_tasks, MetaUpdate, post_process_metrics,
    inner_adaptation, MAMLTrainer
agents.maml.maml_tf_policy: PPOLoss, WorkerLoss, MAMLLoss, maml_loss, maml_stats, KLCoeffMixin,
    maml_optimizer_fn, setup_mixins, MAMLTFPolicy
agents.maml.maml_torch_policy: PPOLoss, WorkerLoss, MAMLLoss, maml_loss, maml_stats,
    KLCoeffMixin, maml_optimizer_fn, setup_mixins, MAMLTorchPolicy
agents.marwil: BCTrainer, BC_DEFAULT_CONFIG, MARWILTrainer, DEFAULT_CONFIG, MARWILTFPolicy,
    MARWILTorchPolicy
agents.marwil.bc: BC_DEFAULT_CONFIG, BCTrainer
agents.marwil.marwil: DEFAULT_CONFIG, MARWILTrainer
agents.marwil.marwil_tf_policy: ValueNetworkMixin, postprocess_advantages, MARWILLoss,
    marwil_loss, stats, setup_mixins, MARWILTFPolicy
agents.marwil.marwil_torch_policy: marwil_loss, stats, setup_mixins, MARWILTorchPolicy
agents.mbmpo: MBMPOTrainer, DEFAULT_CONFIG
agents.mbmpo.mbmpo: DEFAULT_CONFIG, METRICS_KEYS, MetaUpdate, post_process_metrics,
    inner_adaptation, fit_dynamics, sync_ensemble, sync_stats, post_process_samples,
    MBMPOTrainer
agents.mbmpo.mbmpo_torch_policy: validate_spaces, make_model_and_action_dist, MBMPOTorchPolicy
agents.mbmpo.model_ensemble: TDModel, normalize, denormalize, mean_std_stats, process_samples,
    DynamicsEnsembleCustomModel
agents.mbmpo.utils: LinearFeatureBaseline, calculate_gae_advantages, MBMPOExploration
agents.mock:
agents.pg: DEFAULT_CONFIG, PGConfig, PGTrainer, pg_tf_loss, PGTFPolicy, pg_torch_loss,
    PGTorchPolicy, post_process_advantages
agents.pg.default_config:
agents.pg.pg: PGConfig, DEFAULT_CONFIG, PGTrainer
agents.pg.pg_tf_policy: pg_tf_loss, pg_loss_stats, PGTFPolicy
agents.pg.pg_torch_policy: pg_torch_loss, pg_loss_stats, PGTorchPolicy
agents.pg.utils: post_process_advantages
agents.ppo: PPOConfig, PPOTrainer, DEFAULT_CONFIG, PPOTFPolicy, PPOTorchPolicy, APPOTrainer,
    DDPPOTrainer
agents.ppo.appo: DEFAULT_CONFIG, UpdateTargetAndKL, APPOTrainer
agents.ppo.appo_tf_policy: POLICY_SCOPE, TARGET_POLICY_SCOPE, make_appo_model,
    appo_surrogate_loss, stats, postprocess_trajectory, add_values, TargetNetworkMixin,
    setup_mixins, setup_late_mixins, AsyncPPOTFPolicy
agents.ppo.appo_torch_policy: appo_surrogate_loss, stats, add_values, KLCoeffMixin,
    setup_early_mixins, setup_late_mixins, AsyncPPOTorchPolicy
agents.ppo.ddppo: DEFAULT_CONFIG, DDPPOTrainer
agents.ppo.ppo: PPOConfig, DEFAULT_CONFIG, UpdateKL, warn_about_bad_reward_scales, PPOTrainer
agents.ppo.ppo_tf_policy: ppo_surrogate_loss, kl_and_loss_stats, vf_preds_fetches,
    compute_and_clip_gradients, KLCoeffMixin, ValueNetworkMixin, setup_config, setup_mixins,
    postprocess_ppo_gae, PPOTFPolicy
agents.ppo.ppo_torch_policy: PPOTorchPolicy
agents.qmix: QMixTrainer, DEFAULT_CONFIG
agents.qmix.mixers: VDNMixer, QMixer
agents.qmix.model: RNNModel
agents.qmix.qmix: DEFAULT_CONFIG, QMixTrainer
agents.qmix.qmix_policy: QMixLoss, QMixTorchPolicy
agents.registry: ALGORITHMS, get_trainer_class
agents.sac: SACTrainer, DEFAULT_CONFIG, SACTFPolicy, SACTorchPolicy, RNNSACTrainer,
    RNNSAC_DEFAULT_CONFIG, RNNSACTorchPolicy
agents.sac.rnnsac: DEFAULT_CONFIG, RNNSACTrainer
agents.sac.rnnsac_torch_model: RNNSACTorchModel
agents.sac.rnnsac_torch_policy: F, build_rnnsac_model, build_sac_model_and_action_dist,
    action_distribution_fn, actor_critic_loss, RNNSACTorchPolicy
agents.sac.sac: OPTIMIZER_SHARED_CONFIGS, DEFAULT_CONFIG, SACTrainer
agents.sac.sac_tf_model: SACTFModel
agents.sac.sac_tf_policy: build_sac_model, postprocess_trajectory,
    get_distribution_inputs_and_class, sac_actor_critic_loss, compute_and_clip_gradients,
    apply_gradients, stats, ActorCriticOptimizerMixin, setup_early_mixins, setup_mid_mixins,
    setup_late_mixins, validate_spaces, SACTFPolicy
agents.sac.sac_torch_model: SACTorchModel
agents.sac.sac_torch_policy: F, build_sac_model_and_action_dist, action_distribution_fn,
    actor_critic_loss, stats, optimizer_fn, ComputeTDErrorMixin, TargetNetworkMixin,
    setup_late_mixins, SACTorchPolicy
agents.slateq: SlateQTrainer, DEFAULT_CONFIG, SlateQTFPolicy, SlateQTorchPolicy
agents.slateq.slateq: DEFAULT_CONFIG, calculate_round_robin_weights, SlateQTrainer
agents.slateq.slateq_tf_model: SlateQTFModel
agents.slateq.slateq_tf_policy: build_slateq_model, build_slateq_losses, build_slateq_stats,
    action_distribution_fn, get_per_slate_q_values, score_documents, setup_early,
    setup_mid_mixins, setup_late_mixins, rmsprop_optimizer, SlateQTFPolicy
agents.slateq.slateq_torch_model: F, QValueModel, UserChoiceModel, SlateQTorchModel
agents.slateq.slateq_torch_policy: build_slateq_model_and_distribution, build_slateq_losses,
    build_slateq_stats, action_distribution_fn, get_per_slate_q_values, score_documents,
    setup_early, optimizer_fn, postprocess_fn_add_next_actions_for_sarsa, setup_late_mixins,
    SlateQTorchPolicy
agents.trainer: MAX_WORKER_FAILURE_RETRIES, COMMON_CONFIG, with_common_config, Trainer
agents.trainer_config: TrainerConfig
env: BaseEnv, EnvContext, ExternalEnv, ExternalMultiAgentEnv, MultiAgentEnv, PolicyClient,
    PolicyServerInput, RemoteBaseEnv, VectorEnv, DMEnv, DMCEnv, GroupAgentsWrapper,
    PettingZooEnv, ParallelPettingZooEnv, Unity3DEnv
env.apis:
env.apis.task_settable_env: TaskType, TaskSettableEnv
env.base_env: ASYNC_RESET_RETURN, BaseEnv, with_dummy_agent_id, convert_to_base_env
env.env_context: EnvContext
env.external_env: ExternalEnv, ExternalEnvWrapper
env.external_multi_agent_env: ExternalMultiAgentEnv
env.multi_agent_env: ENV_STATE, MultiAgentEnv, make_multi_agent, MultiAgentEnvWrapper
env.policy_client: PolicyClient
env.policy_server_input: PolicyServerInput
env.remote_base_env: RemoteBaseEnv
env.remote_vector_env: RemoteVectorEnv
env.utils: gym_env_creator, VideoMonitor, record_env_wrapper
env.vector_env: VectorEnv, VectorEnvWrapper
env.wrappers:
env.wrappers.atari_wrappers: is_atari, get_wrapper_by_cls, MonitorEnv, NoopResetEnv,
    ClipRewardEnv, FireResetEnv, EpisodicLifeEnv, MaxAndSkipEnv, WarpFrame, FrameStack,
    FrameStackTrajectoryView, ScaledFloatFrame, wrap_deepmind
env.wrappers.dm_control_wrapper: DMCEnv
env.wrappers.dm_env_wrapper: DMEnv
env.wrappers.exception_wrapper: TooManyResetAttemptsException, ResetOnExceptionWrapper
env.wrappers.group_agents_wrapper: GROUP_REWARDS, GROUP_INFO, GroupAgentsWrapper
env.wrappers.kaggle_wrapper: KaggleFootballMultiAgentEnv
env.wrappers.model_vector_env: model_vector_env
env.wrappers.open_spiel: OpenSpielEnv
env.wrappers.pettingzoo_env: PettingZooEnv, ParallelPettingZooEnv
env.wrappers.recsim: RecSimObservationSpaceWrapper, RecSimObservationBanditWrapper,
    RecSimResetWrapper, MultiDiscreteToDiscreteActionWrapper, recsim_gym_wrapper,
    make_recsim_env
env.wrappers.recsim_wrapper:
env.wrappers.uncertainty_wrappers: add_RewardUncertaintyEnvClassWrapper
env.wrappers.unity3d_env: Unity3DEnv
evaluate: EXAMPLE_USAGE, create_parser, RolloutSaver, run, DefaultMapping,
    default_policy_agent_mapping, keep_going, rollout, main
evaluation: Episode, MultiAgentEpisode, RolloutWorker, SampleBatchBuilder,
    MultiAgentSampleBatchBuilder, SyncSampler, AsyncSampler, compute_advantages,
    collect_metrics, SampleBatch, MultiAgentBatch
evaluation.collectors:
evaluation.collectors.sample_collector: SampleCollector
evaluation.collectors.simple_list_collector: to_float_np_array, SimpleListCollector
evaluation.episode: Episode, MultiAgentEpisode
evaluation.metrics: RolloutMetrics, extract_stats, get_learner_stats, collect_metrics,
    collect_episodes, summarize_episodes
evaluation.observation_function: ObservationFunction
evaluation.postprocessing: Postprocessing, adjust_nstep, compute_advantages,
    compute_gae_for_sample_batch, discount_cumsum
evaluation.rollout_worker: get_global_worker, RolloutWorker
evaluation.sample_batch_builder: to_float_array, SampleBatchBuilder,
    MultiAgentSampleBatchBuilder
evaluation.sampler: PolicyEvalData, StateBatch, NewEpisodeDefaultDict, SamplerInput,
    SyncSampler, AsyncSampler
evaluation.worker_set: T, WorkerSet
execution: Concurrently, Enqueue, Dequeue, LearnerThread, StandardMetricsReporting,
    CollectMetrics, OncePerTimeInterval, OncePerTimestepsElapsed, MultiGPULearnerThread,
    ReplayBuffer, PrioritizedReplayBuffer, MultiAgentReplayBuffer, StoreToReplayBuffer, Replay,
    SimpleReplayBuffer, MixInReplay, ParallelRollouts, AsyncGradients, ConcatBatches,
    SelectExperiences, StandardizeFields, synchronous_parallel_sample, TrainOneStep,
    MultiGPUTrainOneStep, ComputeGradients, ApplyGradients, AverageGradients,
    UpdateTargetNetwork, train_one_step
execution.buffers: MinibatchBuffer
execution.buffers.minibatch_buffer: MinibatchBuffer
execution.buffers.mixin_replay_buffer: MixInMultiAgentReplayBuffer
execution.buffers.multi_agent_replay_buffer: MultiAgentReplayBuffer, ReplayActor
execution.buffers.replay_buffer: warn_replay_capacity, warn_replay_buffer_size, ReplayBuffer,
    PrioritizedReplayBuffer
execution.common: STEPS_SAMPLED_COUNTER, AGENT_STEPS_SAMPLED_COUNTER, STEPS_TRAINED_COUNTER,
    STEPS_TRAINED_THIS_ITER_COUNTER, AGENT_STEPS_TRAINED_COUNTER
execution.concurrency_ops: Concurrently, Enqueue, Dequeue
execution.learner_thread: LearnerThread
execution.metric_ops: StandardMetricsReporting, CollectMetrics, OncePerTimeInterval,
    OncePerTimestepsElapsed
execution.multi_gpu_impl: LocalSyncParallelOptimizer
execution.multi_gpu_learner: TFMultiGPULearner
execution.multi_gpu_learner_thread: MultiGPULearnerThread
execution.parallel_requests: asynchronous_parallel_requests, wait_asynchronous_requests
execution.replay_ops: StoreToReplayBuffer, Replay, WaitUntilTimestepsElapsed,
    SimpleReplayBuffer, MixInReplay
execution.rollout_ops: synchronous_parallel_sample, ParallelRollouts, AsyncGradients,
    ConcatBatches, SelectExperiences, standardize_fields, StandardizeFields
execution.segment_tree: SegmentTree, SumSegmentTree, MinSegmentTree
execution.train_ops: train_one_step, multi_gpu_train_one_step, TrainOneStep,
    MultiGPUTrainOneStep, TrainTFMultiGPU, ComputeGradients, ApplyGradients, AverageGradients,
    UpdateTargetNetwork
execution.tree_agg: Aggregator, gather_experiences_tree_aggregation
models: ActionDistribution, ModelCatalog, MODEL_DEFAULTS, ModelV2, Preprocessor
models.action_dist: ActionDistribution
models.catalog: MODEL_DEFAULTS, ModelCatalog
models.jax:
models.jax.fcnet: FullyConnectedNetwork
models.jax.jax_action_dist: JAXDistribution, JAXCategorical
models.jax.jax_modelv2: JAXModelV2
models.jax.misc: SlimFC
models.modelv2: ModelV2, flatten, restore_original_dimensions
models.preprocessors: ATARI_OBS_SHAPE, ATARI_RAM_OBS_SHAPE, OBS_VALIDATION_INTERVAL,
    Preprocessor, GenericPixelPreprocessor, AtariRamPreprocessor, OneHotPreprocessor,
    NoPreprocessor, TupleFlatteningPreprocessor, DictFlatteningPreprocessor,
    RepeatedValuesPreprocessor, get_preprocessor, legacy_patch_shapes
models.repeated_values: RepeatedValues
models.tf: TFModelV2, FullyConnectedNetwork, RecurrentNetwork, VisionNetwork
models.tf.attention_net: PositionwiseFeedforward, TrXLNet, GTrXLNet, AttentionWrapper,
    Keras_GTrXLNet, Keras_AttentionWrapper
models.tf.complex_input_net: ComplexInputNetwork
models.tf.fcnet: FullyConnectedNetwork, Keras_FullyConnectedNetwork
models.tf.layers: GRUGate, NoisyLayer, PositionalEmbedding, RelativeMultiHeadAttention,
    SkipConnection, MultiHeadAttention
models.tf.layers.gru_gate: GRUGate
models.tf.layers.multi_head_attention: MultiHeadAttention
models.tf.layers.noisy_layer: NoisyLayer
models.tf.layers.relative_multi_head_attention: RelativeMultiHeadAttention, PositionalEmbedding
models.tf.layers.skip_connection: SkipConnection
models.tf.misc: normc_initializer, conv2d, linear, flatten
models.tf.recurrent_net: RecurrentNetwork, LSTMWrapper, Keras_LSTMWrapper
models.tf.tf_action_dist: TFActionDistribution, Categorical, MultiCategorical,
    SlateMultiCategorical, GumbelSoftmax, DiagGaussian, SquashedGaussian, Beta, Deterministic,
    MultiActionDistribution, Dirichlet
models.tf.tf_modelv2: TFModelV2
models.tf.visionnet: VisionNetwork, Keras_VisionNetwork
models.torch:
models.torch.attention_net: GTrXLNet, AttentionWrapper
models.torch.complex_input_net: ComplexInputNetwork
models.torch.fcnet: FullyConnectedNetwork
models.torch.misc: normc_initializer, same_padding, SlimConv2d, SlimFC, AppendBiasLayer,
    Reshape
models.torch.modules: GRUGate, MultiHeadAttention, RelativeMultiHeadAttention, SkipConnection
models.torch.modules.convtranspose2d_stack: ConvTranspose2DStack
models.torch.modules.gru_gate: GRUGate
models.torch.modules.multi_head_attention: MultiHeadAttention
models.torch.modules.noisy_layer: NoisyLayer
models.torch.modules.relative_multi_head_attention: RelativePositionEmbedding,
    RelativeMultiHeadAttention
models.torch.modules.skip_connection: SkipConnection
models.torch.recurrent_net: RecurrentNetwork, LSTMWrapper
models.torch.torch_action_dist: TorchDistributionWrapper, TorchCategorical,
    TorchMultiCategorical, TorchSlateMultiCategorical, TorchDiagGaussian,
    TorchSquashedGaussian, TorchBeta, TorchDeterministic, TorchMultiActionDistribution,
    TorchDirichlet
models.torch.torch_modelv2: TorchModelV2
models.torch.visionnet: VisionNetwork
models.utils: get_activation_fn, get_filter_config, get_initializer
offline: D4RLReader, DatasetReader, get_dataset_and_shards, DatasetWriter, IOContext,
    InputReader, MixedInput, JsonReader, JsonWriter, OutputWriter, NoopOutput,
    get_offline_io_resource_bundles, ShuffledInput
offline.d4rl_reader: D4RLReader, convert_to_batch
offline.dataset_reader: DEFAULT_NUM_CPUS_PER_TASK, get_resource_bundles,
    get_dataset_and_shards, DatasetReader
offline.dataset_writer: DatasetWriter
offline.input_reader: InputReader
offline.io_context: IOContext
offline.is_estimator: ImportanceSamplingEstimator
offline.json_reader: WINDOWS_DRIVES, from_json_data, JsonReader
offline.json_writer: WINDOWS_DRIVES, JsonWriter
offline.mixed_input: MixedInput
offline.off_policy_estimator: OffPolicyEstimate, OffPolicyEstimator
offline.output_writer: OutputWriter, NoopOutput
offline.resource: get_offline_io_resource_bundles
offline.shuffled_input: ShuffledInput
offline.wis_estimator: WeightedImportanceSamplingEstimator
policy: Policy, TorchPolicy, TFPolicy, build_policy_class, build_torch_policy, build_tf_policy
policy.dynamic_tf_policy: TOWER_SCOPE_NAME, DynamicTFPolicy, TFMultiGPUTowerStack, Tower,
    make_divisible_by, average_gradients
policy.eager_tf_policy: convert_eager_inputs, convert_eager_outputs, check_too_many_retraces,
    EagerTFPolicy, traced_eager_policy, OptimizerWrapper, build_eager_tf_policy
policy.policy: PolicySpec, Policy
policy.policy_map: PolicyMap
policy.policy_template: build_policy_class
policy.rnn_sequencing: pad_batch_to_sequences_of_same_size, add_time_dimension,
    chop_into_sequences, timeslice_along_seq_lens_with_overlap
policy.sample_batch: DEFAULT_POLICY_ID, SampleBatch, MultiAgentBatch
policy.tf_policy: TFPolicy, LearningRateSchedule, EntropyCoeffSchedule
policy.tf_policy_template: build_tf_policy
policy.torch_policy: TorchPolicy, LearningRateSchedule, EntropyCoeffSchedule,
    DirectStepOptimizer
policy.torch_policy_template: build_torch_policy
policy.view_requirement: ViewRequirement
rollout: RolloutSaver
scripts: EXAMPLE_USAGE, cli
train: EXAMPLE_USAGE, create_parser, run, main
utils: partial, override, PublicAPI, DeveloperAPI, try_import_tf, try_import_tfp,
    try_import_torch, deprecation_warning, FilterManager, Filter, sigmoid, softmax, relu,
    one_hot, fc, lstm, SMALL_NUMBER, LARGE_INTEGER, MIN_LOG_NN_OUTPUT, MAX_LOG_NN_OUTPUT,
    check_env, LinearSchedule, PiecewiseSchedule, PolynomialSchedule, ExponentialSchedule,
    ConstantSchedule, check, check_compute_single_action, check_train_results,
    framework_iterator, merge_dicts, deep_update, add_mixins, force_list, NullContextManager
utils.actors: TaskPool, create_colocated_actors, try_create_colocated, split_colocated,
    create_colocated, drop_colocated
utils.annotations: override, PublicAPI, DeveloperAPI, ExperimentalAPI,
    OverrideToImplementCustomLogic, OverrideToImplementCustomLogic_CallToSuperRecommended,
    Deprecated
utils.compression: compression_supported, pack, pack_if_needed, unpack, unpack_if_needed,
    is_compressed
utils.debug: update_global_seed_if_necessary, check_memory_leaks, summarize
utils.debug.deterministic: update_global_seed_if_necessary
utils.debug.memory: Suspect, check_memory_leaks
utils.debug.summary: summarize
utils.deprecation: DEPRECATED_VALUE, deprecation_warning, Deprecated
utils.error: UnsupportedSpaceException, EnvError, ERR_MSG_NO_GPUS,
    ERR_MSG_INVALID_ENV_DESCRIPTOR, HOWTO_CHANGE_CONFIG
utils.exploration: Curiosity, Exploration, EpsilonGreedy, GaussianNoise,
    OrnsteinUhlenbeckNoise, ParameterNoise, PerWorkerEpsilonGreedy, PerWorkerGaussianNoise,
    PerWorkerOrnsteinUhlenbeckNoise, Random, RE3, SlateEpsilonGreedy, SlateSoftQ, SoftQ,
    StochasticSampling, ThompsonSampling, UpperConfidenceBound
utils.exploration.curiosity: F, Curiosity
utils.exploration.epsilon_greedy: EpsilonGreedy
utils.exploration.exploration: Exploration
utils.exploration.gaussian_noise: GaussianNoise
utils.exploration.ornstein_uhlenbeck_noise: OrnsteinUhlenbeckNoise
utils.exploration.parameter_noise: ParameterNoise
utils.exploration.per_worker_epsilon_greedy: PerWorkerEpsilonGreedy
utils.exploration.per_worker_gaussian_noise: PerWorkerGaussianNoise
utils.exploration.per_worker_ornstein_uhlenbeck_noise: PerWorkerOrnsteinUhlenbeckNoise
utils.exploration.random: Random
utils.exploration.random_encoder: MovingMeanStd, update_beta, compute_states_entropy, RE3
utils.exploration.slate_epsilon_greedy: SlateEpsilonGreedy
utils.exploration.slate_soft_q: SlateSoftQ
utils.exploration.soft_q: SoftQ
utils.exploration.stochastic_sampling: StochasticSampling
utils.exploration.thompson_sampling: ThompsonSampling
utils.exploration.upper_confidence_bound: UpperConfidenceBound
utils.filter: Filter, NoFilter, RunningStat, MeanStdFilter, ConcurrentMeanStdFilter, get_filter
utils.filter_manager: FilterManager
utils.framework: try_import_jax, try_import_tf, tf_function, try_import_tfp, NNStub,
    ModuleStub, try_import_torch, get_variable, get_activation_fn
utils.from_config: from_config, from_file, lookup_type
utils.images: resize, rgb2gray, imread
utils.memory:
utils.metrics: NUM_ENV_STEPS_SAMPLED, NUM_AGENT_STEPS_SAMPLED, NUM_ENV_STEPS_TRAINED,
    NUM_AGENT_STEPS_TRAINED, LAST_TARGET_UPDATE_TS, NUM_TARGET_UPDATES,
    TRAINING_ITERATION_TIMER, APPLY_GRADS_TIMER, COMPUTE_GRADS_TIMER,
    SYNCH_WORKER_WEIGHTS_TIMER, GRAD_WAIT_TIMER, SAMPLE_TIMER, LEARN_ON_BATCH_TIMER,
    LOAD_BATCH_TIMER, TARGET_NET_UPDATE_TIMER, WORKER_UPDATE_TIMER
utils.metrics.learner_info: LEARNER_INFO, LEARNER_STATS_KEY, LearnerInfoBuilder,
    all_tower_reduce
utils.metrics.window_stat: WindowStat
utils.numpy: SMALL_NUMBER, LARGE_INTEGER, MIN_LOG_NN_OUTPUT, MAX_LOG_NN_OUTPUT, aligned_array,
    concat_aligned, convert_to_numpy, fc, flatten_inputs_to_1d_tensor, make_action_immutable,
    huber_loss, l2_loss, lstm, one_hot, relu, sigmoid, softmax
utils.pre_checks:
utils.pre_checks.env: check_env, check_gym_environments, check_multiagent_environments,
    check_base_env
utils.pre_checks.multi_agent: check_multi_agent
utils.replay_buffers: MultiAgentMixInReplayBuffer, MultiAgentPrioritizedReplayBuffer,
    MultiAgentReplayBuffer, ReplayMode, PrioritizedReplayBuffer, ReplayBuffer, StorageUnit,
    ReservoirBuffer, SimpleReplayBuffer
utils.replay_buffers.multi_agent_mixin_replay_buffer: MultiAgentMixInReplayBuffer
utils.replay_buffers.multi_agent_prioritized_replay_buffer: MultiAgentPrioritizedReplayBuffer,
    ReplayActor
utils.replay_buffers.multi_agent_replay_buffer: ReplayMode, merge_dicts_with_warning,
    MultiAgentReplayBuffer, ReplayActor
utils.replay_buffers.prioritized_replay_buffer: PrioritizedReplayBuffer
utils.replay_buffers.replay_buffer: StorageUnit, ReplayBuffer
utils.replay_buffers.reservoir_buffer: ReservoirBuffer
utils.replay_buffers.simple_replay_buffer: SimpleReplayBuffer
utils.replay_buffers.utils: update_priorities_in_replay_buffer, sample_min_n_steps_from_buffer,
    validate_buffer_config, warn_replay_buffer_capacity
utils.schedules: Schedule, ConstantSchedule, LinearSchedule, PiecewiseSchedule,
    PolynomialSchedule, ExponentialSchedule
utils.schedules.constant_schedule: ConstantSchedule
utils.schedules.exponential_schedule: ExponentialSchedule
utils.schedules.linear_schedule: LinearSchedule
utils.schedules.piecewise_schedule: PiecewiseSchedule
utils.schedules.polynomial_schedule: PolynomialSchedule
utils.schedules.schedule: Schedule
utils.sgd: standardized, minibatches, do_minibatch_sgd
utils.spaces:
utils.spaces.flexdict: FlexDict
utils.spaces.repeated: Repeated
utils.spaces.simplex: Simplex
utils.spaces.space_utils: flatten_space, get_base_struct_from_space, get_dummy_batch_for_space,
    flatten_to_single_ndarray, unbatch, clip_action, unsquash_action, normalize_action,
    convert_element_to_space_type
utils.test_utils: framework_iterator, check, check_compute_single_action,
    check_learning_achieved, check_train_results, run_learning_tests_from_yaml,
    check_same_batch
utils.tf_run_builder: TFRunBuilder, run_timeline
utils.tf_utils: explained_variance, flatten_inputs_to_1d_tensor, get_gpu_devices,
    get_placeholder, get_tf_eager_cls_if_necessary, huber_loss, make_tf_callable,
    minimize_and_clip, one_hot, reduce_mean_ignore_inf, scope_vars, zero_logps_from_actions
utils.threading: with_lock
utils.timer: TimerStat
utils.torch_utils: FLOAT_MIN, FLOAT_MAX, apply_grad_clipping, atanh,
    concat_multi_gpu_td_errors, convert_to_non_torch_type, convert_to_torch_tensor,
    explained_variance, flatten_inputs_to_1d_tensor, global_norm, huber_loss, l2_loss,
    minimize_and_clip, one_hot, reduce_mean_ignore_inf, sequence_mask, set_torch_seed,
    softmax_cross_entropy_with_logits, Swish
utils.typing: TensorType, TensorStructType, TensorShape, TrainerConfigDict,
    PartialTrainerConfigDict, ModelConfigDict, FromConfigSpec, EnvConfigDict, EnvID, EnvType,
    EnvCreator, AgentID, PolicyID, MultiAgentPolicyConfigDict, PolicyState, EpisodeID,
    UnrollID, MultiAgentDict, MultiEnvDict, EnvObsType, EnvActionType, EnvInfoDict, FileType,
    ViewRequirementsDict, ResultDict, LocalOptimizer, GradInfoDict, LearnerStatsDict,
    ModelGradients, ModelWeights, ModelInputDict, SampleBatchType, SpaceStruct, T
utils.window_stat: WindowStat
"""


# --------------------------------------------------------------------------------------
# Classification
# --------------------------------------------------------------------------------------


class Verdict:
    """What an RLlib name is in corral.

    Attributes:
        kind: "real" (corral code), "tf" (TensorFlow/JAX-only stand-in), "unbuilt" (a
            feature corral does not build), "missing" (an RLlib helper corral leaves out)
            or "pending" (another part of corral provides it; stand-in until then).
        module: the module the name finally resolves to: relative to ``corral`` for corral
            modules (``""`` is ``corral`` itself), absolute otherwise (e.g. ``"torch.nn"``).
        name: the attribute there; ``""`` means the module itself.
        detail: the feature name, the torch counterpart, the reason or the provider.
    """

    __slots__ = ("detail", "kind", "module", "name")

    def __init__(self, kind: str, module: str, name: str, detail: str = "") -> None:
        self.kind = kind
        self.module = module
        self.name = name
        self.detail = detail

    @property
    def is_stand_in(self) -> bool:
        """Whether corral serves a stand-in for this name (anything but "real")."""
        return self.kind != "real"

    @property
    def rllib_path(self) -> str:
        """RLlib's dotted path of the final name (``ray.rllib.X.Y``)."""
        return _rllib_path(self.module, self.name)

    def __repr__(self) -> str:
        return f"Verdict({self.kind!r}, {self.module!r}, {self.name!r}, {self.detail!r})"


def _rllib_path(module: str, name: str) -> str:
    base = "ray.rllib" + (f".{module}" if module else "")
    return f"{base}.{name}" if name else base


def _corral_path(module: str, name: str = "") -> str:
    base = "corral" + (f".{module}" if module else "")
    return f"{base}.{name}" if name else base


_surface_cache: dict[str, tuple[str, ...]] | None = None
_modules_cache: frozenset[str] | None = None
_name_rules: dict[str, tuple[str, str]] | None = None
_defining: dict[str, list[str]] | None = None


def surface() -> dict[str, tuple[str, ...]]:
    """RLlib 1.13's modules (relative to ``ray.rllib``; ``""`` is the root) -> public names."""
    global _surface_cache
    if _surface_cache is None:
        table: dict[str, list[str]] = {}
        current: list[str] = []
        for line in _SNAPSHOT.splitlines():
            if not line.strip():
                continue
            if line[0].isspace():
                current.extend(n.strip() for n in line.split(",") if n.strip())
                continue
            module, _, names = line.partition(":")
            module = "" if module == "." else module
            current = table.setdefault(module, [])
            current.extend(n.strip() for n in names.split(",") if n.strip())
        _surface_cache = {m: tuple(ns) for m, ns in table.items()}
    return _surface_cache


def _modules() -> frozenset[str]:
    """Every module of the table and every package above one (they must exist too)."""
    global _modules_cache
    if _modules_cache is None:
        found: set[str] = set()
        for module in surface():
            parts = module.split(".") if module else []
            for i in range(1, len(parts) + 1):
                found.add(".".join(parts[:i]))
        _modules_cache = frozenset(found)
    return _modules_cache


def _rules() -> dict[str, tuple[str, str]]:
    """``"module:Name"`` -> (kind, detail) for the names listed one by one."""
    global _name_rules
    if _name_rules is None:
        rules: dict[str, tuple[str, str]] = {}
        for module, (reason, names) in _NOT_PROVIDED.items():
            for name in names.split():
                rules[f"{module}:{name}"] = ("missing", reason)
        for feature in NOT_BUILT:
            for key in feature.names:
                rules[key] = ("unbuilt", feature.name)
        for key, provider in _PENDING_BY.items():
            if ":" in key:
                rules[key] = ("pending", provider)
        for key in _TF_NAMES:
            rules[key] = ("tf", "")
        _name_rules = rules
    return _name_rules


def _feature_of(module: str) -> Feature | None:
    best: tuple[int, Feature | None] = (-1, None)
    for feature in NOT_BUILT:
        for prefix in feature.modules:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best[0]:
                best = (len(prefix), feature)
    return best[1]


def _pending_of(module: str) -> str | None:
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        provider = _PENDING_BY.get(".".join(parts[:i]))
        if provider is not None:
            return provider
    return None


_TF_NAME = re.compile(r"TF(?![a-z])|^Keras_|^JAX")


def _is_tf(module: str, name: str) -> bool:
    parts = module.split(".")
    if "tf" in parts or "jax" in parts:
        return True
    if "tf" in parts[-1].split("_"):
        return True
    return bool(_TF_NAME.search(name))


def _defining_module(module: str, name: str) -> str | None:
    """The deepest module below `module` that lists `name` (RLlib's re-export source)."""
    global _defining
    if _defining is None:
        index: dict[str, list[str]] = {}
        for mod, names in surface().items():
            for n in names:
                index.setdefault(n, []).append(mod)
        _defining = index
    leaf = module.rsplit(".", 1)[-1]

    def rank(candidate: str) -> tuple[int, bool, bool]:
        # Deepest first; among equals, a module corral builds, then the package's namesake
        # (`agents.ppo.DEFAULT_CONFIG` is PPO's, from `agents.ppo.ppo`, not APPO's).
        return (
            candidate.count("."),
            _feature_of(candidate) is None,
            candidate.rsplit(".", 1)[-1] == leaf,
        )

    below = [c for c in _defining.get(name, ()) if (c.startswith(module + ".") if module else c)]
    return max(below, key=rank) if below else None


def _counterpart(module: str, name: str) -> str:
    """The corral (torch) name to use instead of a TF/JAX-only RLlib name."""
    explicit = _TF_COUNTERPARTS.get(f"{module}:{name}") or _TF_COUNTERPARTS.get(module)
    if explicit:
        return explicit
    parts = ["torch" if p in ("tf", "jax") else p for p in module.split(".")]
    leaf = parts[-1].split("_")
    leaf = ["torch" if t in ("tf", "jax") else t for t in leaf]
    parts[-1] = "_".join(leaf)
    if parts[-1] in ("dynamic_torch_policy", "eager_torch_policy"):
        parts[-1] = "torch_policy"
    target = ".".join(parts)
    renamed = name.replace("TF", "Torch").replace("JAX", "Torch").removeprefix("Keras_")
    table = surface()
    if target in table:
        for candidate in (name, renamed, "Torch" + name):
            if candidate in table[target]:
                return _corral_path(target, candidate)
        return _corral_path(target)
    for candidate in (renamed, name):
        home = _defining_module(module.rsplit(".", 1)[0] if "." in module else "", candidate)
        if home is not None and not _is_tf(home, candidate):
            return _corral_path(home, candidate)
    return "corral's torch classes (framework='torch')"


def classify(module: str, name: str, _depth: int = 0) -> Verdict:
    """What RLlib 1.13's ``ray.rllib.<module>.<name>`` is in corral.

    Args:
        module: the module path relative to ``ray.rllib`` / ``corral`` (``""``: the root).
        name: a public name of that module.

    Returns:
        The :class:`Verdict`, following re-exports to the module that finally holds the name.
    """
    if _depth > 20:
        raise RecursionError(f"alias cycle at {module}:{name}")
    key = f"{module}:{name}"
    target = _ALIASES.get(key)
    if target is not None:
        tmodule, _, tname = target.partition(":")
        if tmodule == "corral" or tmodule.startswith("corral."):
            # Final: an alias names real corral code (no further table lookups).
            return Verdict("real", tmodule[7:], tname or name)
        return Verdict("real", tmodule, tname, "external")
    if name == "F" and not _is_tf(module, name):
        # RLlib's torch modules re-export `F = nn.functional`.
        return Verdict("real", "torch.nn.functional", "", "external")
    rule = _rules().get(key)
    if rule is not None:
        kind, detail = rule
        if kind == "tf":
            detail = _counterpart(module, name)
        return Verdict(kind, module, name, detail)
    feature = _feature_of(module)
    if feature is not None:
        return Verdict("unbuilt", module, name, feature.name)
    home = _defining_module(module, name)
    if home is not None:
        return classify(home, name, _depth + 1)
    if _is_tf(module, name):
        return Verdict("tf", module, name, _counterpart(module, name))
    provider = _pending_of(module)
    if provider is not None:
        return Verdict("pending", module, name, provider)
    return Verdict("real", module, name)


def not_built_algorithms() -> dict[str, Feature]:
    """``get_trainer_class`` names of algorithms corral does not build -> their feature."""
    return {algo: f for f in NOT_BUILT for algo in f.algorithms}


def markdown_not_built() -> str:
    """The README's list of what corral does not build (generated from :data:`NOT_BUILT`)."""
    lines = []
    for feature in NOT_BUILT:
        algos = f" (`{'`, `'.join(feature.algorithms)}`)" if feature.algorithms else ""
        where = f" (`corral.{feature.modules[0]}`)" if feature.modules else ""
        lines.append(f"- **{feature.name}**{algos}: {feature.what}{where}")
    lines.append(
        "- TensorFlow and JAX: every `*TFPolicy`, `TFModelV2`, `models.tf.*`, `models.jax.*` and "
        "`tf_utils` name imports, and raises `TensorFlowOnlyError` naming its torch counterpart."
    )
    lines.append(
        "- Single RLlib helpers of modules corral builds (mostly the functions RLlib's "
        "function-built policies are made of; corral's policies are classes), listed with the "
        "reason in `corral/_surface.py` (`_NOT_PROVIDED`)."
    )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# Stand-ins
# --------------------------------------------------------------------------------------

_stand_ins: dict[tuple[str, str], type] = {}


def _message(verdict: Verdict, used: str) -> str:
    path = verdict.rllib_path
    kind = verdict.kind
    if kind == "tf":
        return (
            f"{used}: `{path}` is TensorFlow/JAX-only and corral runs on PyTorch only; use "
            f"{verdict.detail} (framework='torch') instead."
        )
    if kind == "unbuilt":
        feature = next(f for f in NOT_BUILT if f.name == verdict.detail)
        return (
            f"{used}: `{path}` belongs to {feature.name} ({feature.what}), which corral does "
            "not build; the name exists only so that RLlib code importing it still imports."
        )
    if kind == "pending":
        return f"{used}: `{path}` is not built in corral yet (to come: {verdict.detail})."
    return f"{used}: corral does not provide RLlib's `{path}`: {verdict.detail}."


def _error(verdict: Verdict, used: str) -> Exception:
    cls = TensorFlowOnlyError if verdict.kind == "tf" else NotBuiltError
    return cls(_message(verdict, used))


def _verdict_of(cls: type) -> tuple[Verdict, type]:
    for klass in cls.__mro__:
        verdict = klass.__dict__.get("_corral_stand_in")
        if verdict is not None:
            return verdict, klass
    raise TypeError(f"{cls!r} is no corral stand-in")


class _StandInMeta(type):
    """Metaclass of stand-ins: any use but subclassing and introspection raises."""

    def __getattr__(cls, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        verdict, base = _verdict_of(cls)
        if verdict.kind == "tf" and attr in _TF_CLASS_FACTORY_METHODS:
            return _tf_class_factory(verdict, cls.__name__)
        raise _error(verdict, f"{cls.__name__}.{attr}")

    def __getitem__(cls, key: Any) -> Any:
        raise _error(_verdict_of(cls)[0], f"{cls.__name__}[{key!r}]")

    def __iter__(cls) -> Any:
        raise _error(_verdict_of(cls)[0], f"iterating {cls.__name__}")

    def __contains__(cls, item: Any) -> bool:
        raise _error(_verdict_of(cls)[0], f"`in {cls.__name__}`")

    def __repr__(cls) -> str:
        verdict, base = _verdict_of(cls)
        what = {"tf": "TensorFlow-only", "unbuilt": "not built", "pending": "not built yet"}
        state = what.get(verdict.kind, "not provided")
        return f"<corral stand-in {cls.__name__} for {verdict.rllib_path}: {state}>"


def _stand_in_new(cls: type, *args: Any, **kwargs: Any) -> Any:
    verdict, base = _verdict_of(cls)
    if verdict.kind == "tf" and base.__dict__.get("_corral_factory"):
        return _tf_class_factory(verdict, base.__name__)(*args, **kwargs)
    used = cls.__name__ if cls is base else f"{cls.__name__} (a subclass of {base.__name__})"
    raise _error(verdict, f"{used}(...)")


def _make_stand_in(verdict: Verdict, name: str, factory: bool = False) -> type:
    namespace = {
        "_corral_stand_in": verdict,
        "_corral_factory": factory,
        "__new__": _stand_in_new,
        "__doc__": _message(verdict, name),
        "__module__": _corral_path(verdict.module) if verdict.kind != "real" else "corral",
    }
    return _StandInMeta(name, (), namespace)


def _tf_class_factory(verdict: Verdict, default_name: str) -> Any:
    """``build_tf_policy(name=...)`` / ``X.with_updates(name=...)``: a new stand-in class."""

    def factory(*args: Any, **kwargs: Any) -> type:
        name = kwargs.get("name") or (args[0] if args and isinstance(args[0], str) else None)
        return _make_stand_in(verdict, str(name or default_name))

    return factory


def _stand_in(verdict: Verdict) -> type:
    key = (verdict.module, verdict.name)
    cls = _stand_ins.get(key)
    if cls is None:
        factory = f"{verdict.module}:{verdict.name}" in _TF_CLASS_FACTORIES
        cls = _make_stand_in(verdict, verdict.name or verdict.module.rsplit(".", 1)[-1], factory)
        _stand_ins[key] = cls
    return cls


def is_stand_in(obj: Any) -> bool:
    """Whether `obj` is one of this module's stand-ins (or a class derived from one)."""
    return isinstance(obj, _StandInMeta)


def stand_in_verdict(obj: Any) -> Verdict:
    """The :class:`Verdict` a stand-in was made for."""
    return _verdict_of(obj)[0]


# --------------------------------------------------------------------------------------
# The import mechanism
# --------------------------------------------------------------------------------------


def resolve(module: str, name: str) -> Any:
    """The object corral serves for ``corral.<module>.<name>`` when the module lacks it."""
    verdict = classify(module, name)
    elsewhere = (verdict.module, verdict.name) != (module, name)
    if verdict.kind == "pending" and elsewhere and verdict.detail != "external":
        # A re-export of a name still to come: the defining module decides (it holds the
        # real object once that lands, and serves the same stand-in until then).
        return getattr(importlib.import_module(_corral_path(verdict.module)), verdict.name)
    if verdict.kind != "real":
        return _stand_in(verdict)
    if verdict.detail == "external":
        target = importlib.import_module(verdict.module)
        return getattr(target, verdict.name) if verdict.name else target
    if not elsewhere:
        raise AttributeError(
            f"module {_corral_path(module)!r} has no attribute {name!r} (RLlib 1.13's "
            f"`{_rllib_path(module, name)}`, which corral/_surface.py says corral builds)"
        )
    target = importlib.import_module(_corral_path(verdict.module))
    return getattr(target, verdict.name) if verdict.name else target


def _module_getattr(module_obj: Any, module: str, name: str) -> Any:
    if name.startswith("__") or name not in surface().get(module, ()):
        raise AttributeError(f"module {_corral_path(module)!r} has no attribute {name!r}")
    value = resolve(module, name)
    # Cache it: later lookups are plain attribute reads, and identity holds.
    setattr(module_obj, name, value)
    return value


def _attach(module_obj: Any, module: str) -> None:
    """Gives a corral module the table's names it lacks (its own names always win)."""
    own = module_obj.__dict__.get("__getattr__")

    def __getattr__(name: str) -> Any:
        if own is not None:
            try:
                return own(name)
            except AttributeError:
                pass
        return _module_getattr(module_obj, module, name)

    module_obj.__getattr__ = __getattr__
    if "__path__" not in module_obj.__dict__ and any(
        m.startswith(module + ".") for m in _modules()
    ):
        # A plain-module file where RLlib has a package: let its table submodules be made.
        module_obj.__path__ = []


def _module_dir(module: str) -> Any:
    def __dir__() -> list[str]:
        return sorted(surface().get(module, ()))

    return __dir__


class _TableLoader:
    """Creates a module that has no file: an empty package served from the table."""

    @staticmethod
    def create_module(spec: Any) -> None:
        return None

    @staticmethod
    def exec_module(module_obj: Any) -> None:
        module = module_obj.__name__[7:]
        names = surface().get(module, ())
        module_obj.__doc__ = (
            f"RLlib 1.13's `{_rllib_path(module, '')}` in corral: its names are served from "
            "corral/_surface.py (corral code where corral builds them, stand-ins otherwise)."
        )
        module_obj.__all__ = list(names)
        module_obj.__dir__ = _module_dir(module)
        _attach(module_obj, module)


class _Loader:
    """Wraps a real module's loader: loads as usual, then attaches the table's names."""

    def __init__(self, loader: Any, module: str) -> None:
        self._loader = loader
        self._module = module

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._loader, attr)

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module_obj: Any) -> None:
        self._loader.exec_module(module_obj)
        _attach(module_obj, self._module)


class SurfaceFinder:
    """The ``sys.meta_path`` finder for ``corral.*`` modules of the table."""

    @classmethod
    def find_spec(cls, fullname: str, path: Any = None, target: Any = None) -> Any:
        if not fullname.startswith("corral.") or fullname == "corral._surface":
            return None
        module = fullname[7:]
        if module not in _modules():
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None:
            return importlib.machinery.ModuleSpec(fullname, _TableLoader, is_package=True)
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Loader(spec.loader, module)
        return spec

    @classmethod
    def invalidate_caches(cls) -> None:
        return None


def install() -> None:
    """Puts :class:`SurfaceFinder` first on ``sys.meta_path`` (once), and serves the root's
    names (``corral.SampleBatch``...) through ``corral.__getattr__``."""
    if not any(f is SurfaceFinder for f in sys.meta_path):
        sys.meta_path.insert(0, SurfaceFinder)


def root_getattr(name: str) -> Any:
    """``corral.__getattr__``: RLlib's root names (``corral.SampleBatch``, ...), lazily."""
    root = sys.modules["corral"]
    return _module_getattr(root, "", name)
