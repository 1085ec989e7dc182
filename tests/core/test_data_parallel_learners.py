"""num_learners > 0: data-parallel learners (local processes, torch.distributed/gloo)."""

import os
import signal

import numpy as np
import pytest

from corral.agents.ppo import PPOTrainer
from corral.agents.ppo.ppo import standardize
from corral.core.learner.distributed import shard_batch
from corral.core.learner.learner_group import LearnerFailure
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch
from corral.utils.metrics import stats_to_values

SMALL = {
    "num_workers": 0,
    "train_batch_size": 256,
    "rollout_fragment_length": 256,
    "sgd_minibatch_size": 128,
    "num_sgd_iter": 2,
    "model": {"fcnet_hiddens": [32, 32]},
    "seed": 1,
    "log_level": "ERROR",
}


def _model_weights(handle):
    return handle.call("policy_weights", "default_policy").result()["modules"]["model"]


def test_shards_hold_each_minibatchs_parts():
    x = np.arange(10, dtype=np.float32)
    batch = MultiAgentBatch({"p": SampleBatch({"x": x})}, 10)
    shards, per_learner = shard_batch(batch, 2, minibatch_size=4)
    assert per_learner == 2
    # Minibatch j of one learner (rows 4j..4j+3) = learner 0's rows 4j, 4j+1 + learner 1's.
    # Rows 8, 9 would be learner 0's alone: shards are cut to equal length.
    assert shards[0].policy_batches["p"]["x"].tolist() == [0, 1, 4, 5]
    assert shards[1].policy_batches["p"]["x"].tolist() == [2, 3, 6, 7]
    assert [s.policy_batches["p"].count for s in shards] == [4, 4]
    with pytest.raises(ValueError, match="minibatch_size=1 is smaller than num_learners=2"):
        shard_batch(batch, 2, minibatch_size=1)


def test_two_learners_on_64_match_one_learner_on_128():
    one = PPOTrainer(config=SMALL, env="CartPole-v1")
    two = PPOTrainer(config={**SMALL, "num_learners": 2}, env="CartPole-v1")
    try:
        batch = one.workers.local_worker().sample().as_multi_agent()
        standardize(batch.policy_batches["default_policy"], SampleBatch.ADVANTAGES)
        p1, p2 = one.get_policy(), two.get_policy()
        p2.set_weights(p1.get_weights())
        r1 = one.learner_group.update(batch=batch.copy(), minibatch_size=128, num_epochs=2)
        r2 = two.learner_group.update(batch=batch.copy(), minibatch_size=128, num_epochs=2)
        w1, w2 = p1.get_weights(), p2.get_weights()
        assert max(float(np.abs(w1[k] - w2[k]).max()) for k in w1) < 1e-6
        # The learners themselves hold bit-identical weights.
        a, b = (_model_weights(h) for h in two.learner_group.remote_learners)
        assert all(np.array_equal(a[k], b[k]) for k in a)
        # Results are merged across learners: steps add up, loss terms average.
        v1, v2 = stats_to_values(r1), stats_to_values(r2)
        assert v2["__all_modules__"]["num_env_steps_trained"] == 256
        assert v2["default_policy"]["num_module_steps_trained"] == 256
        assert v2["default_policy"]["cur_kl_coeff"] == pytest.approx(
            v1["default_policy"]["cur_kl_coeff"]
        )
        assert v2["default_policy"]["total_loss"] == pytest.approx(
            v1["default_policy"]["total_loss"], rel=1e-4
        )
    finally:
        one.stop()
        two.stop()


def test_ppo_learns_with_two_learners_and_survives_a_dead_learner():
    config = {
        **SMALL,
        "num_learners": 2,
        "train_batch_size": 1000,
        "rollout_fragment_length": 1000,
        "num_sgd_iter": 6,
        "lr": 1e-3,
        "recreate_failed_workers": True,
    }
    trainer = PPOTrainer(config=config, env="CartPole-v1")
    try:
        rewards = [trainer.train()["episode_reward_mean"] for _ in range(6)]
        assert max(rewards[-2:]) > 1.5 * rewards[0], rewards
        # The state a checkpoint saves comes from learner 0 (Adam's moments).
        assert trainer.learner_group.get_state()["optimizers"]["default_policy"]["state"]
        victim = trainer.learner_group.remote_learners[1]
        os.kill(victim.pid, signal.SIGKILL)
        result = trainer.train()  # the learner group is rebuilt, training goes on
        assert result["training_iteration"] == 7
        assert victim not in trainer.learner_group.remote_learners
        assert len(trainer.learner_group.remote_learners) == 2
    finally:
        trainer.stop()


