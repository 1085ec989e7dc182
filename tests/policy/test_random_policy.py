"""RandomPolicy: actions drawn from the action space (nested ones as flat rows for the
batches, nested again for the env), reproducible from numpy's seed, nothing to learn."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from corral.policy.random_policy import RandomPolicy
from corral.utils.spaces import as_flat_action_rows

OBS = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


def _actions(space: gym.Space, seed: int, n: int = 5) -> np.ndarray:
    np.random.seed(seed)
    return RandomPolicy(OBS, space, {}).compute_actions(np.zeros((n, 2), np.float32))[0]


def test_actions_lie_in_the_space_and_repeat_with_the_seed():
    space = gym.spaces.Discrete(4)
    actions = _actions(space, seed=0, n=50)
    assert actions.shape == (50,) and all(space.contains(int(a)) for a in actions)
    assert np.array_equal(actions, _actions(space, seed=0, n=50))
    assert not np.array_equal(actions, _actions(space, seed=1, n=50))
    box = gym.spaces.Box(-2.0, 2.0, (3,), np.float32)
    assert all(box.contains(a) for a in _actions(box, seed=0))


def test_nested_actions_travel_flat_and_reach_the_env_nested():
    space = gym.spaces.Dict(
        {"move": gym.spaces.Discrete(3), "force": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)}
    )
    np.random.seed(0)
    policy = RandomPolicy(OBS, space, {})
    # RLlib's form: one nested action per row; the samplers keep them as flat rows.
    actions, state, extra = policy.compute_actions(np.zeros((4, 2), np.float32))
    assert len(actions) == 4 and all(space.contains(a) for a in actions)
    assert state == [] and extra == {}
    rows = as_flat_action_rows(space, actions)
    assert rows.shape == (4, 3)
    env_actions = policy.to_env_actions(rows, unsquash=False, clip=False)
    assert len(env_actions) == 4 and all(space.contains(a) for a in env_actions)


def test_it_has_no_weights():
    policy = RandomPolicy(OBS, gym.spaces.Discrete(2), {})
    assert policy.get_weights() == {}
    policy.set_state(policy.get_state())
