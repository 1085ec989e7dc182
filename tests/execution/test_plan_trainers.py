"""Trainers that run RLlib 1.x execution plans: `build_trainer(execution_plan=...)`, a
Trainer subclass's own `execution_plan`, RLlib 1.13's DQN- and A3C-style plans,
checkpoints and worker-failure recovery."""

from __future__ import annotations

import numpy as np
import pytest

from corral.agents.a3c.a3c import DEFAULT_CONFIG as A3C_CONFIG
from corral.agents.a3c.a3c_torch_policy import A3CTorchPolicy
from corral.agents.dqn.dqn import DEFAULT_CONFIG as DQN_CONFIG
from corral.agents.dqn.dqn_torch_policy import DQNTorchPolicy
from corral.agents.impala.impala import DEFAULT_CONFIG as IMPALA_CONFIG
from corral.agents.impala.impala_torch_policy import VTraceTorchPolicy
from corral.agents.pg import PGTrainer
from corral.agents.pg.pg import DEFAULT_CONFIG as PG_CONFIG
from corral.agents.pg.pg_torch_policy import PGTorchPolicy
from corral.agents.trainer import Trainer
from corral.agents.trainer_template import build_trainer
from corral.execution.common import (
    STEPS_TRAINED_COUNTER,
    STEPS_TRAINED_THIS_ITER_COUNTER,
    _get_shared_metrics,
)
from corral.execution.concurrency_ops import Concurrently, Dequeue, Enqueue
from corral.execution.metric_ops import StandardMetricsReporting
from corral.execution.replay_ops import Replay, StoreToReplayBuffer
from corral.execution.rollout_ops import AsyncGradients, ConcatBatches, ParallelRollouts
from corral.execution.train_ops import ApplyGradients, TrainOneStep, UpdateTargetNetwork
from corral.utils.metrics.learner_info import LEARNER_STATS_KEY


def pg_plan(workers, config, **kwargs):
    """RLlib 1.x's PG plan."""
    rollouts = ParallelRollouts(workers, mode="bulk_sync")
    train_op = rollouts.combine(
        ConcatBatches(
            min_batch_size=config["train_batch_size"],
            count_steps_by=config["multiagent"]["count_steps_by"],
        )
    ).for_each(TrainOneStep(workers))
    return StandardMetricsReporting(train_op, workers, config)


PRIORITY_UPDATES: list = []


def dqn_plan(workers, config, **kwargs):
    """RLlib 1.13's DQN plan (single device)."""
    local_replay_buffer = kwargs["local_replay_buffer"]
    rollouts = ParallelRollouts(workers, mode="bulk_sync")
    store_op = rollouts.for_each(StoreToReplayBuffer(local_buffer=local_replay_buffer))

    def update_prio(item):
        samples, info_dict = item
        prio_dict = {}
        for policy_id, info in info_dict.items():
            td_error = info.get("td_error", info[LEARNER_STATS_KEY].get("td_error"))
            samples.policy_batches[policy_id].set_get_interceptor(None)
            batch_indices = samples.policy_batches[policy_id].get("batch_indexes")
            prio_dict[policy_id] = (batch_indices, td_error)
        local_replay_buffer.update_priorities(prio_dict)
        PRIORITY_UPDATES.append(prio_dict)
        return info_dict

    replay_op = (
        Replay(local_buffer=local_replay_buffer)
        .for_each(TrainOneStep(workers))
        .for_each(update_prio)
        .for_each(UpdateTargetNetwork(workers, config["target_network_update_freq"]))
    )
    train_op = Concurrently(
        [store_op, replay_op], mode="round_robin", output_indexes=[1], round_robin_weights=[1, 1]
    )
    return StandardMetricsReporting(train_op, workers, config)


def a3c_plan(workers, config, **kwargs):
    """RLlib 1.12's A3C plan: gradients computed by the workers, applied as they come."""
    grads = AsyncGradients(workers)
    train_op = grads.for_each(ApplyGradients(workers, update_all=False))
    return StandardMetricsReporting(train_op, workers, config)


