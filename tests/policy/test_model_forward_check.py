"""A custom model whose `forward` does not return `(outputs, state_out)` (state_out a list)
is refused at policy construction, as in RLlib 1.13, whose policies ran a dummy batch
through the model there; good models (feed-forward and recurrent) are unaffected."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from corral.agents.pg import PGTrainer
from corral.agents.pg.pg import DEFAULT_CONFIG as PG_CONFIG
from corral.agents.pg.pg_torch_policy import PGTorchPolicy
from corral.models import ModelCatalog
from corral.models.modelv2 import ModelV2
from corral.models.torch.recurrent_net import RecurrentNetwork
from corral.models.torch.torch_action_dist import TorchCategorical
from corral.models.torch.torch_modelv2 import TorchModelV2
from corral.policy.policy_template import build_policy_class
from corral.policy.torch_policy import TorchPolicy

OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACT_SPACE = gym.spaces.Discrete(2)


class GoodModel(TorchModelV2, nn.Module):
    """A feed-forward model of RLlib's contract; counts its `forward` calls."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        self.logits = nn.Linear(4, num_outputs)
        self.dropout = nn.Dropout(0.5)
        self.value = nn.Linear(4, 1)
        self.calls = 0

    def forward(self, input_dict, state, seq_lens):
        self.calls += 1
        self._obs = input_dict["obs"].float()
        return self.logits(self.dropout(self._obs)), state

    def value_function(self):
        return self.value(self._obs).squeeze(-1)


class BareTensorModel(GoodModel):
    """Returns the logits alone, without the state."""

    def forward(self, input_dict, state, seq_lens):
        return super().forward(input_dict, state, seq_lens)[0]


class TupleStateModel(GoodModel):
    """Returns its state output as a tuple."""

    def forward(self, input_dict, state, seq_lens):
        out, _ = super().forward(input_dict, state, seq_lens)
        return out, tuple(state)


class RecurrentModel(GoodModel):
    """A stateful model (one state tensor), its state out a list."""

    def get_initial_state(self):
        return [torch.zeros(3)]

    def forward(self, input_dict, state, seq_lens):
        out, _ = super().forward(input_dict, state, seq_lens)
        return out, [state[0] + 1.0]


class RecurrentTupleStateModel(RecurrentModel):
    def forward(self, input_dict, state, seq_lens):
        out, state_out = super().forward(input_dict, state, seq_lens)
        return out, tuple(state_out)


class NoisyModel(GoodModel):
    """Draws torch random numbers in every call (noisy logits)."""

    def forward(self, input_dict, state, seq_lens):
        out, state_out = super().forward(input_dict, state, seq_lens)
        return out + 0.01 * torch.randn_like(out), state_out


class ZeroShyModel(GoodModel):
    """Fails on the all-zero dummy batch (not on real observations): left to act."""

    def forward(self, input_dict, state, seq_lens):
        if not input_dict["obs"].any():
            raise RuntimeError("all-zero observations")
        return super().forward(input_dict, state, seq_lens)


def _policy(model_cls: type) -> PGTorchPolicy:
    config = dict(PG_CONFIG, model=dict(PG_CONFIG["model"], custom_model=model_cls))
    return PGTorchPolicy(OBS_SPACE, ACT_SPACE, config)


def test_bare_tensor_forward_is_refused_at_construction():
    with pytest.raises(ValueError, match=r"BareTensorModel: forward\(\) must return a tuple"):
        _policy(BareTensorModel)


@pytest.mark.parametrize("model_cls", [TupleStateModel, RecurrentTupleStateModel])
def test_tuple_state_out_is_refused_at_construction(model_cls):
    with pytest.raises(ValueError, match=f"{model_cls.__name__}: State output is not a list"):
        _policy(model_cls)


def test_trainer_with_a_bad_custom_model_fails_at_construction():
    ModelCatalog.register_custom_model("bare_tensor_model", BareTensorModel)
    with pytest.raises(ValueError, match=r"forward\(\) must return a tuple"):
        PGTrainer(
            env="CartPole-v1",
            config={"num_workers": 0, "model": {"custom_model": "bare_tensor_model"}},
        )


