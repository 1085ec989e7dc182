"""DD-PPO (RLlib 1.13's `DDPPOTrainer`): config validation, decentralized training with
identical weights on every worker, the result dict, checkpoints, recovery from a dead
worker, multi-agent policies, and backend="ray"."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
import torch

from corral.agents.ppo import DDPPOTrainer, PPOTorchPolicy, PPOTrainer
from corral.agents.ppo.ddppo import DEFAULT_CONFIG
from corral.agents.registry import get_trainer_class
from corral.agents.trainer import Trainer
from corral.env.multi_agent_env import make_multi_agent

# 2 workers x 2 envs x 25 steps: each worker trains on its own 50 steps per round.
CONFIG = {
    "env": "CartPole-v1",
    "num_workers": 2,
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 25,
    "sgd_minibatch_size": 25,
    "num_sgd_iter": 2,
    "model": {"fcnet_hiddens": [16]},
    "seed": 0,
    "log_level": "ERROR",
}
STATS = ("policy_loss", "vf_loss", "total_loss", "kl", "entropy", "cur_lr", "vf_explained_var")


def _trainer(**overrides) -> DDPPOTrainer:
    return DDPPOTrainer(config={**CONFIG, **overrides})


def _all_weights(trainer) -> list[dict]:
    """Every worker's weights: the driver's local worker first, then the remote ones."""
    return trainer.workers.foreach_worker(lambda w: w.get_weights())


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[pid].keys() == b[pid].keys() and all(np.array_equal(a[pid][k], b[pid][k]) for k in a[pid])
        for pid in a
    )


def _optimizer_moments(trainer) -> list[list[np.ndarray]]:
    """Each remote worker's Adam first moments of the default policy."""

    def moments(worker):
        state = worker.data_parallel_learner.learner.get_state()["optimizers"]["default_policy"]
        return [s["exp_avg"].numpy() for _, s in sorted(state["state"].items())]

    return [w.apply(moments).result() for w in trainer.workers.remote_workers()]


def test_registry_defaults_and_import_paths():
    from corral.agents.ppo.ddppo import DDPPOTrainer as by_module

    assert get_trainer_class("DDPPO") is DDPPOTrainer is by_module
    assert issubclass(DDPPOTrainer, PPOTrainer)
    assert DDPPOTrainer.get_default_config() is DEFAULT_CONFIG
    expected = {
        "rollout_fragment_length": 100,
        "num_envs_per_worker": 5,
        "sgd_minibatch_size": 50,
        "num_sgd_iter": 10,
        "keep_local_weights_in_sync": True,
        "torch_distributed_backend": "gloo",
        "num_gpus": 0,
        "train_batch_size": -1,
        "kl_coeff": 0.0,
        "kl_target": 0.0,
        "batch_mode": "truncate_episodes",
        "framework": "torch",
    }
    assert {k: DEFAULT_CONFIG[k] for k in expected} == expected


BAD_CONFIGS = [
    ({"num_workers": 0}, ValueError, "`num_workers` must be >= 1"),
    ({"train_batch_size": 4000}, ValueError, "`train_batch_size` must be -1"),
    ({"num_gpus": 1}, ValueError, "`num_gpus` must be 0"),
    ({"framework": "tf"}, ValueError, "framework"),
    ({"batch_mode": "complete_episodes"}, ValueError, "`batch_mode` must be 'truncate_episodes'"),
    ({"kl_coeff": 0.2}, ValueError, "DDPPO doesn't support KL penalties"),
    ({"kl_target": 0.01}, ValueError, "DDPPO doesn't support KL penalties"),
    ({"sgd_minibatch_size": 51}, ValueError, r"`sgd_minibatch_size` \(51\) must be <= each"),
    ({"torch_distributed_backend": "tcp"}, ValueError, "torch_distributed_backend"),
    ({"torch_distributed_backend": "nccl"}, ValueError, "'nccl' needs a GPU"),
    ({"num_learners": 1}, ValueError, "`num_learners` must be 0"),
    ({"model": {"use_lstm": True}}, NotImplementedError, "recurrent model"),
]


@pytest.mark.parametrize(("overrides", "error", "message"), BAD_CONFIGS)
def test_bad_config_is_named_at_construction(overrides, error, message):
    with pytest.raises(error, match=message):
        _trainer(**overrides)