def impala_plan(workers, config, **kwargs):
    """RLlib 1.13's IMPALA plan: sampling, replay mix-in and a learner thread, concurrently."""
    # At RLlib's paths (served by corral._surface).
    from corral.agents.impala.impala import (
        BroadcastUpdateLearnerWeights,
        gather_experiences_directly,
        make_learner_thread,
    )

    train_batches = gather_experiences_directly(workers, config)
    learner_thread = make_learner_thread(workers.local_worker(), config)
    learner_thread.start()
    enqueue_op = train_batches.for_each(Enqueue(learner_thread.inqueue))
    enqueue_op = enqueue_op.zip_with_source_actor().for_each(
        BroadcastUpdateLearnerWeights(
            learner_thread, workers, broadcast_interval=config["broadcast_interval"]
        )
    )

    def record_steps_trained(item):
        count, fetches = item
        metrics = _get_shared_metrics()
        metrics.counters[STEPS_TRAINED_THIS_ITER_COUNTER] = count
        metrics.counters[STEPS_TRAINED_COUNTER] += count
        return item

    dequeue_op = Dequeue(learner_thread.outqueue, check=learner_thread.is_alive).for_each(
        record_steps_trained
    )
    merged_op = Concurrently([enqueue_op, dequeue_op], mode="async", output_indexes=[1])
    return StandardMetricsReporting(merged_op, workers, config).for_each(
        learner_thread.add_learner_metrics
    )


PlanPG = build_trainer(
    "PlanPG", default_config=PG_CONFIG, default_policy=PGTorchPolicy, execution_plan=pg_plan
)

SMALL_PG = {
    "env": "CartPole-v1",
    "num_workers": 0,
    "rollout_fragment_length": 50,
    "train_batch_size": 100,
    "model": {"fcnet_hiddens": [16]},
    "seed": 1,
}


def weights_of(trainer):
    return trainer.get_policy().get_weights()


