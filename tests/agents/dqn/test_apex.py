"""Ape-X's training step is RLlib 1.13's Ape-X `training_iteration` method by method
(`get_samples_and_store_to_replay_buffers`, `sample_from_replay_buffer_place_on_learner_
queue_non_blocking`, `update_replay_sample_priority`, `update_target_networks`,
`update_workers`): each does its part, and a subclass's override is what `train()` runs."""

import numpy as np
import pytest

from corral.agents.dqn import ApexTrainer
from tests.fixtures.configs import SMALL_DQN

CONFIG = {
    **SMALL_DQN,
    "num_workers": 2,
    "replay_buffer_config": {"capacity": 1000},
}

STEP_METHODS = (
    "get_samples_and_store_to_replay_buffers",
    "sample_from_replay_buffer_place_on_learner_queue_non_blocking",
    "update_replay_sample_priority",
    "update_target_networks",
    "update_workers",
)


class RecordingApex(ApexTrainer):
    """Records each call of the step's methods; its target networks never update."""

    def setup(self, config: dict) -> None:
        self.calls: list[tuple[str, object]] = []
        super().setup(config)

    def get_samples_and_store_to_replay_buffers(self):
        self.calls.append(("get_samples_and_store_to_replay_buffers", None))
        return super().get_samples_and_store_to_replay_buffers()

    def sample_from_replay_buffer_place_on_learner_queue_non_blocking(self, num_samples_collected):
        self.calls.append(
            ("sample_from_replay_buffer_place_on_learner_queue_non_blocking", num_samples_collected)
        )
        return super().sample_from_replay_buffer_place_on_learner_queue_non_blocking(
            num_samples_collected
        )

    def update_replay_sample_priority(self):
        self.calls.append(("update_replay_sample_priority", None))
        return super().update_replay_sample_priority()

    def update_target_networks(self, num_new_trained_samples):
        self.calls.append(("update_target_networks", num_new_trained_samples))  # (no update)

    def update_workers(self, _num_samples_ready):
        self.calls.append(("update_workers", _num_samples_ready))
        return super().update_workers(_num_samples_ready)


def _priorities(trainer) -> np.ndarray:
    return trainer.local_replay_buffer.replay_buffers["default_policy"].get_state()["priorities"]


def _weights_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_train_runs_the_subclass_overrides_in_rllib_order():
    plain = ApexTrainer(config=CONFIG, env="CartPole-v1")
    try:
        assert plain.train()["info"]["num_target_updates"] > 0
    finally:
        plain.stop()

    trainer = RecordingApex(config=CONFIG, env="CartPole-v1")
    try:
        result = trainer.train()
        names = [name for name, _ in trainer.calls]
        # Four steps of 16 env steps; the first (before `learning_starts`) trains nothing,
        # so it checks no target update; the other three train one batch of 16 rows each.
        untrained = [m for m in STEP_METHODS if m != "update_target_networks"]
        assert names == untrained + list(STEP_METHODS) * 3
        remote = trainer.workers.remote_workers()
        for name, arg in trainer.calls:
            if name in STEP_METHODS[1::3]:  # (the two that get the steps per worker)
                assert arg == {remote[0]: 8, remote[1]: 8}
        targets = [arg for name, arg in trainer.calls if name == "update_target_networks"]
        assert targets == [16, 16, 16]
        assert result["info"]["num_env_steps_trained"] == 48
        # The override replaced the target updates the plain trainer made.
        assert result["info"]["num_target_updates"] == 0
    finally:
        trainer.stop()


@pytest.mark.parametrize("num_workers", [0, 2])
def test_get_samples_stores_one_fragment_per_worker(num_workers):
    trainer = ApexTrainer(config={**CONFIG, "num_workers": num_workers}, env="CartPole-v1")
    try:
        ready = trainer.get_samples_and_store_to_replay_buffers()
        workers = trainer.workers.remote_workers() or [trainer.workers.local_worker()]
        assert list(ready) == workers
        assert all(infos == [{"agent_steps": 8, "env_steps": 8}] for infos in ready.values())
        assert len(trainer.local_replay_buffer) == 8 * len(workers)
        assert trainer._counters["num_env_steps_sampled"] == 8 * len(workers)
    finally:
        trainer.stop()


def test_learn_then_reprioritize_then_update_the_workers():
    config = {**CONFIG, "learning_starts": 16, "training_intensity": 2}  # 2 rows/env step
    trainer = ApexTrainer(config=config, env="CartPole-v1")
    try:
        local = trainer.get_policy()
        ready = {w: 8 for w in trainer.workers.remote_workers()}
        trainer.get_samples_and_store_to_replay_buffers()
        trainer.get_samples_and_store_to_replay_buffers()  # 32 env steps: past learning_starts
        before = local.get_weights()
        priorities = _priorities(trainer).copy()
        trainer.sample_from_replay_buffer_place_on_learner_queue_non_blocking(ready)
        # 16 env steps x 2 trained rows per env step: 2 train batches of 16 rows.
        assert trainer._counters["num_env_steps_trained"] == 32
        assert not _weights_equal(before, local.get_weights())
        np.testing.assert_array_equal(_priorities(trainer), priorities)  # not yet
        assert trainer.update_replay_sample_priority() == 32
        assert not np.array_equal(_priorities(trainer), priorities)
        assert trainer.update_replay_sample_priority() == 0  # nothing new trained

        def remote_weights():
            return trainer.workers.foreach_worker(lambda w: w.get_policy().get_weights())[1:]

        assert not any(_weights_equal(w, local.get_weights()) for w in remote_weights())
        assert trainer.update_workers(ready) == 2
        assert all(_weights_equal(w, local.get_weights()) for w in remote_weights())
        assert trainer.update_workers(ready) == 0  # no new weights to send
    finally:
        trainer.stop()


def test_no_training_before_learning_starts():
    trainer = ApexTrainer(config=CONFIG, env="CartPole-v1")
    try:
        ready = trainer.get_samples_and_store_to_replay_buffers()  # 16 < 32 steps
        trainer.sample_from_replay_buffer_place_on_learner_queue_non_blocking(
            {w: sum(i["env_steps"] for i in infos) for w, infos in ready.items()}
        )
        assert trainer._counters["num_env_steps_trained"] == 0
        assert trainer.update_replay_sample_priority() == 0
        assert trainer.update_workers({}) == 0
    finally:
        trainer.stop()
