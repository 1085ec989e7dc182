"""MAMLTrainer: one task per worker, workers sample with the meta-policy then adapt, the
meta-update trains on every worker's batches of every adaptation step, RLlib 1.13's result
keys, and config errors that name the bad value."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from corral.agents.callbacks import DefaultCallbacks
from corral.agents.maml import DEFAULT_CONFIG, MAMLTrainer
from corral.agents.maml.maml_torch_policy import ADAPT_STEP, TASK_INDEX
from corral.agents.registry import get_trainer_class
from corral.policy.sample_batch import SampleBatch

SMALL = {
    "num_workers": 3,
    "rollout_fragment_length": 20,
    "env_config": {"horizon": 10},
    "model": {"fcnet_hiddens": [16]},
    "maml_optimizer_steps": 2,
    "seed": 0,
}


class RecordMetaBatch(DefaultCallbacks):
    """Keeps each meta-update's train batch, and the meta-policy's action-distribution
    inputs on its observations before the update (`on_learn_on_batch` runs first)."""

    batches: list = []

    def on_learn_on_batch(self, *, policy, train_batch, result, **kwargs):
        with torch.no_grad():
            logits, _ = policy.forward_train(
                {SampleBatch.OBS: torch.as_tensor(train_batch[SampleBatch.OBS])}
            )
        RecordMetaBatch.batches.append((train_batch.copy(), logits.numpy()))


def test_registered_and_default_config():
    assert get_trainer_class("MAML") is MAMLTrainer
    assert DEFAULT_CONFIG["inner_adaptation_steps"] == 1
    assert DEFAULT_CONFIG["maml_optimizer_steps"] == 5
    assert DEFAULT_CONFIG["batch_mode"] == "complete_episodes"
    assert DEFAULT_CONFIG["create_env_on_driver"] is True


@pytest.mark.parametrize("steps", [1, 2])
def test_iteration_samples_adapts_and_meta_updates_per_task(steps):
    RecordMetaBatch.batches = []
    trainer = MAMLTrainer(
        config={**SMALL, "inner_adaptation_steps": steps, "callbacks": RecordMetaBatch},
        env="Navigation2D",
    )
    try:
        meta_before = trainer.get_weights()["default_policy"]
        result = trainer.train()
        # Each remote worker's env has a task of its own.
        tasks = trainer.workers.foreach_env(lambda env: env.get_task())
        remote_tasks = [t for (t,) in tasks[1:]]
        assert len(set(remote_tasks)) == 3
        # Each worker adapted its own copy: its weights left the meta-policy's, differently.
        adapted = [
            w.call("get_weights").result()["default_policy"]
            for w in trainer.workers.remote_workers()
        ]
        for weights in adapted:
            assert any(not np.allclose(weights[k], meta_before[k]) for k in weights)
        assert any(not np.allclose(adapted[0][k], adapted[1][k]) for k in adapted[0])

        # One meta-update, on the batches of every (task, adaptation step).
        ((batch, meta_logits),) = RecordMetaBatch.batches
        pairs = set(zip(batch[TASK_INDEX].tolist(), batch[ADAPT_STEP].tolist()))
        assert pairs == {(t, s) for t in range(3) for s in range(steps + 1)}
        before = batch[ADAPT_STEP] == 0
        # Workers sampled with the meta-policy before adapting, with their adapted one after.
        np.testing.assert_allclose(
            batch[SampleBatch.ACTION_DIST_INPUTS][before], meta_logits[before], atol=1e-5
        )
        assert not np.allclose(
            batch[SampleBatch.ACTION_DIST_INPUTS][~before], meta_logits[~before], atol=1e-3
        )
        # Advantages standardised per worker and adaptation step (RLlib's rule).
        for task in range(3):
            rows = (batch[TASK_INDEX] == task) & before
            assert abs(batch[SampleBatch.ADVANTAGES][rows].mean()) < 1e-5
        # Whole episodes, each within one block.
        for t, s in pairs:
            rows = (batch[TASK_INDEX] == t) & (batch[ADAPT_STEP] == s)
            assert batch[SampleBatch.T][rows][0] == 0
            assert batch[SampleBatch.DONES][rows][-1]

        assert result["timesteps_total"] == batch.count
        assert result["info"]["num_env_steps_trained"] == batch.count
        for n in range(1, steps + 1):
            for stat in ("max", "mean", "min"):
                assert np.isfinite(result[f"episode_reward_{stat}_adapt_{n}"])
        assert result["adaptation_delta"] == pytest.approx(
            result[f"episode_reward_mean_adapt_{steps}"] - result["episode_reward_mean"]
        )
        # 3 workers x (steps + 1) rounds x 2 episodes of 10 steps.
        assert result["episodes_this_iter"] == 3 * (steps + 1) * 2
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert {"total_loss", "policy_loss", "vf_loss", "kl_loss", "inner_kl"} <= set(stats)
        assert not np.allclose(
            trainer.get_weights()["default_policy"]["_logits.weight"],
            meta_before["_logits.weight"],
        )

        # The next iteration starts every worker from the meta-policy again.
        trainer.train()
        batch, meta_logits = RecordMetaBatch.batches[-1]
        before = batch[ADAPT_STEP] == 0
        np.testing.assert_allclose(
            batch[SampleBatch.ACTION_DIST_INPUTS][before], meta_logits[before], atol=1e-5
        )
        assert set(trainer.workers.foreach_env(lambda env: env.get_task())[1][0]) != set(
            remote_tasks[0]
        )
    finally:
        trainer.stop()


def test_checkpoint_keeps_the_kl_coefficients(tmp_path):
    trainer = MAMLTrainer(config=SMALL, env="Navigation2D")
    try:
        trainer.train()
        coeffs = list(trainer.get_policy().kl_coeff_val)
        assert coeffs != [DEFAULT_CONFIG["kl_coeff"]] * 3
        path = trainer.save(str(tmp_path))
    finally:
        trainer.stop()
    restored = MAMLTrainer(config=SMALL, env="Navigation2D")
    try:
        restored.restore(path)
        assert restored.get_policy().kl_coeff_val == pytest.approx(coeffs)
    finally:
        restored.stop()


def test_a_dropped_worker_leaves_the_others_their_task_slots():
    """With `ignore_worker_failures`, a dead worker is dropped: the others keep their
    task index (their slot, `worker_index - 1`) and so their KL coefficients; before,
    their positions shifted onto the dropped worker's coefficients."""
    RecordMetaBatch.batches = []
    trainer = MAMLTrainer(
        config={**SMALL, "ignore_worker_failures": True, "callbacks": RecordMetaBatch},
        env="Navigation2D",
    )
    try:
        first = trainer.workers.remote_workers()[0]
        assert first.worker_index == 1
        first.kill()
        trainer.train()
        assert [w.worker_index for w in trainer.workers.remote_workers()] == [2, 3]
        assert RecordMetaBatch.batches
        for batch, _ in RecordMetaBatch.batches:
            assert sorted(set(batch[TASK_INDEX].tolist())) == [1, 2]
        coeffs = trainer.get_policy().kl_coeff_val
        # Slot 0 (the dropped worker's) was not touched; the survivors' were adapted.
        assert coeffs[0] == DEFAULT_CONFIG["kl_coeff"]
        assert coeffs[1:] != [DEFAULT_CONFIG["kl_coeff"]] * 2
    finally:
        trainer.stop()


