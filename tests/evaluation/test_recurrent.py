"""Recurrent policies end to end: state through sampling, sequences in training."""

import numpy as np
import pytest
import torch

from corral.agents.ppo import PPOTrainer
from corral.core.learner.training_data import SEQ_MASK, pad_sequences
from corral.env.stateless_cartpole import StatelessCartPole
from corral.policy.sample_batch import SampleBatch

CONFIG = {
    "num_workers": 0,
    "num_envs_per_worker": 3,
    "rollout_fragment_length": 30,
    "train_batch_size": 90,
    "sgd_minibatch_size": 28,
    "num_sgd_iter": 2,
    "seed": 0,
    "model": {
        "fcnet_hiddens": [16],
        "use_lstm": True,
        "lstm_cell_size": 8,
        "max_seq_len": 7,
        "lstm_use_prev_action": True,
        "lstm_use_prev_reward": True,
    },
}


@pytest.fixture
def trainer():
    t = PPOTrainer(config=CONFIG, env=StatelessCartPole)
    yield t
    t.stop()


def test_sampler_carries_and_resets_state(trainer):
    batch = trainer.workers.local_worker().sample()
    assert {"state_in_0", "state_in_1", "state_out_0", SampleBatch.PREV_ACTIONS} <= set(batch)
    first_steps = batch[SampleBatch.T] == 0
    # Every episode starts from the zero state with no previous action/reward.
    assert np.all(batch["state_in_0"][first_steps] == 0)
    assert np.all(batch[SampleBatch.PREV_REWARDS][first_steps] == 0)
    # Within an episode, state_in(t+1) == state_out(t).
    eps = batch[SampleBatch.EPS_ID]
    same = np.flatnonzero(eps[1:] == eps[:-1])
    np.testing.assert_allclose(batch["state_in_0"][same + 1], batch["state_out_0"][same])
    np.testing.assert_array_equal(
        batch[SampleBatch.PREV_ACTIONS][same + 1], batch[SampleBatch.ACTIONS][same]
    )


def test_training_sequences_reproduce_the_sampled_outputs(trainer):
    policy = trainer.get_policy()
    batch = trainer.workers.local_worker().sample()
    rows, seqs = pad_sequences(batch, None, 2, 7)
    assert int(seqs[SampleBatch.SEQ_LENS].max()) <= 7
    assert int(seqs[SampleBatch.SEQ_LENS].sum()) == batch.count
    with torch.no_grad():
        dist_inputs, values = policy.forward_train({**rows, **seqs})
    mask = rows[SEQ_MASK]
    torch.testing.assert_close(dist_inputs[mask], rows[SampleBatch.ACTION_DIST_INPUTS][mask])
    torch.testing.assert_close(values[mask], rows[SampleBatch.VF_PREDS][mask])


def test_sequences_never_cross_episodes():
    eps = np.array([1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3])
    batch = SampleBatch(
        {
            SampleBatch.EPS_ID: eps,
            SampleBatch.OBS: np.arange(12, dtype=np.float32)[:, None],
            "state_in_0": np.arange(12, dtype=np.float32)[:, None],
        }
    )
    rows, seqs = pad_sequences(batch, None, 1, 4)
    assert seqs[SampleBatch.SEQ_LENS].tolist() == [3, 4, 4, 1]
    assert seqs["state_in_0"][:, 0].tolist() == [0, 3, 7, 11]
    assert rows[SEQ_MASK].reshape(4, 4).sum(1).tolist() == [3, 4, 4, 1]


def test_compute_single_action_returns_next_state(trainer):
    policy = trainer.get_policy()
    state = policy.get_initial_state()
    obs = np.zeros(2, np.float32)
    action, state_out, extra = trainer.compute_single_action(
        obs, state, prev_action=0, prev_reward=0.0, explore=False
    )
    assert action in (0, 1)
    assert len(state_out) == 2 and state_out[0].shape == (8,)
    assert not np.allclose(state_out[0], 0)


def test_one_training_iteration(trainer):
    result = trainer.train()
    stats = result["info"]["learner"]["default_policy"]["learner_stats"]
    assert np.isfinite(stats["total_loss"])


def test_bootstrap_value_at_a_fragment_cut_is_the_next_fragments_first_value(trainer):
    # GAE bootstraps a cut trajectory with V(new_obs) from the stored state_out and the
    # last action/reward: exactly what the sampler computes at the next fragment's first step.
    policy = trainer.get_policy()
    worker = trainer.workers.local_worker()
    first, second = worker.sample(), worker.sample()
    T = CONFIG["rollout_fragment_length"]
    last_rows = np.arange(1, CONFIG["num_envs_per_worker"] + 1) * T - 1
    first_rows = last_rows - T + 1
    continued = first[SampleBatch.EPS_ID][last_rows] == second[SampleBatch.EPS_ID][first_rows]
    assert continued.any()
    cut, nxt = last_rows[continued], first_rows[continued]
    np.testing.assert_allclose(
        policy.bootstrap_values(first, cut), second[SampleBatch.VF_PREDS][nxt], rtol=1e-5, atol=1e-6
    )
