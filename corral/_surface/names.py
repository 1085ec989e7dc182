"""The surface table's single names: RLlib helpers corral leaves out (:data:`_NOT_PROVIDED`),
names corral builds under another path (:data:`_ALIASES`) and the TensorFlow names the naming
rule misses.

The algorithms and features corral does not build are in :mod:`corral._surface.not_built`.
"""

from __future__ import annotations

# Single names of modules corral builds that corral leaves out: module -> (reason, names).
_FUNCTION_POLICY = (
    "it is one of the functions RLlib's function-built policies are made of; corral's torch "
    "policies are classes: subclass the policy and override the method (e.g. `loss`)"
)
_EXEC_PLAN = (
    "it is an operator of one of RLlib's own execution plans whose work corral's algorithm "
    "does inside its policy or `training_step` instead"
)
_NOT_PROVIDED: dict[str, tuple[str, str]] = {
    "": ("it is Ray's usage-statistics library (corral collects none)", "usage_lib"),
    "agents.maml.maml": (
        _EXEC_PLAN + " (MAML's inner adaptation and meta update run in `training_step`)",
        "MetaUpdate",
    ),
    "agents.mbmpo.mbmpo": (
        _EXEC_PLAN + " (MB-MPO's MAML rounds, meta updates and ensemble fits run in "
        "`training_step`)",
        "MetaUpdate",
    ),
    "evaluation.collectors.sample_collector": (
        "corral's samplers write preallocated buffers instead (corral.evaluation.sampler)",
        "SampleCollector",
    ),
    "evaluation.collectors.simple_list_collector": (
        "corral's samplers write preallocated buffers instead (corral.evaluation.sampler)",
        "to_float_np_array SimpleListCollector",
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
}

# Names corral builds under another path: "module:Name" -> "corral.where:Name" (or any
# importable "module:attr"; no attr: the module itself).
_ALIASES: dict[str, str] = {
    # The algorithm-specific operators of RLlib 1.13's execution plans.
    "agents.ppo.ppo:UpdateKL": "corral.execution.algorithm_ops:UpdateKL",
    "agents.ppo.ppo:warn_about_bad_reward_scales": (
        "corral.execution.algorithm_ops:warn_about_bad_reward_scales"
    ),
    "agents.dqn.apex:UpdateWorkerWeights": "corral.execution.algorithm_ops:UpdateWorkerWeights",
    "agents.impala.impala:BroadcastUpdateLearnerWeights": (
        "corral.execution.algorithm_ops:BroadcastUpdateLearnerWeights"
    ),
    "agents.impala.impala:gather_experiences_directly": (
        "corral.execution.algorithm_ops:gather_experiences_directly"
    ),
    # RLlib 1.13's estimator modules; corral's estimators live in corral.offline.estimators.
    "offline.is_estimator:ImportanceSamplingEstimator": (
        "corral.offline.estimators.importance_sampling:ImportanceSampling"
    ),
    "offline.wis_estimator:WeightedImportanceSamplingEstimator": (
        "corral.offline.estimators.importance_sampling:WeightedImportanceSampling"
    ),
    "offline.off_policy_estimator:OffPolicyEstimate": (
        "corral.offline.estimators.off_policy_estimator:OffPolicyEstimate"
    ),
    "offline.off_policy_estimator:OffPolicyEstimator": (
        "corral.offline.estimators.off_policy_estimator:OffPolicyEstimator"
    ),
    # RLlib 1.13's TF action-distribution module imports the framework-free base class,
    # and RLlib's own examples import it from there.
    "models.tf.tf_action_dist:ActionDistribution": "corral.models.action_dist:ActionDistribution",
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
