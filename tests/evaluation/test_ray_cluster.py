"""backend="ray" on a multi-node cluster: Ray's test cluster (`ray.cluster_utils.Cluster`).

A head node (1 CPU) and two worker nodes on this machine: "big" (2 CPUs) and "special"
(1 CPU and a custom resource). Checks that the placement strategy and custom resources
decide where the rollout workers and learners run, and that losing a node mid-training is
survived with `recreate_failed_workers`.
"""

import pytest

ray = pytest.importorskip("ray", reason="the `ray` extra is not installed (pip install ray)")

from ray.cluster_utils import Cluster  # noqa: E402

from corral.agents.ppo import PPOTrainer  # noqa: E402

CONFIG = {
    "env": "CartPole-v1",
    "backend": "ray",
    "num_workers": 2,
    "rollout_fragment_length": 32,
    "train_batch_size": 64,
    "sgd_minibatch_size": 32,
    "num_sgd_iter": 1,
    "model": {"fcnet_hiddens": [8]},
    "log_level": "ERROR",
}


@pytest.fixture(scope="module")
def cluster():
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    nodes = {
        "head": cluster.head_node,
        "big": cluster.add_node(num_cpus=2),
        "special": cluster.add_node(num_cpus=1, resources={"special": 1}),
    }
    ray.init(address=cluster.address, log_to_driver=False)
    cluster.wait_for_nodes()
    yield cluster, {name: node.node_id for name, node in nodes.items()}
    ray.shutdown()
    cluster.shutdown()


def _node_of(_worker):
    import ray

    return ray.get_runtime_context().get_node_id()


def _nodes(handles):
    return [h.apply(_node_of).result() for h in handles]


def test_strict_spread_and_strict_pack_place_the_workers(cluster):
    _, node_ids = cluster
    trainer = PPOTrainer(config={**CONFIG, "placement_strategy": "STRICT_SPREAD"})
    try:
        spread = _nodes(trainer.workers.remote_workers())
        assert len(set(spread)) == 2 and set(spread) <= set(node_ids.values())
        trainer.train()
    finally:
        trainer.stop()
    trainer = PPOTrainer(config={**CONFIG, "placement_strategy": "STRICT_PACK"})
    try:
        # Only "big" has room for both bundles on one node.
        assert _nodes(trainer.workers.remote_workers()) == [node_ids["big"]] * 2
    finally:
        trainer.stop()


def test_custom_resources_route_a_worker_to_its_node(cluster):
    _, node_ids = cluster
    config = {**CONFIG, "num_workers": 1, "custom_resources_per_worker": {"special": 1}}
    trainer = PPOTrainer(config=config)
    try:
        assert _nodes(trainer.workers.remote_workers()) == [node_ids["special"]]
    finally:
        trainer.stop()


def test_learners_on_two_nodes_train(cluster):
    _, node_ids = cluster
    config = {**CONFIG, "num_workers": 0, "num_learners": 2, "placement_strategy": "STRICT_SPREAD"}
    trainer = PPOTrainer(config=config)
    try:
        assert len(set(_nodes(trainer.learner_group.remote_learners))) == 2
        result = trainer.train()
        assert result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"] > 0
    finally:
        trainer.stop()


def test_losing_a_node_mid_training_is_survived(cluster):
    ray_cluster, node_ids = cluster
    # PACK is soft: Ray can move the group's bundles to the nodes that are left
    # (STRICT_PACK could not: no other node has room for both).
    config = {**CONFIG, "placement_strategy": "PACK", "recreate_failed_workers": True}
    trainer = PPOTrainer(config=config)
    try:
        before = _nodes(trainer.workers.remote_workers())
        trainer.train()
        # The head node holds the driver's connection: lose a worker node with a worker.
        victim = next(n for n in ray_cluster.worker_nodes if n.node_id in before)
        ray_cluster.remove_node(victim)
        result = trainer.train()  # the lost workers are recreated on the other nodes
        assert result["num_healthy_workers"] == 2
        assert victim.node_id not in _nodes(trainer.workers.remote_workers())
    finally:
        trainer.stop()
