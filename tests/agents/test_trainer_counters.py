"""`corral.execution.common`: the one way trainers count sampled and trained steps."""

from collections import defaultdict

import numpy as np

from corral.agents import trainer as trainer_module
from corral.execution import common
from corral.execution.common import count_sampled, count_trained, steps_sampled
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch
from corral.utils import metrics


def _multi_agent_batch():
    # 3 env steps; agent "a" acted 3 times, agent "b" twice: 5 agent steps.
    a = SampleBatch({"obs": np.zeros((3, 1))})
    b = SampleBatch({"obs": np.zeros((2, 1))})
    return MultiAgentBatch({"a": a, "b": b}, env_steps=3)


def test_count_sampled_and_trained_add_env_and_agent_steps():
    counters = defaultdict(int)
    assert count_sampled(counters, _multi_agent_batch()) == 3
    assert count_sampled(counters, SampleBatch({"obs": np.zeros((4, 1))})) == 7
    assert count_trained(counters, _multi_agent_batch()) == 3
    assert dict(counters) == {
        "num_env_steps_sampled": 7,
        "num_agent_steps_sampled": 9,
        "num_env_steps_trained": 3,
        "num_agent_steps_trained": 5,
    }
    assert steps_sampled(counters) == 7
    assert steps_sampled(counters, "agent_steps") == 9
    assert steps_sampled({}, "agent_steps") == 0


def test_counter_names_have_one_definition():
    for name in (
        "NUM_ENV_STEPS_SAMPLED",
        "NUM_AGENT_STEPS_SAMPLED",
        "NUM_ENV_STEPS_TRAINED",
        "NUM_AGENT_STEPS_TRAINED",
    ):
        assert getattr(common, name) == getattr(metrics, name)
        assert getattr(trainer_module, name) == getattr(metrics, name)
    assert common.NUM_ENV_STEPS_SAMPLED_LIFETIME == "num_env_steps_sampled_lifetime"


def test_default_training_step_counts_through_the_helper():
    from corral.agents.pg import PGTrainer

    trainer = PGTrainer(
        config={
            "env": "CartPole-v1",
            "num_workers": 0,
            "train_batch_size": 64,
            "seed": 0,
            "rollout_fragment_length": 32,
            "model": {"fcnet_hiddens": [8]},
        }
    )
    try:
        # `Trainer.training_step` (RLlib 1.13's default iteration), not PG's own.
        trainer_module.Trainer.training_step(trainer)
        counters = trainer._counters
        assert counters["num_env_steps_sampled"] == counters["num_agent_steps_sampled"] >= 64
        assert counters["num_env_steps_trained"] == counters["num_env_steps_sampled"]
    finally:
        trainer.stop()


def test_results_report_every_step_counter_before_the_first_training_step():
    from corral.agents.dqn import DQNTrainer

    # `learning_starts` above the first iteration's steps: nothing is trained yet.
    trainer = DQNTrainer(
        config={
            "env": "CartPole-v1",
            "num_workers": 0,
            "learning_starts": 10_000,
            "min_sample_timesteps_per_reporting": 50,
            "min_time_s_per_reporting": 0,
            "model": {"fcnet_hiddens": [8]},
        }
    )
    try:
        result = trainer.train()
    finally:
        trainer.stop()
    assert result["num_env_steps_sampled"] >= 50
    for name in ("num_env_steps_trained", "num_agent_steps_trained"):
        assert result[name] == 0 and result["info"][name] == 0
