"""RLlib 1.13's attention models (GTrXL): the layers, the memory carried as state, acting
and training seeing the same memory, and `use_attention` training through the catalog."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.ppo import PPOTrainer
from corral.models import ModelCatalog
from corral.models.torch.attention_net import AttentionWrapper, GTrXLNet
from corral.models.torch.modules import (
    GRUGate,
    MultiHeadAttention,
    RelativeMultiHeadAttention,
    RelativePositionEmbedding,
    SkipConnection,
)
from corral.policy.rnn_sequencing import chop_into_sequences

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACTIONS = gym.spaces.Discrete(2)
SMALL = {
    "use_attention": True,
    "max_seq_len": 4,
    "attention_dim": 8,
    "attention_head_dim": 4,
    "attention_num_heads": 2,
    "attention_memory_inference": 5,
    "attention_num_transformer_units": 2,
    "fcnet_hiddens": [16],
}


def _wrapper(**extra) -> AttentionWrapper:
    torch.manual_seed(0)
    model = ModelCatalog.get_model_v2(OBS, ACTIONS, 2, {**SMALL, **extra}, framework="torch")
    assert isinstance(model, AttentionWrapper)
    return model


def test_layers_shapes_and_causality():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8)
    attention = MultiHeadAttention(8, 6, num_heads=2, head_dim=4)
    out = attention(x)
    assert out.shape == (2, 5, 6)
    # A later step does not change an earlier step's output.
    changed = x.clone()
    changed[:, 3:] += 1.0
    torch.testing.assert_close(attention(changed)[:, :3], out[:, :3])

    relative = RelativeMultiHeadAttention(8, 8, 2, 4, input_layernorm=True)
    memory = torch.randn(2, 3, 8)
    out = relative(x, memory=memory)
    assert out.shape == (2, 5, 8)
    torch.testing.assert_close(relative(changed, memory=memory)[:, :3], out[:, :3])
    # The memory matters, and no gradient flows into it.
    assert not torch.allclose(relative(x, memory=torch.randn_like(memory)), out)
    memory.requires_grad_(True)
    relative(x, memory=memory).sum().backward()
    assert memory.grad is None

    assert RelativePositionEmbedding(8)(4).shape == (4, 8)
    gate = GRUGate(8, init_bias=100.0)
    h = torch.randn(2, 8)
    # A large gate bias keeps the stream: the gate starts as the identity.
    torch.testing.assert_close(gate((h, torch.randn(2, 8))), h, atol=1e-4, rtol=0)
    assert torch.equal(SkipConnection(torch.nn.Identity())(h), 2 * h)


def test_relative_attention_is_one_segment_or_memory_plus_segment():
    # Attending over [memory + segment] equals running the segment after its memory.
    torch.manual_seed(1)
    relative = RelativeMultiHeadAttention(8, 8, 2, 4)
    x = torch.randn(1, 6, 8)
    whole = relative(x, memory=torch.zeros(1, 0, 8))
    tail = relative(x[:, 2:], memory=x[:, :2])
    torch.testing.assert_close(tail, whole[:, 2:])


def test_rel_shift_is_rllib_1_13_s_transposed_shift():
    # RLlib 1.13's static `rel_shift`: query i's row of scores by encoding (row k encodes
    # the distance L - 1 - k) becomes its row by key (key j is L - T + i - j steps back).
    torch.manual_seed(2)
    batch, steps, length, heads = 2, 3, 7, 2
    x = torch.randn(batch, steps, length, heads)
    out = RelativeMultiHeadAttention.rel_shift(x)
    assert out.shape == x.shape
    for i in range(steps):
        for j in range(length):
            if j <= length - steps + i:  # keys up to the query: the score of their distance
                torch.testing.assert_close(out[:, i, j], x[:, i, steps - 1 - i + j])
            else:  # (masked) keys after it: a zero, then the next query's first scores
                offset = j - (length - steps + i) - 2
                expected = torch.zeros(batch, heads) if offset < 0 else x[:, i + 1, offset]
                torch.testing.assert_close(out[:, i, j], expected)


def test_state_is_each_units_memory_window():
    model = _wrapper()
    state = model.get_initial_state()
    assert [s.shape for s in state] == [(5, 8), (5, 8)]
    assert all(not s.any() for s in state)
    obs = torch.randn(3, 3)
    windows = [torch.as_tensor(np.stack([s] * 3)) for s in state]
    _, _, new = model.forward_inference_rnn(obs, windows)
    # The window moved on by one step: the old last four rows, then this step's input.
    for old, moved in zip(windows, new):
        torch.testing.assert_close(moved[:, :4], old[:, 1:])
        assert moved[:, 4].abs().sum() > 0


@pytest.mark.parametrize("n_actions, n_rewards", [(1, 1), (3, 2), (0, 4)])
def test_training_sequences_see_the_memory_acting_saw(n_actions, n_rewards):
    """Logits of a 13-step trajectory computed step by step (acting) equal those of its
    max_seq_len chunks, each started from the window recorded at its first step."""
    model = _wrapper(attention_use_n_prev_actions=n_actions, attention_use_n_prev_rewards=n_rewards)
    model.eval()
    steps = 13
    obs = torch.randn(steps, 3)
    prev_actions = torch.randint(0, 2, (steps,))
    prev_rewards = torch.randn(steps)
    state = [torch.as_tensor(s)[None] for s in model.get_initial_state()]
    acted, recorded = [], []
    with torch.no_grad():
        for t in range(steps):
            recorded.append([s[0].numpy() for s in state])
            logits, _, state = model.forward_inference_rnn(
                obs[t : t + 1], state, prev_actions[t : t + 1], prev_rewards[t : t + 1]
            )
            acted.append(logits[0])
    features, initial, seq_lens = chop_into_sequences(
        feature_columns=[obs.numpy(), prev_actions.numpy(), prev_rewards.numpy()],
        state_columns=[np.stack([r[k] for r in recorded]) for k in range(len(state))],
        max_seq_len=4,
        episode_ids=np.zeros(steps),
        dynamic_max=False,
    )
    assert list(seq_lens) == [4, 4, 4, 1]
    input_dict = {
        "obs": torch.as_tensor(features[0]),
        "prev_actions": torch.as_tensor(features[1]),
        "prev_rewards": torch.as_tensor(features[2]),
    }
    with torch.no_grad():
        out, _ = model(input_dict, [torch.as_tensor(s) for s in initial], torch.as_tensor(seq_lens))
        values = model.value_function()
    rows = torch.as_tensor(np.arange(16) % 4 < np.repeat(seq_lens, 4))
    torch.testing.assert_close(out[rows], torch.stack(acted), atol=1e-5, rtol=1e-5)
    assert values.shape == (16,)


def test_gtrxl_as_a_custom_model_and_its_errors():
    model = GTrXLNet(
        OBS,
        ACTIONS,
        2,
        {"max_seq_len": 4},
        "gtrxl",
        attention_dim=8,
        head_dim=4,
        memory_inference=3,
        num_transformer_units=1,
    )
    out, state = model(
        {"obs": torch.randn(8, 3)},
        [torch.zeros(2, 3, 8)],
        torch.tensor([4, 4]),
    )
    assert out.shape == (8, 2) and state[0].shape == (2, 3, 8)
    assert model.value_function().shape == (8,)
    with pytest.raises(ValueError, match="attention_dim must be even"):
        GTrXLNet(OBS, ACTIONS, 2, {}, "g", attention_dim=7)
    with pytest.raises(ValueError, match="Only one of `use_lstm` or `use_attention`"):
        _wrapper(use_lstm=True)


def test_n_previous_actions_and_rewards_reach_the_transformer_oldest_first():
    model = _wrapper(attention_use_n_prev_actions=3, attention_use_n_prev_rewards=2)
    state = model.get_initial_state()
    # Two units' windows, then the 2 older actions (one-hot) and the 1 older reward.
    assert [s.shape for s in state[2:]] == [(2, 2), (1, 1)]
    seen = []
    model.gtrxl.linear_layer.register_forward_pre_hook(lambda _, args: seen.append(args[0]))
    state = [torch.as_tensor(s)[None] for s in state]
    with torch.no_grad():
        for action, reward in [(1, 0.5), (0, -1.0), (1, 2.0)]:
            _, _, state = model.forward_inference_rnn(
                torch.zeros(1, 3), state, torch.tensor([action]), torch.tensor([reward])
            )
    # The third step's input: 16 base features, actions 1, 0, 1 one-hot, rewards -1, 2.
    last = seen[-1][0, 0, 16:]
    torch.testing.assert_close(last, torch.tensor([0.0, 1.0, 1.0, 0.0, 0.0, 1.0, -1.0, 2.0]))
    # The first step saw zeros before the episode's start.
    torch.testing.assert_close(
        seen[0][0, 0, 16:], torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.5])
    )


@pytest.mark.parametrize("extra", [{}, {"attention_use_n_prev_actions": 1}])
def test_ppo_trains_with_use_attention_and_checkpoints(tmp_path, extra):
    config = {
        "env": "CartPole-v1",
        "num_workers": 0,
        "train_batch_size": 128,
        "sgd_minibatch_size": 64,
        "num_sgd_iter": 2,
        "seed": 0,
        "model": {**SMALL, **extra},
    }
    trainer = PPOTrainer(config=config)
    try:
        policy = trainer.get_policy()
        before = {k: v.clone() for k, v in policy.model.state_dict().items()}
        result = trainer.train()
        assert result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"] == (
            pytest.approx(
                result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"]
            )
        )
        after = policy.model.state_dict()
        assert any(not torch.equal(before[k], after[k]) for k in before if "gtrxl" in k)
        path = trainer.save(str(tmp_path))
        state = policy.get_initial_state()
        action = trainer.compute_single_action(
            np.zeros(4), state=state, prev_action=0, prev_reward=0.0, explore=False
        )
    finally:
        trainer.stop()
    restored = PPOTrainer(config=config)
    try:
        restored.restore(path)
        again = restored.compute_single_action(
            np.zeros(4), state=state, prev_action=0, prev_reward=0.0, explore=False
        )
        assert again[0] == action[0]
        for a, b in zip(again[1], action[1]):
            np.testing.assert_allclose(a, b, atol=1e-6)
    finally:
        restored.stop()


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"attention_use_n_prev_actions": 1},
        {"attention_use_n_prev_actions": 3, "attention_use_n_prev_rewards": 2},
    ],
)
def test_ppo_training_recomputes_what_acting_computed(extra):
    # With a rate too small to move the weights, the learner's sequences (cut from the
    # sampled rows, each started from the memory window recorded at its first step)
    # give the sampled action distributions back: zero KL, ratio one.
    trainer = PPOTrainer(
        config={
            "env": "CartPole-v1",
            "num_workers": 0,
            "train_batch_size": 200,
            "sgd_minibatch_size": 200,
            "num_sgd_iter": 1,
            "lr": 1e-30,
            "seed": 1,
            "model": {**SMALL, **extra},
        }
    )
    try:
        stats = trainer.train()["info"]["learner"]["default_policy"]["learner_stats"]
        assert stats["kl"] == pytest.approx(0.0, abs=1e-7)
    finally:
        trainer.stop()
