"""R2D2: sequences replayed whole with their states, burn-in, h, checkpoints, config errors."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.dqn import R2D2_DEFAULT_CONFIG, R2D2TorchPolicy, R2D2Trainer
from corral.agents.dqn.r2d2 import _sequence_columns, as_learner_sequences
from corral.agents.dqn.r2d2_torch_policy import h_function, h_inverse
from corral.agents.off_policy import make_replay_buffer
from corral.agents.registry import get_trainer_class
from corral.agents.trainer import Trainer
from corral.core.learner.training_data import SEQ_MASK
from corral.policy.sample_batch import SampleBatch

ENV = "corral.env.stateless_cartpole.StatelessCartPole"
MODEL = {"use_lstm": True, "lstm_cell_size": 8, "max_seq_len": 4, "fcnet_hiddens": [8]}
FAST = {
    "num_workers": 0,
    "min_time_s_per_reporting": 0,
    "min_sample_timesteps_per_reporting": 64,
    "learning_starts": 32,
    "train_batch_size": 24,
    "hiddens": [8],
    "burn_in": 2,
    "model": MODEL,
    "target_network_update_freq": 32,
    "seed": 0,
}


def test_defaults_are_rllib_1_13s_and_registered():
    assert get_trainer_class("R2D2") is R2D2Trainer
    c = R2D2_DEFAULT_CONFIG
    assert (c["lr"], c["gamma"], c["train_batch_size"], c["adam_epsilon"]) == (
        1e-4,
        0.997,
        1280,
        1e-3,
    )
    assert (c["num_workers"], c["batch_mode"], c["target_network_update_freq"]) == (
        2,
        "complete_episodes",
        2500,
    )
    assert c["prioritized_replay"] is False and c["double_q"] and c["dueling"]
    assert c["replay_buffer_config"]["replay_sequence_length"] == -1
    assert (c["zero_init_states"], c["burn_in"]) == (True, 0)
    assert (c["use_h_function"], c["h_function_epsilon"]) == (True, 1e-3)


# -- sequences in the replay buffer ---------------------------------------------------


def episode_rows(lengths):
    """Episodes of the given lengths; obs and state_in_0 hold the global row number."""
    n = sum(lengths)
    rows = np.arange(n, dtype=np.float32)
    return SampleBatch(
        {
            SampleBatch.OBS: np.stack([rows, -rows], axis=1),
            SampleBatch.ACTIONS: np.arange(n) % 2,
            SampleBatch.REWARDS: np.ones(n, np.float32),
            SampleBatch.TERMINATEDS: np.zeros(n, bool),
            SampleBatch.EPS_ID: np.repeat(np.arange(len(lengths)) + 100, lengths),
            SampleBatch.INFOS: np.array([{}] * n),
            "state_in_0": np.repeat(rows[:, None], 3, axis=1),
            "state_out_0": np.repeat(rows[:, None] + 1, 3, axis=1),
        }
    )


def test_sequences_are_stored_and_sampled_whole_with_their_initial_states():
    config = Trainer.merge_trainer_configs(R2D2_DEFAULT_CONFIG, {"seed": 0})
    config["replay_buffer_config"]["replay_sequence_length"] = 5
    buffer = make_replay_buffer(config)
    stored = _sequence_columns(episode_rows([7, 3, 10]))
    assert set(stored.policy_batches["default_policy"]) == {
        SampleBatch.OBS,
        SampleBatch.ACTIONS,
        SampleBatch.REWARDS,
        SampleBatch.TERMINATEDS,
        SampleBatch.EPS_ID,
        "state_in_0",
    }
    buffer.add(stored)
    # Episodes cut into 5-step sequences: 7 -> 5 + 2, 3 -> 3, 10 -> 5 + 5.
    assert len(buffer) == 5

    replayed = buffer.sample(40)
    batch = replayed.policy_batches["default_policy"]
    seq_lens = batch[SampleBatch.SEQ_LENS]
    assert batch.count == 40 * 5 and len(seq_lens) == 40
    assert set(seq_lens.tolist()) <= {5, 2, 3}
    obs = batch[SampleBatch.OBS][:, 0].reshape(40, 5)
    state = batch["state_in_0"][:, 0].reshape(40, 5)
    eps = batch[SampleBatch.EPS_ID].reshape(40, 5)
    for i, n in enumerate(seq_lens):
        first = obs[i, 0]
        # Consecutive steps of one episode from a sequence start, then zero padding.
        np.testing.assert_array_equal(obs[i, :n], first + np.arange(n))
        assert (obs[i, n:] == 0).all() and len(set(eps[i, :n])) == 1
        assert first in (0, 5, 7, 10, 15)
        # The recurrent state recorded at its first step travels with it.
        assert state[i, 0] == first

    rows = as_learner_sequences(replayed).policy_batches["default_policy"]
    assert rows.count == int(seq_lens.sum())
    np.testing.assert_array_equal(rows[SampleBatch.EPS_ID], np.repeat(np.arange(40), seq_lens))
    starts = np.cumsum(seq_lens) - seq_lens
    np.testing.assert_array_equal(rows["state_in_0"][starts, 0], state[:, 0])


def test_trainer_replays_sequences_of_max_seq_len_plus_burn_in():
    trainer = R2D2Trainer(config={**FAST, "prioritized_replay": True}, env=ENV)
    buffer = trainer.local_replay_buffer
    updates = []
    update_priorities = buffer.update_priorities
    buffer.update_priorities = lambda prio: (updates.append(prio), update_priorities(prio))
    try:
        assert trainer.config["replay_buffer_config"]["replay_sequence_length"] == 6
        assert buffer.replay_sequence_length == 6 and buffer.prioritized
        policy = trainer.get_policy()
        assert policy.sequence_length == 6 and policy.config["model"]["max_seq_len"] == 6
        # The trainer's own config keeps the model's max_seq_len.
        assert trainer.config["model"]["max_seq_len"] == 4
        result = trainer.train()
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert np.isfinite(stats["loss"]) and result["info"]["num_agent_steps_trained"] > 0
    finally:
        trainer.stop()
    # Prioritized replay: one priority per replayed sequence (24 // 6 = 4 per update).
    assert updates
    for prio in updates:
        indexes, td_error = prio["default_policy"]
        assert len(indexes) == len(td_error) and len(indexes) % 4 == 0
        assert (td_error >= 0).all()
    priorities = buffer.replay_buffers["default_policy"].get_state()["priorities"]
    assert len(set(np.round(priorities, 6))) > 1


# -- the loss -------------------------------------------------------------------------


def make_policy(**overrides):
    config = Trainer.merge_trainer_configs(
        R2D2_DEFAULT_CONFIG,
        {"model": MODEL, "hiddens": [8], "gamma": 0.9, **overrides},
    )
    return R2D2TorchPolicy(gym.spaces.Box(-10, 10, (2,)), gym.spaces.Discrete(2), config)


def sequences(num_seqs, length, seed=0):
    """Padded-sequence tensors as the learner hands them to the loss (all steps real)."""
    g = torch.Generator().manual_seed(seed)
    rows = num_seqs * length
    return {
        SampleBatch.OBS: torch.randn(rows, 2, generator=g),
        SampleBatch.ACTIONS: torch.randint(0, 2, (rows,), generator=g),
        SampleBatch.REWARDS: torch.rand(rows, generator=g),
        SampleBatch.TERMINATEDS: torch.zeros(rows, dtype=torch.bool),
        SEQ_MASK: torch.ones(rows, dtype=torch.bool),
        SampleBatch.SEQ_LENS: torch.full((num_seqs,), length, dtype=torch.int32),
        "state_in_0": torch.randn(num_seqs, 8, generator=g),
        "state_in_1": torch.randn(num_seqs, 8, generator=g),
    }


def test_burn_in_steps_only_warm_up_the_state():
    burn_in, rest = 3, 4
    with_burn_in = make_policy(burn_in=burn_in, zero_init_states=False)
    without = make_policy(burn_in=0, zero_init_states=False)
    without.set_weights(with_burn_in.get_weights())
    without.update_target(1.0)
    batch = sequences(2, burn_in + rest)
    loss, _ = with_burn_in.loss(with_burn_in.model, with_burn_in.dist_class, batch)

    # The same loss: the non-burn-in steps, starting from the state after the burn-in.
    def steps(lo, hi):
        per_row = {
            k: batch[k].reshape(2, burn_in + rest, *batch[k].shape[1:])[:, lo:hi]
            for k in (
                SampleBatch.OBS,
                SampleBatch.ACTIONS,
                SampleBatch.REWARDS,
                SampleBatch.TERMINATEDS,
                SEQ_MASK,
            )
        }
        return {k: v.reshape(-1, *v.shape[2:]) for k, v in per_row.items()}

    with torch.no_grad():
        _, warm = with_burn_in.model(
            steps(0, burn_in),
            [batch["state_in_0"], batch["state_in_1"]],
            torch.full((2,), burn_in, dtype=torch.int32),
        )
    rest_batch = {
        **steps(burn_in, burn_in + rest),
        SampleBatch.SEQ_LENS: torch.full((2,), rest, dtype=torch.int32),
        "state_in_0": warm[0],
        "state_in_1": warm[1],
    }
    expected, _ = without.loss(without.model, without.dist_class, rest_batch)
    torch.testing.assert_close(loss, expected)

    # And the burn-in steps do not matter to it beyond the state they leave.
    changed = dict(batch)
    actions = changed[SampleBatch.ACTIONS].reshape(2, -1).clone()
    actions[:, :burn_in] = 1 - actions[:, :burn_in]
    changed[SampleBatch.ACTIONS] = actions.reshape(-1)
    again, _ = with_burn_in.loss(with_burn_in.model, with_burn_in.dist_class, changed)
    torch.testing.assert_close(again, loss)


def test_target_bootstraps_within_the_sequence_and_stops_at_termination():
    policy = make_policy(use_h_function=False, double_q=False)
    batch = sequences(1, 4)
    batch[SampleBatch.TERMINATEDS] = torch.tensor([False, True, False, False])
    batch[SampleBatch.SEQ_LENS] = torch.tensor([3], dtype=torch.int32)
    batch[SEQ_MASK] = torch.tensor([True, True, True, False])
    state = [torch.zeros(1, 8), torch.zeros(1, 8)]
    with torch.no_grad():
        q, _ = policy.model(batch, state, batch[SampleBatch.SEQ_LENS])
        loss, stats = policy.loss(policy.model, policy.dist_class, batch)
    a, r = batch[SampleBatch.ACTIONS], batch[SampleBatch.REWARDS]
    q_sel = q[torch.arange(4), a]
    # Step 0 bootstraps from step 1; step 1 terminates; step 2 has no next step.
    td = torch.stack([q_sel[0] - (r[0] + 0.9 * q[1].max()), q_sel[1] - r[1]])
    expected = torch.nn.functional.huber_loss(td, torch.zeros(2), reduction="mean")
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(stats["mean_td_error"], td.abs().mean())


def test_h_function_and_its_inverse_round_trip():
    x = torch.cat(
        [
            torch.linspace(-1000, 1000, 2001, dtype=torch.float64),
            torch.tensor([0.0, 1e-6, -1e-6], dtype=torch.float64),
        ]
    )
    for eps in (1e-3, 1e-2, 1.0):
        torch.testing.assert_close(h_inverse(h_function(x, eps), eps), x, rtol=1e-9, atol=1e-6)
        torch.testing.assert_close(h_function(h_inverse(x, eps), eps), x, rtol=1e-9, atol=1e-6)
    # h(3) = sqrt(4) - 1 + 3 eps; h is odd.
    three = torch.tensor([3.0, -3.0], dtype=torch.float64)
    torch.testing.assert_close(
        h_function(three, 0.01), torch.tensor([1.03, -1.03], dtype=torch.float64)
    )


# -- checkpoints and config errors ----------------------------------------------------


def test_checkpoint_round_trip(tmp_path):
    config = {**FAST, "zero_init_states": False, "store_buffer_in_checkpoints": True}
    trainer = R2D2Trainer(config=config, env=ENV)
    try:
        trainer.train()
        path = trainer.save(str(tmp_path))
        weights = trainer.get_policy().get_state()["weights"]
        stored = len(trainer.local_replay_buffer)
    finally:
        trainer.stop()
    restored = R2D2Trainer(config=config, env=ENV)
    try:
        restored.restore(path)
        again = restored.get_policy().get_state()["weights"]
        assert set(again) == set(weights) and any(k.startswith("_target.") for k in again)
        for k, v in weights.items():
            np.testing.assert_array_equal(again[k], v, err_msg=k)
        assert len(restored.local_replay_buffer) == stored > 0
        obs = np.array([0.01, -0.02], np.float32)
        state = restored.get_policy().get_initial_state()
        a1, s1, _ = restored.compute_single_action(obs, state, explore=False)
        assert a1 in (0, 1) and len(s1) == 2
        restored.train()
    finally:
        restored.stop()


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"replay_buffer_config": {"replay_sequence_length": 7}}, "replay_sequence_length"),
        ({"batch_mode": "truncate_episodes"}, "complete_episodes"),
        ({"model": {**MODEL, "use_lstm": False}}, "use_lstm"),
        ({"model": {**MODEL, "max_seq_len": 1}}, "max_seq_len"),
        ({"num_atoms": 51}, "num_atoms"),
        ({"burn_in": -1}, "burn_in"),
        ({"h_function_epsilon": 0.0}, "h_function_epsilon"),
        ({"zero_init_states": "yes"}, "zero_init_states"),
    ],
)
def test_config_errors(overrides, match):
    # (ConfigTypeError, for a value of the wrong type, is a TypeError.)
    with pytest.raises((ValueError, TypeError), match=match):
        R2D2Trainer(config={**FAST, **overrides}, env=ENV)