@pytest.mark.skipif(torch.distributed.is_mpi_available(), reason="this torch is built with MPI")
def test_mpi_backend_needs_a_torch_built_with_it():
    with pytest.raises(ValueError, match="'mpi' needs a torch built with MPI"):
        _trainer(torch_distributed_backend="mpi")


def test_workers_train_in_lockstep_and_report_ppo_stats():
    trainer = _trainer()
    try:
        # Each worker trains on its own batch: that is the train batch size.
        assert trainer.config["train_batch_size"] == 50
        assert trainer.learner_group.is_attached
        initial = _all_weights(trainer)
        assert all(_same(w, initial[0]) for w in initial)  # one start everywhere
        results = [trainer.train() for _ in range(2)]
        weights = _all_weights(trainer)
        # Every worker trained on batches of its own, yet all hold the same weights
        # (averaged gradients), and the driver's copy follows
        # (`keep_local_weights_in_sync`); the weights did move.
        assert all(_same(w, weights[0]) for w in weights[1:])
        assert not _same(weights[0], initial[0])
        moments = _optimizer_moments(trainer)
        assert all(np.array_equal(a, b) for a, b in zip(moments[0], moments[1]))
    finally:
        trainer.stop()
    last = results[-1]
    stats = last["info"]["learner"]["default_policy"]["learner_stats"]
    assert all(np.isfinite(stats[k]) for k in STATS), stats
    assert stats["cur_kl_coeff"] == 0.0
    # 2 rounds x 2 workers x 50 env steps, sampled and trained.
    for key in (
        "num_env_steps_sampled",
        "num_env_steps_trained",
        "num_agent_steps_sampled",
        "num_agent_steps_trained",
    ):
        assert last[key] == 200 and last["info"][key] == 200, key
    assert last["timesteps_total"] == 200 and last["timesteps_this_iter"] == 100
    assert last["num_healthy_workers"] == 2
    assert last["episodes_total"] > 0 and np.isfinite(last["episode_reward_mean"])


def test_lr_schedule_anneals_on_the_workers():
    trainer = _trainer(lr_schedule=[[0, 1e-3], [200, 0.0]])
    try:
        lrs = [
            trainer.train()["info"]["learner"]["default_policy"]["learner_stats"]["cur_lr"]
            for _ in range(3)
        ]
    finally:
        trainer.stop()
    # Each round trains at the rate of the steps sampled before it: 0, 100, 200.
    assert lrs == pytest.approx([1e-3, 5e-4, 0.0])


@pytest.mark.parametrize("keep_in_sync", [True, False])
def test_checkpoint_round_trip_takes_the_workers_state(tmp_path, keep_in_sync):
    trainer = _trainer(keep_local_weights_in_sync=keep_in_sync)
    try:
        initial = trainer.get_weights()
        trainer.train()
        trainer.train()
        remote = trainer.workers.remote_workers()[0].call("get_weights").result()
        # Without syncing, the driver's copy stays as it was (RLlib's behaviour) ...
        assert _same(trainer.get_weights(), initial) is not keep_in_sync
        path = trainer.save(str(tmp_path))
        # ... but a checkpoint holds the weights the workers train.
        assert _same(trainer.get_weights(), remote)
        moments = _optimizer_moments(trainer)
    finally:
        trainer.stop()

    restored = _trainer(keep_local_weights_in_sync=keep_in_sync)
    try:
        assert not _same(restored.get_weights(), remote)
        restored.restore(path)
        assert all(_same(w, remote) for w in _all_weights(restored))
        for worker_moments in _optimizer_moments(restored):
            assert all(np.array_equal(a, b) for a, b in zip(worker_moments, moments[0]))
        result = restored.train()
        assert result["timesteps_total"] == 300  # the counters came back too
        weights = _all_weights(restored)[1:]
        assert _same(weights[0], weights[1]) and not _same(weights[0], remote)
    finally:
        restored.stop()

    # The saved config (`train_batch_size` filled in) builds the trainer again.
    again = Trainer.from_checkpoint(path)
    try:
        assert isinstance(again, DDPPOTrainer) and again.config["train_batch_size"] == 50
        assert all(_same(w, remote) for w in _all_weights(again))
    finally:
        again.stop()


