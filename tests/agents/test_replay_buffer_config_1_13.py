"""RLlib 1.13 spells the replay settings inside `replay_buffer_config` (its DQN's
DEFAULT_CONFIG: `prioritized_replay_alpha`, `_enable_replay_buffer_api`, ...; SimpleQ's:
`learning_starts`, `replay_batch_size`): such configs build, and each nested value sets
the top-level key of its name."""

import pytest

from corral.agents.dqn import DQNTrainer, SimpleQTrainer
from corral.agents.dqn.r2d2 import R2D2Trainer
from corral.agents.sac import SACTrainer

# RLlib 1.13's own `replay_buffer_config` blocks (DQN's and SimpleQ's DEFAULT_CONFIG).
DQN_1_13 = {
    "_enable_replay_buffer_api": True,
    "type": "MultiAgentPrioritizedReplayBuffer",
    "capacity": 5000,
    "prioritized_replay_alpha": 0.5,
    "prioritized_replay_beta": 0.3,
    "prioritized_replay_eps": 1e-5,
    "replay_sequence_length": 1,
}
SIMPLE_Q_1_13 = {
    "_enable_replay_buffer_api": True,
    "learning_starts": 500,
    "type": "MultiAgentReplayBuffer",
    "capacity": 5000,
    "replay_batch_size": 32,
    "replay_sequence_length": 1,
}


def _build(cls, replay_buffer_config, env="CartPole-v1", **config):
    return cls(
        env=env,
        config={"num_workers": 0, "replay_buffer_config": replay_buffer_config, **config},
    )


def test_rllib_1_13_dqn_buffer_block_sets_the_prioritized_replay_keys():
    trainer = _build(DQNTrainer, DQN_1_13)
    try:
        buffer = trainer.local_replay_buffer
        assert buffer.prioritized
        assert trainer.config["prioritized_replay_alpha"] == 0.5
        assert trainer.config["prioritized_replay_beta"] == 0.3
        assert trainer.config["prioritized_replay_eps"] == 1e-5
        trainer.train()
    finally:
        trainer.stop()


def test_rllib_1_13_simple_q_buffer_block_sets_learning_starts():
    trainer = _build(SimpleQTrainer, SIMPLE_Q_1_13, train_batch_size=32)
    try:
        assert trainer.config["learning_starts"] == 500
        assert not trainer.local_replay_buffer.prioritized
    finally:
        trainer.stop()


def test_nested_prioritized_replay_turns_it_on():
    trainer = _build(SACTrainer, {"capacity": 1000, "prioritized_replay": True}, env="Pendulum-v1")
    try:
        assert trainer.config["prioritized_replay"] is True
        assert trainer.local_replay_buffer.prioritized
    finally:
        trainer.stop()


def test_the_same_key_set_twice_to_different_values_is_refused():
    with pytest.raises(ValueError, match=r"`prioritized_replay_alpha` is set twice, to 0\.9"):
        _build(DQNTrainer, DQN_1_13, prioritized_replay_alpha=0.9)
    # Set twice to the same value, or left at its default on top: fine.
    _build(DQNTrainer, DQN_1_13, prioritized_replay_alpha=0.5).stop()


def test_a_replay_batch_size_other_than_the_train_batch_size_is_refused():
    with pytest.raises(
        ValueError, match=r"replay_batch_size` \(32\) differs from `train_batch_size` \(64\)"
    ):
        _build(SimpleQTrainer, SIMPLE_Q_1_13, train_batch_size=64)


def test_sequences_only_for_the_algorithms_that_replay_them():
    with pytest.raises(
        ValueError, match=r"replay_sequence_length` must be None or 1 here \(got 4\)"
    ):
        _build(DQNTrainer, {"capacity": 1000, "replay_sequence_length": 4})
    # R2D2 sets its own (max_seq_len + burn_in).
    trainer = _build(
        R2D2Trainer,
        {"capacity": 100, "replay_sequence_length": -1},
        model={"use_lstm": True, "max_seq_len": 4, "lstm_cell_size": 8, "fcnet_hiddens": [8]},
    )
    try:
        assert trainer.config["replay_buffer_config"]["replay_sequence_length"] == 4
    finally:
        trainer.stop()


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("prioritized_replay_alpha", 1.5, "replay_buffer_config.prioritized_replay_alpha"),
        ("learning_starts", -1, "replay_buffer_config.learning_starts"),
        ("_enable_replay_buffer_api", "yes", "replay_buffer_config._enable_replay_buffer_api"),
    ],
)
def test_bad_nested_values_are_named(key, value, message):
    with pytest.raises((TypeError, ValueError), match=message.replace(".", r"\.")):
        _build(DQNTrainer, {"capacity": 1000, key: value})


def test_typos_inside_the_buffer_block_are_still_refused():
    with pytest.raises(ValueError, match="replay_buffer_config/prioritised_replay_alpha"):
        _build(DQNTrainer, {"capacity": 1000, "prioritised_replay_alpha": 0.5})


def test_a_top_level_value_replaces_an_algorithms_nested_default():
    """QMIX's DEFAULT_CONFIG has `replay_buffer_config.learning_starts` (1000); a user's
    top-level `learning_starts` is the one used, as RLlib 1.13 moves it there."""
    from corral.agents.qmix import QMixTrainer
    from tests.fixtures.two_step_game import GroupedTwoStepGame

    trainer = QMixTrainer(env=GroupedTwoStepGame, config={"learning_starts": 16})
    try:
        assert trainer.config["learning_starts"] == 16
        assert trainer.config["replay_buffer_config"]["learning_starts"] == 16
    finally:
        trainer.stop()