def test_deprecated_vf_share_layers_moves_into_the_model(caplog):
    config = {**SMALL, "num_workers": 1, "vf_share_layers": True}
    trainer = MAMLTrainer(config=config, env="Navigation2D")
    try:
        assert trainer.config["model"]["vf_share_layers"] is True
        assert "`vf_share_layers` has been deprecated" in caplog.text
    finally:
        trainer.stop()


def test_without_meta_env_any_env_trains():
    trainer = MAMLTrainer(
        config={**SMALL, "num_workers": 1, "use_meta_env": False, "env_config": {}},
        env="CartPole-v1",
    )
    try:
        result = trainer.train()
        assert np.isfinite(result["episode_reward_mean_adapt_1"])
    finally:
        trainer.stop()


def test_an_iteration_of_several_steps_reports_the_episodes_of_all():
    # Each step: 1 worker x 2 rounds x 20 env steps (2 episodes of 10 each round); a
    # minimum of 60 sampled steps per iteration runs two steps.
    trainer = MAMLTrainer(
        config={
            **SMALL,
            "num_workers": 1,
            "maml_optimizer_steps": 1,
            "min_sample_timesteps_per_reporting": 60,
        },
        env="Navigation2D",
    )
    try:
        result = trainer.train()
        assert result["timesteps_total"] == 80
        assert result["episodes_this_iter"] == 8
        assert len(result["hist_stats"]["episode_reward"]) == 4  # before adaptation
    finally:
        trainer.stop()


@pytest.mark.parametrize(
    ("config", "env", "match"),
    [
        ({"num_workers": 0}, "Navigation2D", r"`num_workers` >= 1.*got 0"),
        ({"use_meta_env": True}, "CartPole-v1", r"TaskSettableEnv.*'CartPole-v1'.*CartPoleEnv"),
        ({"batch_mode": "truncate_episodes"}, "Navigation2D", r"'truncate_episodes'"),
        ({"create_env_on_driver": False}, "Navigation2D", r"create_env_on_driver.*got False"),
        ({"inner_adaptation_steps": 0}, "Navigation2D", r"inner_adaptation_steps.*got 0"),
        ({"maml_optimizer_steps": -1}, "Navigation2D", r"maml_optimizer_steps.*got -1"),
        ({"inner_lr": 0.0}, "Navigation2D", r"inner_lr.*got 0.0"),
        ({"sample_async": True}, "Navigation2D", r"sample_async.*got True"),
        ({"torch_compile_learner": True}, "Navigation2D", r"torch_compile_learner.*got True"),
        ({"model": {"use_lstm": True}}, "Navigation2D", r"model.use_lstm"),
    ],
)
def test_bad_config_is_refused_by_name(config, env, match):
    with pytest.raises(ValueError, match=match):
        MAMLTrainer(config={**SMALL, "num_workers": 1, "env_config": {}, **config}, env=env)