def same_tensors(a, b):
    """Nested dicts/lists of tensors and numbers, equal leaf by leaf."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_tensors(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same_tensors(x, y) for x, y in zip(a, b))
    if hasattr(a, "shape"):
        return np.array_equal(np.asarray(a), np.asarray(b))
    return a == b


def test_pg_plan_results_look_like_train_results():
    trainer = PlanPG(config=dict(SMALL_PG, num_workers=1))
    try:
        assert trainer.train_exec_impl is not None
        first, second = trainer.train(), trainer.train()
        assert second["timesteps_total"] == 200 and second["training_iteration"] == 2
        assert (
            second["episodes_total"] == first["episodes_this_iter"] + (second["episodes_this_iter"])
        )
        plain = PGTrainer(config=dict(SMALL_PG, num_workers=1))
        try:
            expected = set(plain.train())
        finally:
            plain.stop()
        assert expected <= set(second), expected - set(second)
        stats = second["info"]["learner"]["default_policy"][LEARNER_STATS_KEY]
        assert "policy_loss" in stats
        # The plan counts into the trainer's own counters (what checkpoints save).
        assert trainer._counters["num_env_steps_trained"] == 200
    finally:
        trainer.stop()


def test_checkpoint_restores_weights_counters_and_optimiser(tmp_path):
    trainer = PlanPG(config=SMALL_PG)
    try:
        trainer.train()
        trainer.train()
        path = trainer.save(str(tmp_path))
        saved_weights = weights_of(trainer)
        saved_optimizer = trainer.learner_group.get_state()
    finally:
        trainer.stop()
    restored = PlanPG(config=SMALL_PG)
    try:
        restored.restore(path)
        assert all(np.array_equal(saved_weights[k], v) for k, v in weights_of(restored).items())
        assert same_tensors(restored.learner_group.get_state(), saved_optimizer)
        assert restored._counters["num_env_steps_sampled"] == 200
        result = restored.train()
        # The plan continues from the restored counters (RLlib's names too).
        assert result["timesteps_total"] == 300 and result["info"]["num_steps_sampled"] == 300
        assert result["training_iteration"] == 3
    finally:
        restored.stop()


def test_dqn_plan_stores_replays_and_trains(tmp_path):
    PlanDQN = build_trainer(
        "PlanDQN", default_config=DQN_CONFIG, default_policy=DQNTorchPolicy, execution_plan=dqn_plan
    )
    config = {
        "env": "CartPole-v1",
        "num_workers": 1,
        "rollout_fragment_length": 10,
        "train_batch_size": 16,
        "learning_starts": 40,
        "target_network_update_freq": 50,
        "min_sample_timesteps_per_reporting": 100,
        "min_time_s_per_reporting": 0,
        "store_buffer_in_checkpoints": True,
        "replay_buffer_config": {"capacity": 1000},
        "model": {"fcnet_hiddens": [16]},
        "hiddens": [16],
        "seed": 0,
    }
    trainer = PlanDQN(config=config)
    try:
        before = weights_of(trainer)
        result = trainer.train()
        buffer = trainer.local_replay_buffer
        assert result["timesteps_total"] >= 100 and len(buffer) == result["timesteps_total"]
        # Replay waited for learning_starts; then one batch per sampled fragment.
        assert (
            result["info"]["num_env_steps_trained"] == 16 * (result["timesteps_total"] - 30) // 10
        )
        assert result["info"]["num_target_updates"] >= 1
        # Prioritized replay (DQN's default): each replayed batch's TD errors came back.
        (indexes, td_errors) = PRIORITY_UPDATES[-1]["default_policy"]
        assert len(indexes) == len(td_errors) == 16 and np.isfinite(td_errors).all()
        assert any(not np.array_equal(before[k], v) for k, v in weights_of(trainer).items())
        path = trainer.save(str(tmp_path))
        stored = len(buffer)
    finally:
        trainer.stop()
    restored = PlanDQN(config=config)
    try:
        restored.restore(path)
        assert len(restored.local_replay_buffer) == stored
    finally:
        restored.stop()


def test_a3c_plan_applies_async_gradients():
    PlanA3C = build_trainer(
        "PlanA3C", default_config=A3C_CONFIG, default_policy=A3CTorchPolicy, execution_plan=a3c_plan
    )
    config = {
        "env": "CartPole-v1",
        "num_workers": 2,
        "rollout_fragment_length": 20,
        "min_time_s_per_reporting": 0,
        "min_sample_timesteps_per_reporting": 200,
        "model": {"fcnet_hiddens": [16]},
        "seed": 0,
    }
    # A3C's default config turns the plan off (RLlib 1.13 runs A3C's training_iteration).
    disabled = PlanA3C(config=config)
    try:
        assert disabled.train_exec_impl is None
    finally:
        disabled.stop()
    trainer = PlanA3C(config=dict(config, _disable_execution_plan_api=False))
    try:
        before = weights_of(trainer)
        result = trainer.train()
        assert result["timesteps_total"] >= 200
        assert result["info"]["num_steps_trained"] == result["timesteps_total"]
        assert "grad_wait_time_ms" in result["timers"]
        assert LEARNER_STATS_KEY in result["info"]["learner"]["default_policy"]
        assert any(not np.array_equal(before[k], v) for k, v in weights_of(trainer).items())
        # The trainer's learner applied them: its optimiser has state (checkpoints save it).
        optimizers = trainer.learner_group.get_state()["optimizers"]
        assert optimizers["default_policy"]["state"]
    finally:
        trainer.stop()


def test_impala_plan_trains_in_a_learner_thread_while_sampling():
    PlanIMPALA = build_trainer(
        "PlanIMPALA",
        default_config=IMPALA_CONFIG,
        default_policy=VTraceTorchPolicy,
        execution_plan=impala_plan,
    )
    trainer = PlanIMPALA(
        config={
            "env": "CartPole-v1",
            "num_workers": 2,
            "rollout_fragment_length": 50,
            "train_batch_size": 200,
            "replay_proportion": 0.5,
            "replay_buffer_num_slots": 4,
            "min_time_s_per_reporting": 0,
            "min_sample_timesteps_per_reporting": 1000,
            "model": {"fcnet_hiddens": [16]},
            "seed": 0,
        }
    )
    try:
        before = weights_of(trainer)
        for _ in range(3):
            result = trainer.train()
        info = result["info"]
        assert result["timesteps_total"] >= 3000
        assert info["num_steps_trained"] > 0 and info["num_weight_broadcasts"] > 0
        assert "learner_queue" in info and "default_policy" in info["learner"]
        assert any(not np.array_equal(before[k], v) for k, v in weights_of(trainer).items())
    finally:
        trainer.stop()


def test_a_trainer_subclass_runs_its_own_plan_or_rllib_default():
    class MyPG(PGTrainer):
        @staticmethod
        def execution_plan(workers, config, **kwargs):
            # RLlib 1.13's default plan, built on by a user's.
            return Trainer.execution_plan(workers, config).for_each(
                lambda result: dict(result, marker=True)
            )

    trainer = MyPG(config=SMALL_PG)
    try:
        result = trainer.train()
        assert result["marker"] and result["timesteps_total"] == 100
    finally:
        trainer.stop()
    trainer = MyPG(config=dict(SMALL_PG, _disable_execution_plan_api=True))
    try:
        assert trainer.train_exec_impl is None and "marker" not in trainer.train()
    finally:
        trainer.stop()
    plain = PGTrainer(config=SMALL_PG)
    try:
        assert plain.train_exec_impl is None
    finally:
        plain.stop()


def test_a_plan_that_ends_or_gives_no_dict_fails_clearly():
    def ends(workers, config, **kwargs):
        yield {"timesteps_this_iter": 0}

    Ends = build_trainer(
        "Ends", default_config=PG_CONFIG, default_policy=PGTorchPolicy, execution_plan=ends
    )
    trainer = Ends(config=SMALL_PG)
    try:
        trainer.train()
        with pytest.raises(RuntimeError, match="execution plan ended"):
            trainer.train()
    finally:
        trainer.stop()
    Bad = build_trainer(
        "Bad",
        default_config=PG_CONFIG,
        default_policy=PGTorchPolicy,
        execution_plan=lambda workers, config, **kw: iter([1, 2]),
    )
    trainer = Bad(config=SMALL_PG)
    try:
        with pytest.raises(RuntimeError, match="expected a result dict"):
            trainer.train()
    finally:
        trainer.stop()


def test_plan_is_rebuilt_after_a_worker_failure_and_keeps_counting():
    trainer = PlanPG(config=dict(SMALL_PG, num_workers=2, recreate_failed_workers=True))
    try:
        first = trainer.train()
        old_plan = trainer.train_exec_impl
        trainer.workers.remote_workers()[0].kill()
        result = trainer.train()
        assert trainer.train_exec_impl is not old_plan
        assert result["timesteps_total"] == first["timesteps_total"] + 100
        assert result["num_healthy_workers"] == 2
    finally:
        trainer.stop()


def test_tune_runs_a_plan_trainer_and_keeps_its_checkpoint(tmp_path):
    from corral import tune

    analysis = tune.run(
        PlanPG,
        config=SMALL_PG,
        stop={"timesteps_total": 300},
        checkpoint_at_end=True,
        metric="episode_reward_mean",
        mode="max",
        local_dir=str(tmp_path),
        verbose=0,
    )
    (trial,) = analysis.trials
    assert trial.last_result["timesteps_total"] == 300
    assert trial.last_result["training_iteration"] == 3
    assert analysis.best_checkpoint is not None
    frame = analysis.dataframe()
    assert "info/learner/default_policy/learner_stats/policy_loss" in frame.columns
