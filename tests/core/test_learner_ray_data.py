"""Learner.update from Ray object refs of episodes (`episodes_refs`) and from Ray Data
iterators (`data_iterators`, `num_iters`), on one learner and on a LearnerGroup of two.

Runs on a local Ray instance (`ray.init(num_cpus=2)`); skipped when the `ray` extra is
not installed.
"""

import copy
import gc

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="the `ray` extra is not installed (pip install ray)")
pytest.importorskip("ray.data")

from corral.agents.ppo import PPOTrainer  # noqa: E402
from corral.agents.ppo.ppo import standardize  # noqa: E402
from corral.core.learner import Learner, LearnerGroup  # noqa: E402
from corral.core.learner.training_data import end_streams, rows_of_iterator  # noqa: E402
from corral.policy.sample_batch import SampleBatch  # noqa: E402
from corral.utils.metrics import stats_to_values  # noqa: E402

SMALL = {
    "num_workers": 0,
    "train_batch_size": 256,
    "rollout_fragment_length": 256,
    "sgd_minibatch_size": 64,
    "num_sgd_iter": 1,
    "model": {"fcnet_hiddens": [16]},
    "seed": 3,
}
# The columns PPO's loss reads (what a dataset of its train batches would hold).
COLUMNS = (
    SampleBatch.OBS,
    SampleBatch.ACTIONS,
    SampleBatch.ACTION_LOGP,
    SampleBatch.ACTION_DIST_INPUTS,
    SampleBatch.VF_PREDS,
    SampleBatch.ADVANTAGES,
    SampleBatch.VALUE_TARGETS,
)


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    end_streams()  # the passes these tests leave open end while Ray is up
    gc.collect()  # and Ray Data generators left in reference cycles
    ray.shutdown()


@pytest.fixture(scope="module")
def ppo_batch():
    trainer = PPOTrainer(config=SMALL, env="CartPole-v1")
    try:
        batch = trainer.workers.local_worker().sample()
        standardize(batch, SampleBatch.ADVANTAGES)
        yield SampleBatch({k: batch[k] for k in COLUMNS}), trainer.get_policy().get_weights()
    finally:
        trainer.stop()


def _dataset(batch: SampleBatch):
    """One row per step, in the batch's order (one block: its order is kept)."""
    columns = dict(batch.items())
    items = [{k: v[i] for k, v in columns.items()} for i in range(batch.count)]
    return ray.data.from_items(items).repartition(1)


def _fresh_learner(weights, group=False):
    """A trainer, its policy (with `weights`) and a learner (or LearnerGroup) of it."""
    trainer = PPOTrainer(config=SMALL, env="CartPole-v1")
    policy = trainer.get_policy()
    policy.set_weights(copy.deepcopy(weights))
    policies = {"default_policy": policy}
    learner = LearnerGroup(trainer.config, policies) if group else Learner(policies, trainer.config)
    return trainer, policy, learner


@pytest.mark.parametrize("group", [False, True], ids=["learner", "local_learner_group"])
def test_update_from_a_data_iterator_equals_one_from_the_same_rows(ppo_batch, group):
    batch, weights = ppo_batch
    t1, p1, l1 = _fresh_learner(weights)
    t2, p2, l2 = _fresh_learner(weights, group=group)
    try:
        r1 = l1.update(batch=batch.copy(), minibatch_size=64, num_epochs=1)
        iterator = _dataset(batch).iterator()
        r2 = l2.update(data_iterators=[iterator], num_iters=4, minibatch_size=64)
        w1, w2 = p1.get_weights(), p2.get_weights()
        assert max(float(np.abs(w1[k] - w2[k]).max()) for k in w1) < 1e-6
        assert any(not np.array_equal(w1[k], weights[k]) for k in w1)  # it did train
        v1, v2 = stats_to_values(r1), stats_to_values(r2)
        assert v2["default_policy"]["num_module_steps_trained"] == 256
        assert v2["default_policy"]["total_loss"] == pytest.approx(
            v1["default_policy"]["total_loss"], rel=1e-5
        )
    finally:
        t1.stop()
        t2.stop()


