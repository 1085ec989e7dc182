"""RLlib 1.13's head methods of `DQNTorchModel` (`get_q_value_distributions`,
`get_state_value`): their outputs as 1.13's, combined as 1.13's `compute_q_values` did they
give the Q-values DQN's loss trains and acts on, and a subclass overriding them (1.13's way
to customise the head) trains and acts with its own heads."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.dqn import DEFAULT_CONFIG, DQNTorchModel, DQNTorchPolicy
from corral.agents.dqn import dqn_torch_policy as dqn_fns
from corral.agents.trainer import Trainer
from corral.models import ModelCatalog
from corral.policy.sample_batch import SampleBatch
from corral.utils.replay_buffers import WEIGHTS

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACT = gym.spaces.Discrete(3)

SETUPS = {
    "plain": {"dueling": False},
    "dueling": {"dueling": True},
    "c51": {"dueling": False, "num_atoms": 5},
    "dueling_c51": {"dueling": True, "num_atoms": 5},
    "dueling_noisy": {"dueling": True, "noisy": True},
}


def dqn_policy(**overrides) -> DQNTorchPolicy:
    config = Trainer.merge_trainer_configs(
        DEFAULT_CONFIG,
        {"model": {"fcnet_hiddens": [16]}, "hiddens": [8], **overrides},
    )
    torch.manual_seed(0)
    return DQNTorchPolicy(OBS, ACT, config)


def observations(n: int = 6, seed: int = 0) -> torch.Tensor:
    return torch.as_tensor(np.random.default_rng(seed).uniform(-1, 1, (n, 4)).astype(np.float32))


def rllib_113_q_values(model, model_out, config: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """RLlib 1.13's `compute_q_values` after the model call, written out: (Q-values,
    logits) from the two head methods."""
    if config["num_atoms"] > 1:
        action_scores, z, support_logits, logits, _ = model.get_q_value_distributions(model_out)
    else:
        action_scores, logits, _ = model.get_q_value_distributions(model_out)
    if not config["dueling"]:
        return action_scores, logits
    state_score = model.get_state_value(model_out)
    if config["num_atoms"] > 1:
        centered = support_logits - support_logits.mean(dim=1, keepdim=True)
        logits = state_score.unsqueeze(1) + centered
        return (z * torch.softmax(logits, dim=-1)).sum(-1), logits
    # 1.13's `reduce_mean_ignore_inf`: -inf (masked) advantages left out of the mean.
    finite = action_scores != float("-inf")
    mean = torch.where(finite, action_scores, 0.0).sum(1, keepdim=True) / finite.sum(
        1, keepdim=True
    )
    return state_score + action_scores - mean, logits


@pytest.mark.parametrize("setup", SETUPS.values(), ids=SETUPS.keys())
def test_head_methods_give_what_the_loss_and_acting_use(setup):
    policy = dqn_policy(**setup)
    config, model = policy.config, policy.model
    obs = observations()
    torch.manual_seed(3)  # the same noise draws (noisy heads) on every path below
    model_out, _ = model({"obs": obs}, [], None)
    torch.manual_seed(3)
    q_113, logits_113 = rllib_113_q_values(model, model_out, config)
    torch.manual_seed(3)
    q_logits = model.q_logits(obs)
    torch.testing.assert_close(model.q_values(q_logits), q_113)
    torch.testing.assert_close(model_out, q_113)  # the model's output: the Q-values
    torch.manual_seed(3)
    q, logits, probs, state = dqn_fns.compute_q_values(policy, model, {SampleBatch.OBS: obs})
    torch.testing.assert_close(q, q_113)
    torch.testing.assert_close(logits, logits_113)
    assert state == []
    if config["num_atoms"] > 1:
        torch.testing.assert_close(logits, q_logits)
        torch.testing.assert_close(probs, torch.softmax(q_logits, -1))
    else:
        assert logits.shape == probs.shape == (6, 3, 1) and bool((logits == 1).all())
    # The Q(s, a) the loss trains on are those of the head methods.
    rng = np.random.default_rng(1)
    actions = rng.integers(0, 3, 6)
    batch = {
        SampleBatch.OBS: obs,
        SampleBatch.ACTIONS: torch.as_tensor(actions),
        SampleBatch.REWARDS: torch.zeros(6),
        SampleBatch.NEXT_OBS: observations(seed=2),
        SampleBatch.TERMINATEDS: torch.zeros(6),
        WEIGHTS: torch.ones(6),
    }
    torch.manual_seed(3)
    _, _, q_selected = policy._td_loss(model, batch)
    torch.testing.assert_close(q_selected, q_113[torch.arange(6), torch.as_tensor(actions)])


def test_head_method_shapes_are_rllib_1_13s():
    model = dqn_policy(dueling=True, num_atoms=5, v_min=-2.0, v_max=6.0).model
    model_out, _ = model({"obs": observations(4)}, [], None)
    scores, z, support_logits, logits, probs = model.get_q_value_distributions(model_out)
    assert scores.shape == (4, 3) and support_logits.shape == logits.shape == (4, 3, 5)
    torch.testing.assert_close(z, torch.linspace(-2.0, 6.0, 5))
    torch.testing.assert_close(probs.sum(-1), torch.ones(4, 3))
    torch.testing.assert_close(scores, (probs * z).sum(-1))
    assert model.get_state_value(model_out).shape == (4, 5)
    assert (model.v_min, model.v_max) == (-2.0, 6.0)
    plain = dqn_policy(dueling=True).model
    embedding = plain.trunk(observations(4))  # a state embedding works as 1.13's model_out
    scores, logits, probs = plain.get_q_value_distributions(embedding)
    assert scores.shape == (4, 3) and logits.shape == probs.shape == (4, 3, 1)
    assert plain.get_state_value(embedding).shape == (4, 1)
    torch.testing.assert_close(
        plain.get_q_value_distributions(plain({"obs": observations(4)})[0])[0], scores
    )


def test_head_methods_refuse_what_they_cannot_use():
    model = dqn_policy(dueling=False).model
    model_out, _ = model({"obs": observations(4)}, [], None)
    with pytest.raises(ValueError, match="dueling=False"):
        model.get_state_value(model_out)
    with pytest.raises(ValueError, match=r"shape \[B, 16\].*\(4, 3\)"):
        model.get_q_value_distributions(model_out.detach())  # the Q-values themselves


class ShiftedHead(DQNTorchModel):
    """An RLlib 1.13-style custom head: action 2's advantage raised by 100."""

    def get_q_value_distributions(self, model_out):
        scores, logits, probs = super().get_q_value_distributions(model_out)
        return scores + torch.tensor([0.0, 0.0, 100.0]), logits, probs