@pytest.mark.parametrize("model_cls", [GoodModel, RecurrentModel])
def test_good_models_are_checked_once_and_left_as_they_were(model_cls):
    torch.manual_seed(0)
    policy = _policy(model_cls)
    model = policy.model
    assert model.calls == 1  # the one check at construction
    assert model.training and model.dropout.training  # its modes restored
    state = [s[None] for s in policy.get_initial_state()]
    actions, state_out, _ = policy.compute_actions(np.zeros((1, 4), np.float32), state)
    assert actions.shape == (1,)
    assert len(state_out) == len(state)
    assert model.calls == 2


def test_the_check_leaves_torch_random_numbers_as_they_were():
    torch.manual_seed(3)
    checked = _policy(NoisyModel)
    after_check = torch.rand(3)
    torch.manual_seed(3)
    unchecked = _policy(ZeroShyModel)  # the same draws to build it; no forward got through
    assert checked.model.calls == 1 and unchecked.model.calls == 0
    assert torch.equal(after_check, torch.rand(3))


def test_model_failing_on_the_dummy_batch_is_left_to_act():
    policy = _policy(ZeroShyModel)
    actions, _, _ = policy.compute_actions(np.ones((2, 4), np.float32))
    assert actions.shape == (2,)


def test_model_v2_call_checks_the_same():
    class PlainModel(ModelV2):
        def forward(self, input_dict, state, seq_lens):
            return input_dict["obs"]

    model = PlainModel(OBS_SPACE, ACT_SPACE, 2, {}, "plain", "torch")
    with pytest.raises(ValueError, match=r"forward\(\) must return a tuple"):
        model({"obs": torch.zeros(2, 4)})


def _logits_dist_fn(policy, model, input_dict, **kwargs):
    return model(input_dict), TorchCategorical, []


def _unused_loss(policy, model, dist_class, train_batch):
    raise AssertionError("not called here")


def test_models_acting_through_a_distribution_fn_are_not_checked():
    """The model is the user's function's business then (its forward gives the logits
    alone here); RLlib 1.13 checked only what that function's model call returned."""

    class OwnPolicy(TorchPolicy):
        def __init__(self, observation_space, action_space, config):
            config = dict(PG_CONFIG, **config)
            model = BareTensorModel(observation_space, action_space, 2, config["model"], "m")
            super().__init__(
                observation_space,
                action_space,
                config,
                model=model,
                loss=_unused_loss,
                action_distribution_fn=_logits_dist_fn,
            )

    built = build_policy_class(
        "LogitsOnly",
        "torch",
        loss_fn=_unused_loss,
        action_distribution_fn=_logits_dist_fn,
        make_model=lambda policy, obs_space, action_space, config: BareTensorModel(
            obs_space, action_space, 2, config["model"], "m"
        ),
    )
    for cls in (OwnPolicy, built):
        policy = cls(OBS_SPACE, ACT_SPACE, dict(PG_CONFIG))
        assert policy.model.calls == 0
        actions, _, _ = policy.compute_actions(np.zeros((3, 4), np.float32))
        assert actions.shape == (3,)


class RnnModel(RecurrentNetwork, nn.Module):
    """A `RecurrentNetwork` of RLlib's contract: defines `forward_rnn` only."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        nn.Module.__init__(self)
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.logits = nn.Linear(4, num_outputs)
        self.value = nn.Linear(4, 1)

    def get_initial_state(self):
        return [np.zeros(3, np.float32)]

    def forward_rnn(self, inputs, state, seq_lens):
        self._features = inputs
        return self.logits(inputs), state

    def value_function(self):
        return self.value(self._features).reshape(-1)


class RnnBareStateModel(RnnModel):
    """Its `forward_rnn` returns the state tensor itself, not a list of them."""

    def forward_rnn(self, inputs, state, seq_lens):
        out, new_state = super().forward_rnn(inputs, state, seq_lens)
        return out, new_state[0]


def test_a_recurrent_networks_forward_rnn_is_checked_at_construction():
    # corral's `RecurrentNetwork.forward` passes on what the user's `forward_rnn` gave.
    with pytest.raises(ValueError, match="RnnBareStateModel: State output is not a list"):
        _policy(RnnBareStateModel)
    policy = _policy(RnnModel)
    actions, state_out, _ = policy.compute_actions(
        np.zeros((2, 4), np.float32), [np.zeros((2, 3), np.float32)]
    )
    assert actions.shape == (2,) and len(state_out) == 1