@pytest.mark.parametrize("flag", ["recreate_failed_workers", "ignore_worker_failures"])
def test_a_dead_worker_is_recovered_and_the_group_formed_anew(flag):
    trainer = _trainer(**{flag: True})
    try:
        trainer.train()
        os.kill(trainer.workers.remote_workers()[1].pid, signal.SIGKILL)
        result = trainer.train()
        assert result["num_healthy_workers"] == (2 if flag == "recreate_failed_workers" else 1)
        trainer.train()
        weights = _all_weights(trainer)
        assert all(_same(w, weights[0]) for w in weights[1:])
        moments = _optimizer_moments(trainer)
        assert all(np.array_equal(a, b) for m in moments for a, b in zip(m, moments[0]))
    finally:
        trainer.stop()


def test_multi_agent_policies_and_a_policy_added_at_runtime():
    trainer = _trainer(
        env=make_multi_agent("CartPole-v1"),
        num_envs_per_worker=1,
        rollout_fragment_length=40,
        sgd_minibatch_size=16,
        env_config={"num_agents": 2},
        multiagent={
            "policies": {"p0", "p1"},
            "policy_mapping_fn": lambda agent_id, *args, **kwargs: f"p{agent_id}",
        },
    )
    try:
        result = trainer.train()
        assert sorted(result["info"]["learner"]) == ["p0", "p1"]
        trainer.add_policy(
            "p2",
            PPOTorchPolicy,
            policy_mapping_fn=lambda agent_id, *args, **kwargs: f"p{agent_id + 1}",
        )
        trainer.train()
        result = trainer.train()
        assert sorted(result["info"]["learner"]) == ["p0", "p1", "p2"]
        weights = _all_weights(trainer)
        assert all(_same(w, weights[0]) for w in weights[1:])
    finally:
        trainer.stop()


@pytest.mark.parametrize("count_steps_by", ["env_steps", "agent_steps"])
def test_multi_agent_counts_and_schedules_as_rllib(count_steps_by):
    """Two agents act at once: the counters count env and agent steps, `timesteps_total`
    follows `count_steps_by`, and the schedules run on the agent steps sampled, whatever
    `count_steps_by` says (RLlib 1.13's DD-PPO sends `num_agent_steps_sampled` as the
    workers' `timestep`)."""
    trainer = _trainer(
        env=make_multi_agent("CartPole-v1"),
        num_envs_per_worker=1,
        rollout_fragment_length=40,
        sgd_minibatch_size=16,
        num_sgd_iter=1,
        lr_schedule=[[0, 1e-3], [1000, 0.0]],
        env_config={"num_agents": 2},
        multiagent={
            "policies": {"p0", "p1"},
            "policy_mapping_fn": lambda agent_id, *args, **kwargs: f"p{agent_id}",
            "count_steps_by": count_steps_by,
        },
    )
    try:
        first = trainer.train()
        second = trainer.train()
    finally:
        trainer.stop()
    env_steps, agent_steps = first["num_env_steps_sampled"], first["num_agent_steps_sampled"]
    assert agent_steps > env_steps  # both agents acted at once
    assert first["num_env_steps_trained"] == env_steps
    assert first["num_agent_steps_trained"] == agent_steps
    assert first["agent_timesteps_total"] == agent_steps
    by_agent = count_steps_by == "agent_steps"
    assert first["timesteps_total"] == (agent_steps if by_agent else env_steps)
    assert first["timesteps_this_iter"] == first["timesteps_total"]
    # The second round trains at the rate of the agent steps sampled before it.
    lr = second["info"]["learner"]["p0"]["learner_stats"]["cur_lr"]
    assert lr == pytest.approx(1e-3 * (1 - agent_steps / 1000))


def test_trains_on_ray_actors():
    ray = pytest.importorskip("ray", reason="the `ray` extra is not installed")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        trainer = _trainer(backend="ray")
        try:
            trainer.train()
            result = trainer.train()
            assert result["num_env_steps_trained"] == 200
            weights = _all_weights(trainer)
            assert all(_same(w, weights[0]) for w in weights[1:])
        finally:
            trainer.stop()
    finally:
        ray.shutdown()
