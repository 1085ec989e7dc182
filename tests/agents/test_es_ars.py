"""ES and ARS: the noise table, return shaping, the gradient estimate, training with
workers in the driver and in processes, acting and checkpoints."""

import json
import subprocess
import sys

import numpy as np
import pytest

from corral.agents.ars import ARSTrainer
from corral.agents.es import ESTrainer, optimizers, utils
from corral.agents.es.es import SharedNoiseTable, create_shared_noise

SMALL = {"noise_size": 200_000, "seed": 0, "log_level": "ERROR"}
ES_SMALL = {**SMALL, "episodes_per_batch": 10, "train_batch_size": 200, "eval_prob": 0.2}
ARS_SMALL = {**SMALL, "num_rollouts": 8, "rollouts_used": 4, "eval_prob": 0.3}


def test_noise_table_is_the_same_in_every_process():
    # A fresh interpreter, no state inherited (a subprocess rather than a spawned
    # multiprocessing child, which would have to import this test module by name).
    code = (
        "import json; from corral.agents.es.es import create_shared_noise; "
        "print(json.dumps(create_shared_noise(1000)[[0, 17, 999]].tolist()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    theirs = json.loads(out.stdout.strip().splitlines()[-1])
    ours = create_shared_noise(1000)
    assert ours.dtype == np.float32
    assert theirs == ours[[0, 17, 999]].tolist()
    assert abs(float(ours.mean())) < 0.2 and 0.8 < float(ours.std()) < 1.2


def test_noise_table_indices_leave_room_for_the_slice():
    table = SharedNoiseTable(np.arange(10, dtype=np.float32))
    rng = np.random.default_rng(0)
    for _ in range(100):
        i = table.sample_index(4, rng)
        assert 0 <= i <= 6 and len(table.get(i, 4)) == 4
    with pytest.raises(ValueError, match="noise_size"):
        table.sample_index(11, rng)


def test_centered_ranks():
    x = np.array([[3.0, -1.0], [10.0, 0.0]])
    ranks = utils.compute_centered_ranks(x)
    np.testing.assert_allclose(ranks, [[1 / 6, -0.5], [0.5, -1 / 6]], rtol=1e-6)
    assert ranks.dtype == np.float32
    np.testing.assert_array_equal(utils.compute_ranks(np.array([5, 1, 3])), [2, 0, 1])


def test_batched_weighted_sum_and_itergroups():
    vecs = [np.full(3, i, np.float32) for i in range(7)]
    total, count = utils.batched_weighted_sum(range(7), iter(vecs), batch_size=3)
    np.testing.assert_allclose(total, np.full(3, sum(i * i for i in range(7))))
    assert count == 7
    assert list(utils.itergroups(range(5), 2)) == [(0, 1), (2, 3), (4,)]


class _FlatPolicy:
    """A stand-in policy: just flat weights (what the optimisers need)."""

    def __init__(self, theta):
        self.theta = np.asarray(theta, np.float32)
        self.num_params = self.theta.size

    def get_flat_weights(self):
        return self.theta


@pytest.mark.parametrize("rank_returns", [True, False], ids=["ES ranks", "ARS raw"])
def test_gradient_estimate_climbs_a_quadratic(rank_returns):
    """The antithetic estimate on f(theta) = -|theta - target|^2 moves theta to target."""
    target = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    policy = _FlatPolicy(np.zeros(4))
    table = SharedNoiseTable(create_shared_noise(10_000))
    rng = np.random.default_rng(0)
    opt = optimizers.Adam(policy, 0.1) if rank_returns else optimizers.SGD(policy, 0.05)
    sigma = 0.1
    start = np.linalg.norm(policy.theta - target)
    for _ in range(200):
        indices = [table.sample_index(4, rng) for _ in range(20)]
        returns = np.array(
            [
                [
                    -np.sum((policy.theta + s * sigma * table.get(i, 4) - target) ** 2)
                    for s in (1, -1)
                ]
                for i in indices
            ]
        )
        weights = utils.compute_centered_ranks(returns) if rank_returns else returns
        g, _ = utils.batched_weighted_sum(
            weights[:, 0] - weights[:, 1], (table.get(i, 4) for i in indices), 500
        )
        g = g / returns.size / (1.0 if rank_returns else returns.std())
        # The estimate points uphill: it correlates with the true gradient.
        true_grad = -2 * (policy.theta - target)
        if np.linalg.norm(true_grad) > 0.5:
            assert float(np.dot(g, true_grad)) > 0
        policy.theta, _ = opt.update(-g)
    assert np.linalg.norm(policy.theta - target) < 0.2 * start


@pytest.mark.parametrize("trainer_cls, config", [(ESTrainer, ES_SMALL), (ARSTrainer, ARS_SMALL)])
@pytest.mark.parametrize("num_workers", [0, 2])
def test_trains_on_cartpole(trainer_cls, config, num_workers):
    trainer = trainer_cls(config={**config, "num_workers": num_workers}, env="CartPole-v1")
    try:
        before = trainer.get_policy().get_flat_weights()
        for _ in range(2):
            result = trainer.train()
        after = trainer.get_policy().get_flat_weights()
        assert not np.allclose(before, after)
        assert result["timesteps_total"] > 0 and result["episodes_total"] > 0
        assert result["info"]["episodes_so_far"] == trainer.episodes_so_far > 0
        assert np.isfinite(result["info"]["grad_norm"])
        # The workers' observations reached the driver's filter.
        assert trainer.get_policy().observation_filter.running_stats.n > 0
        action = trainer.compute_single_action(np.zeros(4, np.float32))
        assert action in (0, 1)
    finally:
        trainer.stop()


def test_episodes_respect_the_horizon():
    trainer = ESTrainer(config={**ES_SMALL, "num_workers": 0, "horizon": 7}, env="CartPole-v1")
    try:
        worker = trainer._es_workers[0].worker
        result = worker.do_rollouts(trainer.get_policy().get_flat_weights())
        assert max(max(pair) for pair in result.noisy_lengths) <= 7
    finally:
        trainer.stop()


def test_unsupported_values_are_refused_by_name():
    with pytest.raises(ValueError, match="return_proc_mode"):
        ESTrainer(config={**ES_SMALL, "return_proc_mode": "raw"}, env="CartPole-v1")
    with pytest.raises(ValueError, match="num_gpus"):
        ARSTrainer(config={**ARS_SMALL, "num_gpus": 2}, env="CartPole-v1")


@pytest.mark.parametrize("trainer_cls, config", [(ESTrainer, ES_SMALL), (ARSTrainer, ARS_SMALL)])
def test_checkpoint_round_trip(trainer_cls, config, tmp_path):
    trainer = trainer_cls(config={**config, "num_workers": 0}, env="CartPole-v1")
    try:
        trainer.train()
        path = trainer.save(str(tmp_path))
        obs = np.array([0.1, -0.2, 0.03, 0.4], np.float32)
        weights = trainer.get_policy().get_flat_weights()
        filter_state = trainer.get_policy().observation_filter.get_state()
        opt_state = trainer.optimizer.get_state()
    finally:
        trainer.stop()
    restored = trainer_cls(config={**config, "num_workers": 1}, env="CartPole-v1")
    try:
        restored.restore(path)
        np.testing.assert_array_equal(restored.get_policy().get_flat_weights(), weights)
        assert restored.get_policy().observation_filter.get_state() == filter_state
        assert restored.optimizer.t == opt_state["t"] == 1
        np.testing.assert_array_equal(restored.optimizer.v, opt_state["v"])
        assert restored.compute_single_action(obs) in (0, 1)
        # The restored filter reached the worker process too.
        (theirs,) = [
            h.call("get_filters").result(60)["default_policy"] for h in restored._es_workers
        ]
        assert theirs.get_state()["running_stats"] == filter_state["running_stats"]
        restored.train()
    finally:
        restored.stop()
