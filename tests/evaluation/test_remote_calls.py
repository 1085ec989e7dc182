"""RLlib 1.x's calls on remote workers (`handle.<method>.remote(...)`) with the local
backend: functions among the arguments travel as Ray's cloudpickle would carry them."""

from __future__ import annotations

import threading

import pytest

from corral.agents.pg import PGTrainer
from corral.evaluation.backend import get


@pytest.fixture(scope="module")
def trainer():
    t = PGTrainer(
        config={"env": "CartPole-v1", "num_workers": 1, "rollout_fragment_length": 10},
    )
    yield t
    t.stop()


def test_lambdas_and_closures_reach_a_remote_worker(trainer):
    (worker,) = trainer.workers.remote_workers()
    offset = 3  # a closure over a local: not picklable by multiprocessing's pickler
    out = get(
        [
            worker.foreach_env.remote(lambda env: env.observation_space.shape[0] + offset),
            worker.foreach_policy.remote(lambda policy, pid: pid),
        ]
    )
    assert out == [[4 + offset], ["default_policy"]]


def test_an_argument_nothing_can_pickle_fails_the_caller(trainer):
    (worker,) = trainer.workers.remote_workers()
    lock = threading.Lock()
    with pytest.raises(TypeError, match="lock"):
        worker.foreach_env.remote(lambda env: lock)
    # The worker still answers.
    assert get([worker.foreach_env.remote(lambda env: 1)]) == [[1]]
