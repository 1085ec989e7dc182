"""`Trainer.add_policy(workers=...)` (RLlib 1.13's argument): only the given rollout
workers (and the evaluation workers, with `evaluation_workers`) get the policy; the
trainer's weight sync, `remove_policy`, recreated workers and checkpoints follow that."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from corral.agents.ppo import PPOTrainer
from tests.fixtures.two_cartpoles import TwoCartPoles, map_to_p0_and_p1, trainer_config


def policy_ids(trainer, worker_set=None) -> list[list[str]]:
    """Per worker (local first), the ids of its policies."""
    return (worker_set or trainer.workers).foreach_worker(lambda w: sorted(w.policy_map))


def test_only_the_given_workers_and_the_evaluation_workers_get_the_policy():
    trainer = PPOTrainer(
        env=TwoCartPoles, config=trainer_config(evaluation_interval=1, evaluation_num_workers=1)
    )
    try:
        cls = type(trainer.get_policy("p0"))
        local = trainer.workers.local_worker()
        (remote,) = trainer.workers.remote_workers()
        on_remote = trainer.add_policy("on_remote", cls, workers=[remote])
        assert on_remote is None  # RLlib 1.13: the local worker's copy, which it lacks
        assert policy_ids(trainer) == [["p0", "p1"], ["on_remote", "p0", "p1"]]
        assert policy_ids(trainer, trainer.evaluation_workers) == [["on_remote", "p0", "p1"]] * 2
        on_local = trainer.add_policy("on_local", cls, workers=[local], evaluation_workers=False)
        assert on_local is trainer.get_policy("on_local")
        assert policy_ids(trainer) == [["on_local", "p0", "p1"], ["on_remote", "p0", "p1"]]
        assert policy_ids(trainer, trainer.evaluation_workers) == [["on_remote", "p0", "p1"]] * 2
        # The learners train the local worker's policies to train: "on_local", not the other.
        assert set(trainer.learner_group.local_learner.policy_ids) == {"p0", "p1", "on_local"}
        trainer.train()  # the weight sync skips what a worker lacks
        with pytest.raises(TypeError, match="RolloutWorkers and remote workers' handles"):
            trainer.add_policy("bad", cls, workers=["worker-1"])

        # remove_policy removes each from where it is; every worker gets the new mapping.
        trainer.remove_policy("on_remote", policy_mapping_fn=map_to_p0_and_p1)
        trainer.remove_policy("on_local", policies_to_train=["p0"])
        assert policy_ids(trainer) == [["p0", "p1"]] * 2
        assert policy_ids(trainer, trainer.evaluation_workers) == [["p0", "p1"]] * 2
        assert trainer.workers.foreach_worker(lambda w: sorted(w.get_policies_to_train())) == [
            ["p0"],
            ["p0"],
        ]
    finally:
        trainer.stop()


def test_a_policy_added_later_to_a_remote_worker_gets_the_learners_weights():
    """The weights of "p2" went to the remote worker while it had no "p2"; once it gets one,
    the next sync sends them again (they have not changed: "p2" does not train)."""
    trainer = PPOTrainer(env=TwoCartPoles, config=trainer_config())
    try:
        cls = type(trainer.get_policy("p0"))
        (remote,) = trainer.workers.remote_workers()
        local = trainer.add_policy(
            "p2", cls, workers=[trainer.workers.local_worker()], policies_to_train=["p0", "p1"]
        )
        trainer.train()
        trainer.add_policy("p2", cls, workers=[remote], policies_to_train=["p0", "p1"])

        def remote_weights():
            return remote.apply(lambda w: w.get_policy("p2").get_weights()).result(30)

        wanted = local.get_weights()
        assert any(not np.array_equal(remote_weights()[k], v) for k, v in wanted.items())
        trainer.train()
        assert all(np.array_equal(remote_weights()[k], v) for k, v in wanted.items())
    finally:
        trainer.stop()


def test_recreated_workers_and_restored_trainers_get_it_where_it_was(tmp_path):
    config = trainer_config(recreate_failed_workers=True)
    trainer = PPOTrainer(env=TwoCartPoles, config=config)
    try:
        cls = type(trainer.get_policy("p0"))
        (old,) = trainer.workers.remote_workers()
        trainer.add_policy("on_remote", cls, workers=[old])
        trainer.add_policy("on_local", cls, workers=[trainer.workers.local_worker()])
        os.kill(old.pid, signal.SIGKILL)
        result = trainer.train()
        assert trainer.workers.remote_workers()[0].pid != old.pid
        assert result["num_healthy_workers"] == 1
        expected = [["on_local", "p0", "p1"], ["on_remote", "p0", "p1"]]
        assert policy_ids(trainer) == expected
        path = trainer.save(str(tmp_path))
        trainer.restore(path)  # its own checkpoint: nothing to add again
        assert policy_ids(trainer) == expected
    finally:
        trainer.stop()
    fresh = PPOTrainer(env=TwoCartPoles, config=config)
    try:
        fresh.restore(path)
        assert policy_ids(fresh) == expected
        fresh.train()
    finally:
        fresh.stop()