class MaskedDuelingHead(DQNTorchModel):
    """Action 0 masked with a -inf advantage (RLlib 1.13's parametric-actions style)."""

    def get_q_value_distributions(self, model_out):
        scores, logits, probs = super().get_q_value_distributions(model_out)
        mask = torch.tensor([float("-inf"), 0.0, 0.0])
        return scores + mask, logits, probs


def test_an_overridden_head_is_what_the_policy_trains_and_acts_with():
    ModelCatalog.register_custom_model("shifted_dqn_head", ShiftedHead)
    policy = dqn_policy(
        dueling=False,
        model={"fcnet_hiddens": [16], "custom_model": "shifted_dqn_head"},
        exploration_config={"type": "EpsilonGreedy", "initial_epsilon": 0.0},
    )
    obs = observations(8)
    assert policy.model.forward_inference_numpy(obs.numpy()) is None  # numpy: the built-in head
    actions, _, fetches = policy.compute_actions(obs.numpy(), explore=False)
    np.testing.assert_array_equal(actions, np.full(8, 2))
    assert (fetches[SampleBatch.ACTION_DIST_INPUTS][:, 2] > 50).all()
    assert (policy.model.q_values(policy.model.q_logits(obs))[:, 2] > 50).all()
    with torch.no_grad():
        q, _ = policy.model.forward_inference(obs)  # the sampler's fast path
    assert (q[:, 2] > 50).all()


def test_masked_advantages_are_averaged_without_the_masked_action():
    ModelCatalog.register_custom_model("masked_dqn_head", MaskedDuelingHead)
    policy = dqn_policy(
        dueling=True, model={"fcnet_hiddens": [16], "custom_model": "masked_dqn_head"}
    )
    model, obs = policy.model, observations(5)
    q = model.q_values(model.q_logits(obs))
    assert bool((q[:, 0] == float("-inf")).all()) and bool(torch.isfinite(q[:, 1:]).all())
    q_113, _ = rllib_113_q_values(model, model({"obs": obs}, [], None)[0], policy.config)
    torch.testing.assert_close(q[:, 1:], q_113[:, 1:])
