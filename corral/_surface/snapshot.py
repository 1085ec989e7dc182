"""RLlib 1.13's module list with each module's public names (a compact copy of the
reference list, so that the surface exists in any checkout). Read by
:func:`corral._surface.surface`; ``tests/test_surface.py`` checks it against the list."""

from __future__ import annotations

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
