"""RNNSAC: sequences replayed whole with the actor's and critics' states, burn-in, recurrent
acting, checkpoints, config errors."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.registry import get_trainer_class
from corral.agents.sac import RNNSAC_DEFAULT_CONFIG, RNNSACTorchPolicy, RNNSACTrainer
from corral.agents.sac import rnnsac as rnnsac_module
from corral.agents.sac.rnnsac_torch_model import RNNSACTorchModel
from corral.core.learner.training_data import SEQ_MASK
from corral.policy.sample_batch import SampleBatch

ENV = "corral.env.stateless_cartpole.StatelessCartPole"
NET = {
    "use_lstm": True,
    "lstm_cell_size": 8,
    "fcnet_hiddens": [8],
    "lstm_use_prev_action": True,
    "lstm_use_prev_reward": True,
}
FAST = {
    "num_workers": 0,
    "min_time_s_per_reporting": 0,
    "min_sample_timesteps_per_reporting": 64,
    "learning_starts": 32,
    "train_batch_size": 24,
    "burn_in": 2,
    "model": {"max_seq_len": 4},
    "policy_model": NET,
    "Q_model": NET,
    "seed": 0,
}
CELL = 8


def test_defaults_are_rllib_1_13s_and_registered():
    assert get_trainer_class("RNNSAC") is RNNSACTrainer
    assert rnnsac_module.DEFAULT_CONFIG is RNNSAC_DEFAULT_CONFIG
    c = RNNSAC_DEFAULT_CONFIG
    assert c["batch_mode"] == "complete_episodes"
    assert (c["zero_init_states"], c["burn_in"], c["replay_sequence_length"]) == (True, 0, -1)
    assert c["replay_buffer_config"]["replay_sequence_length"] == -1
    # SAC's own defaults.
    assert (c["twin_q"], c["tau"], c["initial_alpha"], c["learning_starts"]) == (
        True,
        5e-3,
        1.0,
        1500,
    )


# -- replay -------------------------------------------------------------------------


def test_trainer_stores_and_replays_whole_sequences_with_all_states():
    trainer = RNNSACTrainer(config={**FAST, "prioritized_replay": True}, env=ENV)
    buffer = trainer.local_replay_buffer
    updates = []
    update_priorities = buffer.update_priorities
    buffer.update_priorities = lambda prio: (updates.append(prio), update_priorities(prio))
    try:
        assert trainer.config["replay_buffer_config"]["replay_sequence_length"] == 6
        assert trainer.config["replay_sequence_length"] == 6
        assert buffer.replay_sequence_length == 6 and buffer.prioritized
        policy = trainer.get_policy()
        assert policy.sequence_length == 6 and policy.config["model"]["max_seq_len"] == 6
        # Actor, critic, twin critic: (h, c) each.
        assert len(policy.get_initial_state()) == 6
        result = trainer.train()
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        for key in ("actor_loss", "critic_loss", "alpha_loss", "mean_q"):
            assert np.isfinite(stats[key]), key

        replayed = buffer.sample(8).policy_batches["default_policy"]
        seq_lens = replayed[SampleBatch.SEQ_LENS]
        assert replayed.count == 8 * 6 and len(seq_lens) == 8
        eps = replayed[SampleBatch.EPS_ID].reshape(8, 6)
        t = replayed[SampleBatch.PREV_REWARDS].reshape(8, 6)
        for i, n in enumerate(seq_lens):
            assert len(set(eps[i, :n])) == 1 and (t[i, n:] == 0).all()
        # Every network's state travels with the sequence (recorded at its first step).
        for j in range(6):
            states = replayed[f"state_in_{j}"].reshape(8, 6, CELL)
            assert np.abs(states[:, 0]).sum() > 0 or j % 2  # (h of a fresh episode: zeros)
    finally:
        trainer.stop()
    # Prioritized replay: one priority per replayed sequence (24 // 6 = 4 per update).
    assert updates
    for prio in updates:
        indexes, td_error = prio["default_policy"]
        assert len(indexes) == len(td_error) and len(indexes) % 4 == 0
        assert (td_error >= 0).all()


# -- the loss -------------------------------------------------------------------------


def make_policy(action_space=None, **overrides):
    config = RNNSACTrainer.merge_trainer_configs(
        RNNSAC_DEFAULT_CONFIG,
        {
            "model": {"max_seq_len": 4},
            "policy_model": NET,
            "Q_model": NET,
            "gamma": 0.9,
            "_deterministic_loss": True,
            **overrides,
        },
    )
    space = action_space or gym.spaces.Discrete(2)
    return RNNSACTorchPolicy(gym.spaces.Box(-10, 10, (2,)), space, config)


def sequences(num_seqs, length, discrete=True, seed=0):
    """Padded-sequence tensors as the learner hands them to the loss (all steps real)."""
    g = torch.Generator().manual_seed(seed)
    rows = num_seqs * length
    if discrete:
        actions = torch.randint(0, 2, (rows,), generator=g)
    else:
        actions = torch.rand(rows, 1, generator=g) * 2 - 1
    batch = {
        SampleBatch.OBS: torch.randn(rows, 2, generator=g),
        SampleBatch.ACTIONS: actions,
        SampleBatch.PREV_ACTIONS: torch.roll(actions, 1, 0),
        SampleBatch.REWARDS: torch.rand(rows, generator=g),
        SampleBatch.PREV_REWARDS: torch.rand(rows, generator=g),
        SampleBatch.TERMINATEDS: torch.zeros(rows, dtype=torch.bool),
        SEQ_MASK: torch.ones(rows, dtype=torch.bool),
        SampleBatch.SEQ_LENS: torch.full((num_seqs,), length, dtype=torch.int32),
    }
    for j in range(6):
        batch[f"state_in_{j}"] = torch.randn(num_seqs, CELL, generator=g)
    return batch


def split_steps(batch, num_seqs, length, lo, hi):
    keys = [k for k in batch if batch[k].shape[0] == num_seqs * length]
    per_row = {k: batch[k].reshape(num_seqs, length, *batch[k].shape[1:])[:, lo:hi] for k in keys}
    return {k: v.reshape(-1, *v.shape[2:]) for k, v in per_row.items()}


@pytest.mark.parametrize("discrete", [True, False])
def test_burn_in_steps_only_warm_up_the_states(discrete):
    space = None if discrete else gym.spaces.Box(-1, 1, (1,))
    burn_in, rest = 3, 4
    with_burn_in = make_policy(space, burn_in=burn_in, zero_init_states=False)
    without = make_policy(space, burn_in=0, zero_init_states=False)
    without.set_weights(with_burn_in.get_weights())
    without.update_target(1.0)
    batch = sequences(2, burn_in + rest, discrete)
    stats, td = with_burn_in._sequence_losses(batch)

    # The same losses: the non-burn-in steps, from the states after the burn-in (each
    # network's own, the target critics' from the critics' stored states).
    m = with_burn_in.model
    warm = split_steps(batch, 2, burn_in + rest, 0, burn_in)
    seq_lens = torch.full((2,), burn_in, dtype=torch.int32)
    states = m.select_state([batch[f"state_in_{j}"] for j in range(6)], ["policy", "q", "twin_q"])
    with torch.no_grad():
        model_out, _ = m(warm, [], seq_lens)
        _, policy_state = m.get_action_model_outputs(model_out, states["policy"], seq_lens)
        warm_actions = None if discrete else warm[SampleBatch.ACTIONS]
        critic_states = [
            m.critic_values(net, model_out, states[name], seq_lens, warm_actions)[1]
            for net, name in zip(m.critics, ["q", "twin_q"])
        ]
    rest_batch = {
        **split_steps(batch, 2, burn_in + rest, burn_in, burn_in + rest),
        SampleBatch.SEQ_LENS: torch.full((2,), rest, dtype=torch.int32),
    }
    for j, s in enumerate(policy_state + critic_states[0] + critic_states[1]):
        rest_batch[f"state_in_{j}"] = s
    expected, expected_td = without._sequence_losses(rest_batch)
    if discrete:
        for key in ("actor_loss", "critic_loss", "alpha_loss"):
            torch.testing.assert_close(stats[key], expected[key], msg=key)
        torch.testing.assert_close(td, expected_td)
    else:
        # Box actions: the critics' Q of the taken actions (their targets and the actor's
        # loss run the critics over the actor's actions, burn-in steps included, as in
        # RLlib 1.13).
        torch.testing.assert_close(stats["mean_q"], expected["mean_q"])

    # Rewards of the burn-in steps do not matter to the losses.
    changed = dict(batch)
    rewards = changed[SampleBatch.REWARDS].reshape(2, -1).clone()
    rewards[:, :burn_in] += 100.0
    changed[SampleBatch.REWARDS] = rewards.reshape(-1)
    again, _ = with_burn_in._sequence_losses(changed)
    torch.testing.assert_close(again["critic_loss"], stats["critic_loss"])


def test_zero_init_states_ignores_the_stored_states():
    policy = make_policy(zero_init_states=True)
    batch = sequences(2, 5)
    stats, _ = policy._sequence_losses(batch)
    for j in range(6):
        batch[f"state_in_{j}"] = batch[f"state_in_{j}"] + 5.0
    again, _ = policy._sequence_losses(batch)
    torch.testing.assert_close(again["critic_loss"], stats["critic_loss"])


def test_target_bootstraps_within_the_sequence_and_stops_at_termination():
    policy = make_policy(twin_q=False, burn_in=0, zero_init_states=False)
    batch = sequences(1, 4)
    batch[SampleBatch.TERMINATEDS] = torch.tensor([False, True, False, False])
    batch[SampleBatch.SEQ_LENS] = torch.tensor([3], dtype=torch.int32)
    batch[SEQ_MASK] = torch.tensor([True, True, True, False])
    m = policy.model
    with torch.no_grad():
        stats, td_per_seq = policy._sequence_losses(batch)
        model_out, _ = m(batch, [], batch[SampleBatch.SEQ_LENS])
        states = m.select_state([batch[f"state_in_{j}"] for j in range(4)], ["policy", "q"])
        logits, _ = m.get_action_model_outputs(model_out, states["policy"], torch.tensor([3]))
        q, _ = m.get_q_values(model_out, states["q"], torch.tensor([3]))
    log_pi = torch.log_softmax(logits, -1)
    alpha = m.log_alpha.exp()
    v = (log_pi.exp() * (q - alpha * log_pi)).sum(-1)  # target critics == critics at start
    a, r = batch[SampleBatch.ACTIONS], batch[SampleBatch.REWARDS]
    q_sel = q[torch.arange(4), a]
    # Step 0 bootstraps from step 1; step 1 terminates; step 2 has no next step.
    td = torch.stack([q_sel[0] - (r[0] + 0.9 * v[1]), q_sel[1] - r[1]])
    expected = torch.nn.functional.huber_loss(td, torch.zeros(2), reduction="mean")
    torch.testing.assert_close(stats["critic_loss"], expected)
    torch.testing.assert_close(td_per_seq, td.abs().mean().reshape(1))


def test_the_actor_loss_does_not_train_the_critics():
    policy = make_policy(gym.spaces.Box(-1, 1, (1,)))
    stats, _ = policy._sequence_losses(sequences(2, 5, discrete=False))
    stats["actor_loss"].backward()
    m = policy.model
    assert all(p.grad is None or not p.grad.any() for p in m.q_variables())
    assert any(p.grad is not None and p.grad.any() for p in m.policy_variables())


# -- acting ---------------------------------------------------------------------------


@pytest.mark.parametrize("discrete", [True, False])
def test_acting_carries_the_actor_and_critic_states(discrete):
    policy = make_policy(None if discrete else gym.spaces.Box(-1, 1, (1,)))
    obs = np.array([[0.1, -0.2], [0.3, 0.0]], np.float32)
    state = [np.zeros((2, CELL), np.float32) for _ in range(6)]
    prev_a = np.zeros(2, np.int64) if discrete else np.zeros((2, 1), np.float32)
    prev_r = np.zeros(2, np.float32)
    actions, extra = policy.compute_actions_from_obs(obs, False, state, prev_a, prev_r)
    outs = [extra[f"state_out_{j}"] for j in range(6)]
    assert all(s.shape == (2, CELL) and np.abs(s).sum() > 0 for s in outs)
    # The actor's state out is its LSTM's after the step: feeding it back changes the
    # next step's distribution inputs compared with starting over.
    _, again = policy.compute_actions_from_obs(obs, False, outs, actions, prev_r + 1)
    _, fresh = policy.compute_actions_from_obs(obs, False, state, actions, prev_r + 1)
    dist = SampleBatch.ACTION_DIST_INPUTS
    assert not np.allclose(again[dist], fresh[dist])
    # The same as a two-step sequence through the training path.
    m = policy.model
    seq = {
        SampleBatch.OBS: torch.from_numpy(np.stack([obs, obs], 1).reshape(4, 2)),
        SampleBatch.PREV_ACTIONS: torch.from_numpy(np.stack([prev_a, actions], 1)).reshape(
            4, *prev_a.shape[1:]
        ),
        SampleBatch.PREV_REWARDS: torch.from_numpy(np.stack([prev_r, prev_r + 1], 1)).reshape(4),
    }
    with torch.no_grad():
        model_out, _ = m(seq, [], None)
        policy_state = [torch.zeros(2, CELL), torch.zeros(2, CELL)]
        logits, _ = m.get_action_model_outputs(model_out, policy_state, torch.tensor([2, 2]))
    np.testing.assert_allclose(logits.reshape(2, 2, -1)[:, 1].numpy(), again[dist], atol=1e-5)


def test_trainer_compute_single_action_with_state():
    trainer = RNNSACTrainer(config=FAST, env=ENV)
    try:
        state = trainer.get_policy().get_initial_state()
        action, state_out, _ = trainer.compute_single_action(
            np.array([0.01, -0.02], np.float32), state, prev_action=0, prev_reward=0.0
        )
        assert action in (0, 1) and len(state_out) == 6
    finally:
        trainer.stop()


# -- checkpoints and config errors ----------------------------------------------------


def test_checkpoint_round_trip(tmp_path):
    config = {**FAST, "zero_init_states": False, "store_buffer_in_checkpoints": True}
    trainer = RNNSACTrainer(config=config, env=ENV)
    try:
        trainer.train()
        path = trainer.save(str(tmp_path))
        weights = trainer.get_policy().get_state()["weights"]
        stored = len(trainer.local_replay_buffer)
    finally:
        trainer.stop()
    restored = RNNSACTrainer(config=config, env=ENV)
    try:
        restored.restore(path)
        again = restored.get_policy().get_state()["weights"]
        assert set(again) == set(weights) and any(k.startswith("_target.") for k in again)
        for k, v in weights.items():
            np.testing.assert_array_equal(again[k], v, err_msg=k)
        assert len(restored.local_replay_buffer) == stored > 0
        restored.train()
    finally:
        restored.stop()


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"replay_buffer_config": {"replay_sequence_length": 7}}, "replay_sequence_length"),
        ({"replay_sequence_length": 7}, "replay_sequence_length"),
        ({"batch_mode": "truncate_episodes"}, "complete_episodes"),
        ({"policy_model": {**NET, "use_lstm": False}}, "policy_model"),
        ({"Q_model": {"fcnet_hiddens": [8]}}, "use_lstm"),
        ({"Q_model": {**NET, "lstm_cell": 8}}, "Q_model"),
        ({"model": {"max_seq_len": 1}}, "max_seq_len"),
        ({"burn_in": -1}, "burn_in"),
        ({"use_state_preprocessor": True}, "use_state_preprocessor"),
        ({"zero_init_states": "yes"}, "zero_init_states"),
        ({"policy_model": {**NET, "lstm_cell_size": 0}}, "lstm_cell_size"),
    ],
)
def test_config_errors(overrides, match):
    with pytest.raises((ValueError, TypeError), match=match):
        RNNSACTrainer(config={**FAST, **overrides}, env=ENV)


def test_model_select_state_and_initial_state():
    model = make_policy().model
    assert isinstance(model, RNNSACTorchModel)
    state = [np.full(CELL, j, np.float32) for j in range(6)]
    parts = model.select_state(state, ["policy", "q", "twin_q"])
    assert [int(s[0]) for s in parts["policy"]] == [0, 1]
    assert [int(s[0]) for s in parts["twin_q"]] == [4, 5]
    with pytest.raises(ValueError, match="unknown"):
        model.select_state(state, ["value"])
    single = make_policy(twin_q=False).model
    assert len(single.get_initial_state()) == 4
    assert single.select_state(state[:4], ["twin_q"])["twin_q"] == []
