"""An RLlib 1.x execution plan learns: `build_trainer` with a PG-style plan
(ParallelRollouts -> ConcatBatches -> TrainOneStep -> StandardMetricsReporting) reaches a
mean training return of 100 on CartPole-v1 with two workers (learning regression test)."""

import time

import pytest

from corral.agents.pg.pg import DEFAULT_CONFIG
from corral.agents.pg.pg_torch_policy import PGTorchPolicy
from corral.agents.trainer_template import build_trainer
from corral.execution.metric_ops import StandardMetricsReporting
from corral.execution.rollout_ops import ConcatBatches, ParallelRollouts
from corral.execution.train_ops import TrainOneStep

BAR = 100.0
TIME_BUDGET_S = 60.0
STEP_BUDGET = 60_000


def pg_plan(workers, config, **kwargs):
    rollouts = ParallelRollouts(workers, mode="bulk_sync")
    train_op = rollouts.combine(
        ConcatBatches(
            min_batch_size=config["train_batch_size"],
            count_steps_by=config["multiagent"]["count_steps_by"],
        )
    ).for_each(TrainOneStep(workers))
    return StandardMetricsReporting(train_op, workers, config)


@pytest.mark.learning
def test_pg_execution_plan_learns_cartpole():
    PlanPG = build_trainer(
        "PlanPG",
        default_config=DEFAULT_CONFIG,
        default_policy=PGTorchPolicy,
        execution_plan=pg_plan,
    )
    trainer = PlanPG(
        config={
            "env": "CartPole-v1",
            "num_workers": 2,
            "rollout_fragment_length": 250,
            "train_batch_size": 500,
            "lr": 0.01,
            "model": {"fcnet_hiddens": [32]},
            "seed": 0,
            "log_level": "ERROR",
        }
    )
    start = time.monotonic()
    curve = []
    try:
        while True:
            result = trainer.train()
            curve.append((result["timesteps_total"], round(result["episode_reward_mean"], 1)))
            if (
                result["episode_reward_mean"] >= BAR
                or result["timesteps_total"] >= STEP_BUDGET
                or time.monotonic() - start > TIME_BUDGET_S
            ):
                break
    finally:
        trainer.stop()
    elapsed = time.monotonic() - start
    print(f"PG plan: {curve[-1]} after {len(curve)} iterations, {elapsed:.1f} s")
    assert result["episode_reward_mean"] >= BAR, f"only {curve[-1]} in {elapsed:.0f} s: {curve}"
    assert elapsed <= TIME_BUDGET_S