def test_a_dead_learner_fails_training_without_recovery_flags():
    trainer = PPOTrainer(config={**SMALL, "num_learners": 2}, env="CartPole-v1")
    try:
        trainer.train()
        os.kill(trainer.learner_group.remote_learners[0].pid, signal.SIGKILL)
        with pytest.raises(LearnerFailure, match="Learner 0 .of 2 data-parallel learners"):
            trainer.train()
    finally:
        trainer.stop()


def test_sac_learn_step_stays_identical_across_two_learners():
    from corral.agents.sac import SACTrainer

    trainer = SACTrainer(
        config={
            "num_workers": 0,
            "num_learners": 2,
            "learning_starts": 64,
            "train_batch_size": 32,
            "timesteps_per_iteration": 100,
            "seed": 0,
        },
        env="Pendulum-v1",
    )
    try:
        stats = trainer.train()["info"]["learner"]["default_policy"]["learner_stats"]
        assert np.isfinite(stats["critic_loss"])
        a, b = (
            h.call("policy_weights", "default_policy").result()["modules"]
            for h in trainer.learner_group.remote_learners
        )
        assert set(a) == {"model", "target_model"}  # target critics travel too, once
        assert all(np.array_equal(a[m][k], b[m][k]) for m in a for k in a[m])
    finally:
        trainer.stop()


def test_added_policies_and_checkpoints_with_two_learners(tmp_path):
    config = {**SMALL, "num_learners": 2, "num_sgd_iter": 1}
    trainer = PPOTrainer(config=config, env="CartPole-v1")
    restored = PPOTrainer(config=config, env="CartPole-v1")
    try:
        trainer.train()
        trainer.add_policy("other", type(trainer.get_policy()))
        assert trainer.learner_group.policy_ids == {"default_policy", "other"}
        trainer.train()
        path = trainer.save(str(tmp_path))
        restored.restore(path)
        # The learners' optimisers were restored from learner 0's saved state.
        saved = trainer.learner_group.get_state()["optimizers"]["default_policy"]["state"]
        loaded = restored.learner_group.get_state()["optimizers"]["default_policy"]["state"]
        assert all(
            np.array_equal(saved[i]["exp_avg"].numpy(), loaded[i]["exp_avg"].numpy()) for i in saved
        )
        assert restored.train()["training_iteration"] == 3
    finally:
        trainer.stop()
        restored.stop()


def test_two_learners_report_every_update_of_the_iteration():
    # Two PPO updates per iteration (timesteps_per_iteration = 2 x train_batch_size):
    # the group's merged metrics are reduced once, at the iteration's end.
    config = {**SMALL, "num_learners": 2, "timesteps_per_iteration": 512}
    trainer = PPOTrainer(config=config, env="CartPole-v1")
    try:
        info = trainer.train()["info"]["learner"]["default_policy"]
        # Both updates' 256 rows (128 per learner), not the last update's alone.
        assert info["num_agent_steps_trained"] == 2 * 256
        assert np.isfinite(info["learner_stats"]["total_loss"])
    finally:
        trainer.stop()


def test_a_removed_policy_is_not_kept_alive_by_its_averaging_hooks():
    import gc
    import weakref

    from corral.core.learner.distributed import LearnerWorker, policy_build_spec

    trainer = PPOTrainer(config=SMALL, env="CartPole-v1")
    try:
        spec = policy_build_spec(trainer.get_policy())
        config = trainer.get_policy().config
        learner = LearnerWorker({"p": spec}, config, ["p"], rank=0, world_size=1)
        learner._averaging = True  # as a member of a group of several (`init_group`)
        learner._hook_trained()
        alive = weakref.ref(learner.policies["p"])
        learner.remove_policy("p")
        gc.collect()
        assert alive() is None, "the removed policy is still referenced"
    finally:
        trainer.stop()
