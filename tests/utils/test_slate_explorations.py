"""SlateEpsilonGreedy and SlateSoftQ: exploration over whole slates (SlateQ's)."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.models.torch.torch_action_dist import TorchSlateMultiCategorical, enumerate_slates
from corral.utils.exploration import SlateEpsilonGreedy, SlateSoftQ, make_exploration

SPACE = gym.spaces.MultiDiscrete([4, 4])
SLATES = enumerate_slates(4, 2)


class Model(torch.nn.Module):
    """Just the slates, as SlateQ's model holds them."""

    def __init__(self):
        super().__init__()
        self.register_buffer("slates", SLATES)


def _dist(q_values):
    return TorchSlateMultiCategorical(q_values, Model())


def _slate_index(actions):
    return [SLATES.tolist().index(a) for a in actions.tolist()]


def test_epsilon_greedy_is_greedy_at_epsilon_zero_and_without_exploration():
    torch.manual_seed(0)
    q = torch.randn(50, 12)
    expl = make_exploration(
        {"type": "SlateEpsilonGreedy", "initial_epsilon": 0.0, "final_epsilon": 0.0},
        SPACE,
        {},
        Model(),
    )
    assert isinstance(expl, SlateEpsilonGreedy)
    greedy = SLATES[q.argmax(-1)]
    actions, logp = expl.get_exploration_action(_dist(q), timestep=0, explore=True)
    assert torch.equal(actions, greedy)
    assert torch.equal(logp, torch.zeros(50))
    # Without exploration: greedy whatever epsilon is.
    explorer = SlateEpsilonGreedy(SPACE, model=Model(), initial_epsilon=1.0)
    actions, _ = explorer.get_exploration_action(_dist(q), timestep=0, explore=False)
    assert torch.equal(actions, greedy)


def test_epsilon_greedy_explores_uniformly_over_slates():
    torch.manual_seed(0)
    expl = SlateEpsilonGreedy(SPACE, model=Model(), initial_epsilon=1.0, final_epsilon=1.0)
    q = torch.zeros(12000, 12)
    q[:, 5] = 10.0  # the greedy slate
    actions, _ = expl.get_exploration_action(_dist(q), timestep=0)
    assert (actions[:, 0] != actions[:, 1]).all()  # only real slates
    freq = np.bincount(_slate_index(actions), minlength=12) / len(actions)
    np.testing.assert_allclose(freq, np.full(12, 1 / 12), atol=0.015)


def test_epsilon_anneals_with_the_timestep():
    torch.manual_seed(0)
    expl = SlateEpsilonGreedy(
        SPACE, model=Model(), initial_epsilon=1.0, final_epsilon=0.1, epsilon_timesteps=100
    )
    q = torch.zeros(6000, 12)
    q[:, 3] = 1.0
    actions, _ = expl.get_exploration_action(_dist(q), timestep=100)
    greedy_share = np.mean(np.asarray(_slate_index(actions)) == 3)
    # 90% greedy, plus the greedy slate's share of the random 10%.
    assert greedy_share == pytest.approx(0.9 + 0.1 / 12, abs=0.02)
    assert expl.get_info()["cur_epsilon"] == pytest.approx(0.1)


def test_soft_q_samples_slates_by_their_q_values():
    torch.manual_seed(0)
    expl = make_exploration({"type": "SlateSoftQ", "temperature": 2.0}, SPACE, {}, Model())
    assert isinstance(expl, SlateSoftQ)
    row = torch.linspace(-2.0, 3.0, 12)
    actions, logp = expl.get_exploration_action(_dist(row.expand(20000, -1)), timestep=0)
    probs = torch.softmax(row / 2.0, -1)
    freq = np.bincount(_slate_index(actions), minlength=12) / len(actions)
    np.testing.assert_allclose(freq, probs.numpy(), atol=0.015)
    # The log-likelihoods are those of the tempered distribution.
    idx = torch.tensor(_slate_index(actions[:10]))
    assert torch.allclose(logp[:10], probs.log()[idx])
    greedy, logp = expl.get_exploration_action(_dist(row.expand(2, -1)), explore=False)
    assert greedy.tolist() == [SLATES[11].tolist()] * 2
    assert torch.equal(logp, torch.zeros(2))


@pytest.mark.parametrize("cls", [SlateEpsilonGreedy, SlateSoftQ])
@pytest.mark.parametrize(
    "space", [gym.spaces.Discrete(4), gym.spaces.MultiDiscrete([4, 3]), gym.spaces.Box(0, 1)]
)
def test_non_slate_action_spaces_are_refused(cls, space):
    with pytest.raises(ValueError, match=cls.__name__):
        cls(space, model=Model())


def test_slates_are_needed():
    expl = SlateEpsilonGreedy(SPACE, model=None)

    class Dist:
        inputs = torch.zeros(1, 12)

    with pytest.raises(ValueError, match="slates"):
        expl.get_exploration_action(Dist(), timestep=0)
