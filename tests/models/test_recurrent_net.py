"""The LSTM wrapper: RLlib's [B * T] <-> [B, T] layout, padding, state, and the fast path."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.models import MODEL_DEFAULTS, ModelCatalog
from corral.models.torch.recurrent_net import LSTMWrapper, add_time_dimension

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT = gym.spaces.Discrete(4)


def make(**overrides):
    config = {**MODEL_DEFAULTS, "use_lstm": True, "lstm_cell_size": 8, "fcnet_hiddens": [16]}
    config.update(overrides)
    torch.manual_seed(0)
    return ModelCatalog.get_model_v2(OBS, ACT, 4, config)


def initial(model, batch):
    return [torch.as_tensor(np.stack([s] * batch)) for s in model.get_initial_state()]


def test_add_time_dimension_layout():
    rows = torch.arange(12).reshape(6, 2)
    out = add_time_dimension(rows, torch.tensor([3, 1]))
    assert out.shape == (2, 3, 2)
    torch.testing.assert_close(out[1, 0], rows[3])
    assert add_time_dimension(rows, torch.tensor([3, 1]), time_major=True).shape == (3, 2, 2)
    with pytest.raises(ValueError, match="padded"):
        add_time_dimension(rows[:5], torch.tensor([3, 1]))


def test_catalog_wraps_default_model():
    model = make()
    assert isinstance(model, LSTMWrapper)
    h, c = model.get_initial_state()
    assert isinstance(h, np.ndarray) and h.shape == (8,) and c.shape == (8,)


def test_forward_with_seq_lens_matches_stepping_one_by_one():
    model = make()
    seq_lens = torch.tensor([3, 1, 2])
    T = 3
    obs = torch.randn(len(seq_lens) * T, 3)
    out, (h, c) = model({"obs": obs}, initial(model, 3), seq_lens)
    values = model.value_function()
    assert out.shape == (9, 4) and values.shape == (9,)
    for b, length in enumerate(seq_lens.tolist()):
        state = initial(model, 1)
        for t in range(length):
            row = b * T + t
            step_out, step_value, state = model.forward_inference_rnn(obs[row : row + 1], state)
            torch.testing.assert_close(step_out[0], out[row], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(step_value[0], values[row], atol=1e-5, rtol=1e-5)
        # The returned state is the one after the last real step, not after the padding.
        torch.testing.assert_close(h[b], state[0][0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(c[b], state[1][0], atol=1e-5, rtol=1e-5)


def test_padding_does_not_change_real_steps():
    model = make()
    obs = torch.randn(4, 3)
    out_short, _ = model({"obs": obs[:2]}, initial(model, 1), torch.tensor([2]))
    padded = torch.cat([obs[:2], torch.zeros(2, 3)])
    out_padded, _ = model({"obs": padded}, initial(model, 1), torch.tensor([2]))
    torch.testing.assert_close(out_padded[:2], out_short)


def test_prev_action_and_reward_inputs():
    model = make(lstm_use_prev_action=True, lstm_use_prev_reward=True)
    assert model.lstm.input_size == 16 + 4 + 1
    obs = torch.randn(4, 3)
    input_dict = {
        "obs": obs,
        "prev_actions": torch.tensor([0, 1, 2, 3]),
        "prev_rewards": torch.tensor([0.0, 1.0, -1.0, 0.5]),
    }
    out, _ = model(input_dict, initial(model, 2), torch.tensor([2, 2]))
    assert out.shape == (4, 4)
    fast, _, _ = model.forward_inference_rnn(
        obs[:1], initial(model, 1), np.array([0]), np.array([0.0])
    )
    torch.testing.assert_close(fast[0], out[0], atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="previous actions"):
        model.forward_inference_rnn(obs[:1], initial(model, 1))


def test_time_major_gives_the_same_outputs():
    obs = torch.randn(6, 3)
    seq_lens = torch.tensor([3, 3])
    batch_major = make()
    out_b, _ = batch_major({"obs": obs}, initial(batch_major, 2), seq_lens)
    time_major = make(_time_major=True)
    time_major.load_state_dict(batch_major.state_dict())
    # Time-major rows are [T, B]: reorder the batch-major rows to that layout and back.
    tm_obs = obs.reshape(2, 3, 3).transpose(0, 1).reshape(6, 3)
    out_t, _ = time_major({"obs": tm_obs}, initial(time_major, 2), seq_lens)
    torch.testing.assert_close(out_t.reshape(3, 2, 4).transpose(0, 1).reshape(6, 4), out_b)


def test_lstm_on_images():
    image = gym.spaces.Box(0, 255, (42, 42, 3), np.uint8)
    config = {**MODEL_DEFAULTS, "use_lstm": True, "lstm_cell_size": 8}
    model = ModelCatalog.get_model_v2(image, ACT, 4, config)
    out, _ = model({"obs": torch.rand(4, 42, 42, 3)}, initial(model, 2), torch.tensor([2, 2]))
    assert out.shape == (4, 4)


@pytest.mark.parametrize("obs_shape", [(3,), (42, 42, 3)], ids=["fcnet", "visionnet"])
def test_a_forward_in_between_leaves_the_running_forwards_rows_alone(obs_shape):
    # Asynchronous algorithms act (one env: one row through the LSTM's base model) while
    # the learner thread runs a sequence batch through the same model. Here the acting
    # call runs at the worst moment, right as the training call caches its features:
    # the training call's output must still be its own rows.
    space = gym.spaces.Box(0.0, 1.0, obs_shape, np.float32)
    config = {**MODEL_DEFAULTS, "use_lstm": True, "lstm_cell_size": 8, "fcnet_hiddens": [8]}
    if len(obs_shape) == 3:
        config["conv_filters"] = [[4, [42, 42], 1]]
    model = ModelCatalog.get_model_v2(space, ACT, 4, config)
    one_row, acting = torch.rand(1, *obs_shape), []

    class ActsInBetween(type(model.base)):
        def __setattr__(self, name, value):
            super().__setattr__(name, value)
            if name == "_features" and not acting:
                acting.append(True)
                with torch.no_grad():
                    model.forward_inference_rnn(one_row, initial(model, 1))
                acting.clear()

    model.base.__class__ = ActsInBetween
    out, _ = model({"obs": torch.rand(40, *obs_shape)}, initial(model, 4), torch.tensor([10] * 4))
    assert out.shape == (40, 4) and model.value_function().shape == (40,)
