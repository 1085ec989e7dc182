"""RLlib 1.13's tree aggregation (`corral.execution.tree_agg`) and IMPALA's
`num_aggregation_workers`.

The aggregator's own logic runs here in the driver over local-backend workers; the
aggregation actors themselves need Ray (one module-scoped local Ray for the last tests,
skipped where the `ray` extra is not installed).
"""

import numpy as np
import pytest

from corral.agents.impala import ImpalaTrainer
from corral.agents.impala.impala_torch_policy import UNROLL_ID
from corral.execution.tree_agg import Aggregator, assign_workers, check_tree_aggregation

SMALL = {
    "env": "CartPole-v1",
    "num_workers": 2,
    "rollout_fragment_length": 25,
    "train_batch_size": 100,
    "model": {"fcnet_hiddens": [16]},
    "min_time_s_per_reporting": 0,
    "seed": 0,
}


def test_the_local_backend_gathers_in_the_driver_instead_of_aggregators():
    # The local backend gathers the fragments in the driver instead (RLlib 1.13's
    # custom_fast_model example asks for an aggregator), with a warning.
    local = ImpalaTrainer(config={**SMALL, "num_aggregation_workers": 1})
    try:
        assert local.config["num_aggregation_workers"] == 0
        assert local.train()["timesteps_total"] > 0
    finally:
        local.stop()
    with pytest.raises(ValueError, match=r"num_aggregation_workers=1 needs backend='ray'"):
        check_tree_aggregation({"num_aggregation_workers": 1, "backend": "local"})
    with pytest.raises(ValueError, match=r"num_aggregation_workers.*<= `num_workers`"):
        ImpalaTrainer(config={**SMALL, "backend": "ray", "num_aggregation_workers": 3})


def test_workers_are_shared_round_robin():
    assert assign_workers([1, 2, 3, 4, 5], 2) == [[1, 3, 5], [2, 4]]
    assert assign_workers([1], 3) == [[1]]
    with pytest.raises(ValueError, match="got 0"):
        assign_workers([1], 0)


def test_aggregator_concatenates_replays_and_passes_weights_on():
    trainer = ImpalaTrainer(config=SMALL)
    try:
        workers = trainer.workers.remote_workers()
        local = trainer.workers.local_worker()
        seqs = local.get_weights_seqs()
        config = {**trainer.config, "replay_proportion": 1.0, "replay_buffer_num_slots": 4}
        agg = Aggregator(config, workers, seqs)
        out = agg.next_train_batch()
        batch = out["batch"]
        # Fragments of 25 steps (half of them replayed) up to 100 steps.
        assert batch.env_steps() >= 100 and set(batch.policy_batches) == {"default_policy"}
        rows = batch.policy_batches["default_policy"]
        pieces = len(np.unique(rows[UNROLL_ID]))
        assert pieces * 25 == rows.count
        assert 0 < out["env_steps"] < rows.count  # replay is not counted as sampled
        assert out["sampled_seqs"]["default_policy"] == [seqs["default_policy"]] * pieces
        # New weights reach each worker with its next fragment.
        policy = local.get_policy()
        new = {k: np.zeros_like(v) for k, v in policy.get_weights().items()}
        newer = {"default_policy": seqs["default_policy"] + 5}
        agg.set_weights({"default_policy": new}, {"timestep": 1}, newer)
        versions = []
        for _ in range(8):
            versions += agg.next_train_batch()["sampled_seqs"]["default_policy"]
            if newer["default_policy"] in versions:
                break
        assert newer["default_policy"] in versions
        for w in workers:
            got = w.call("get_weights").result(30)["default_policy"]
            assert all(np.array_equal(got[k], new[k]) for k in new)
    finally:
        trainer.stop()


ray = pytest.importorskip("ray", reason="the `ray` extra is not installed (pip install ray)")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_impala_trains_through_an_aggregation_actor(local_ray):
    config = {**SMALL, "backend": "ray", "num_aggregation_workers": 1}
    trainer = ImpalaTrainer(config=config)
    try:
        initial = trainer.get_policy().get_weights()
        results = [trainer.train() for _ in range(4)]
        assert len(trainer._aggregators) == 1
        last = results[-1]
        info = last["info"]
        assert last["num_env_steps_sampled"] >= info["num_env_steps_trained"] >= 100
        assert info["num_env_steps_trained"] % 100 == 0
        assert info["num_weight_broadcasts"] > 0
        assert "policy_loss" in info["learner"]["default_policy"]["learner_stats"]
        assert info["policy_lag"]["mean"] >= 0
        assert last["episodes_total"] > 0 and last["num_healthy_workers"] == 2
        # Both workers sample with the learner's weights, which the aggregator passed on.
        for w in trainer.workers.remote_workers():
            got = w.call("get_weights").result(30)["default_policy"]
            assert not all(np.array_equal(got[k], initial[k]) for k in initial)
    finally:
        trainer.stop()


def test_the_execution_plan_gathers_train_batches_from_aggregators(local_ray):
    from corral.execution.tree_agg import gather_experiences_tree_aggregation

    config = {**SMALL, "backend": "ray", "num_aggregation_workers": 2}
    trainer = ImpalaTrainer(config=config)
    try:
        it = gather_experiences_tree_aggregation(trainer.workers, trainer.config)
        items = it.zip_with_source_actor().take(3)
        assert all(batch.env_steps() >= 100 for _, batch in items)
        sources = {agg for agg, _ in items}
        assert sources and all(hasattr(agg, "call") for agg in sources)
        # RLlib's BroadcastUpdateLearnerWeights calls the aggregator's set_weights.
        agg = next(iter(sources))
        agg.call("set_weights", trainer.get_weights(), {"timestep": 0}).result(30)
        assert it.shared_metrics.get().counters["num_steps_sampled"] >= 300
    finally:
        trainer.stop()