def test_iterator_continues_across_updates_and_starts_new_passes():
    rows = ray.data.from_items([{"x": float(i)} for i in range(10)]).repartition(1)
    iterator = rows.iterator()
    first = rows_of_iterator(iterator, 2, 4)
    assert first["x"].tolist() == [0, 1, 2, 3, 4, 5, 6, 7]
    assert first["x"].dtype == np.float32
    # The pass has rows 8, 9 left (fewer than 4: dropped); the next batch starts a pass.
    assert rows_of_iterator(iterator, 1, 4)["x"].tolist() == [0, 1, 2, 3]
    # num_iters=None: the rest of the current pass.
    assert rows_of_iterator(iterator, None, 4)["x"].tolist() == [4, 5, 6, 7]
    with pytest.raises(ValueError, match="minibatch_size >= 1"):
        rows_of_iterator(iterator, 1, None)
    with pytest.raises(ValueError, match="fewer than minibatch_size=20 rows"):
        rows_of_iterator(iterator, 1, 20)
    with pytest.raises(TypeError, match="Ray Data iterators"):
        rows_of_iterator([1, 2], 1, 2)


def test_update_from_episodes_refs(ppo_batch):
    batch, weights = ppo_batch
    t1, p1, l1 = _fresh_learner(weights)
    t2, p2, l2 = _fresh_learner(weights)
    try:
        l1.update(episodes=[batch.slice(0, 100), batch.slice(100, 256)], minibatch_size=64)
        # One ref holds an episode, the other a list of episodes.
        refs = [ray.put(batch.slice(0, 100)), ray.put([batch.slice(100, 256)])]
        result = l2.update(episodes_refs=refs, minibatch_size=64)
        w1, w2 = p1.get_weights(), p2.get_weights()
        assert all(np.array_equal(w1[k], w2[k]) for k in w1)
        assert stats_to_values(result)["default_policy"]["num_module_steps_trained"] == 256
        with pytest.raises(TypeError, match="episodes_refs must refer to episodes"):
            l2.update(episodes_refs=[ray.put({"obs": 1})])
    finally:
        t1.stop()
        t2.stop()


@pytest.mark.parametrize("backend", ["local", "ray"])
def test_two_learners_each_read_their_own_streaming_split(ppo_batch, backend):
    batch, weights = ppo_batch
    # Half a CPU per learner: the other CPU of the local Ray runs the dataset's tasks.
    config = {**SMALL, "num_learners": 2, "backend": backend, "num_cpus_per_learner": 0.5}
    trainer = PPOTrainer(config=config, env="CartPole-v1")
    try:
        group = trainer.learner_group
        trainer.get_policy().set_weights(copy.deepcopy(weights))
        parts = _dataset(batch).streaming_split(2, equal=True)
        result = group.update(data_iterators=parts, num_iters=2, minibatch_size=64)
        values = stats_to_values(result)
        # 2 learners x 2 batches x 32 rows.
        assert values["default_policy"]["num_module_steps_trained"] == 128
        a, b = (
            h.call("policy_weights", "default_policy").result(60)["modules"]["model"]
            for h in group.remote_learners
        )
        assert all(np.array_equal(a[k], b[k]) for k in a)  # the learners agree
        # Ray learners read their own part (kept on the learner); local ones get rows.
        held = [
            h.apply(lambda worker: len(worker._data_iterators)).result(60)
            for h in group.remote_learners
        ]
        assert held == ([1, 1] if backend == "ray" else [0, 0])
        trained = trainer.get_policy().get_weights()
        assert any(not np.array_equal(trained[k], weights[k]) for k in trained)
        # The next update goes on with the rest of each part (64 of its 128 rows left).
        result = group.update(data_iterators=parts, num_iters=2, minibatch_size=64)
        assert stats_to_values(result)["default_policy"]["num_module_steps_trained"] == 128
        with pytest.raises(ValueError, match="3 data iterators for 2 learners"):
            group.update(data_iterators=[*parts, parts[0]], num_iters=1, minibatch_size=64)
    finally:
        trainer.stop()
