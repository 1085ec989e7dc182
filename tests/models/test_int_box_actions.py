"""Integer-dtype ``Box`` action spaces: one categorical per element over its values
``low..high`` (RLlib 1.13's multi-categorical treatment), acting in the space's shape and
dtype, stored in batches as the env's values, refused by the continuous-only algorithms."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.registry import get_trainer_class
from corral.env.random_env import RandomEnv
from corral.models import ModelCatalog
from corral.models.torch.torch_action_dist import TorchMultiCategorical
from corral.utils.error import UnsupportedSpaceException
from corral.utils.exploration.exploration import random_actions
from corral.utils.spaces import nest_action_rows, unflatten_actions

# Different bounds per element (and negative ones): 4, 4, 1 / 3, 1, 3 values.
LOW = np.array([[-2, 0, 1], [0, 0, 5]], np.int32)
HIGH = np.array([[1, 3, 1], [2, 0, 7]], np.int32)
SPACE = gym.spaces.Box(LOW, HIGH, (2, 3), np.int32)
SIZES = (HIGH - LOW + 1).ravel()

TINY = {
    "num_workers": 0,
    "rollout_fragment_length": 16,
    "train_batch_size": 32,
    "sgd_minibatch_size": 16,
    "num_sgd_iter": 1,
    "seed": 0,
    "model": {"fcnet_hiddens": [8]},
}


def test_catalog_gives_a_categorical_per_element():
    dist_cls, num_outputs = ModelCatalog.get_action_dist(SPACE, {})
    assert num_outputs == int(SIZES.sum()) == 16
    dtype, shape = ModelCatalog.get_action_shape(SPACE)
    assert dtype == np.int64 and shape == (None, 2, 3)
    torch.manual_seed(0)
    dist = dist_cls(torch.randn(500, num_outputs))
    assert isinstance(dist, TorchMultiCategorical)
    assert dist.input_lens == SIZES.tolist()
    samples = dist.sample()
    assert samples.shape == (500, 2, 3)
    low, high = torch.as_tensor(LOW), torch.as_tensor(HIGH)
    assert bool(((samples >= low) & (samples <= high)).all())
    # Every value of a 4-valued element turns up, the bounds included.
    assert set(samples[:, 0, 0].tolist()) == {-2, -1, 0, 1}
    # The samples' log-likelihoods are the categoricals' at index value - low.
    logp = dist.logp(samples)
    torch.testing.assert_close(logp, dist.sampled_action_logp())
    index = (samples - low).reshape(500, -1)
    expected = sum(
        torch.log_softmax(chunk, -1).gather(-1, index[:, i : i + 1]).squeeze(-1)
        for i, chunk in enumerate(torch.split(dist.inputs, SIZES.tolist(), -1))
    )
    torch.testing.assert_close(logp, expected)


def test_deterministic_sample_is_low_plus_the_argmax():
    dist_cls, num_outputs = ModelCatalog.get_action_dist(SPACE, {})
    inputs = torch.full((1, num_outputs), -5.0)
    # Pick index 3 of element 0 (value 1), index 1 of element 3 (value 1), index 2 of
    # element 5 (value 7); the rest stay at their first value.
    offsets = np.concatenate([[0], np.cumsum(SIZES)[:-1]])
    for element, index in [(0, 3), (3, 1), (5, 2)]:
        inputs[0, offsets[element] + index] = 5.0
    action = dist_cls(inputs).deterministic_sample()
    assert action.tolist() == [[[1, 0, 1], [1, 0, 7]]]


def test_required_model_output_shape_counts_the_values():
    assert TorchMultiCategorical.required_model_output_shape(SPACE, {}) == 16
    assert TorchMultiCategorical(torch.zeros(2, 16), action_space=SPACE).input_lens == (
        SIZES.tolist()
    )


def test_unbounded_or_huge_int_boxes_are_refused_naming_the_space():
    unbounded = gym.spaces.Box(-np.inf, np.inf, (2,), np.int64)
    with pytest.raises(UnsupportedSpaceException, match="unbounded") as err:
        ModelCatalog.get_action_dist(unbounded, {})
    assert str(unbounded) in str(err.value)
    huge = gym.spaces.Box(0, 2**31 - 2, (2,), np.int32)
    with pytest.raises(UnsupportedSpaceException, match="narrower bounds") as err:
        ModelCatalog.get_action_dist(huge, {})
    assert str(huge) in str(err.value)


def test_deterministic_dist_type_needs_a_float_box():
    with pytest.raises(UnsupportedSpaceException, match="float Box"):
        ModelCatalog.get_action_dist(SPACE, {}, dist_type="deterministic")


def test_random_actions_are_uniform_integers_within_the_bounds():
    torch.manual_seed(0)
    actions = random_actions(SPACE, 2000)
    assert actions.dtype == torch.int64 and actions.shape == (2000, 2, 3)
    assert bool(((actions >= torch.as_tensor(LOW)) & (actions <= torch.as_tensor(HIGH))).all())
    counts = np.bincount(actions[:, 1, 2].numpy() - 5, minlength=3)
    assert counts.min() > 550  # 3 values, ~667 each


def test_nested_int_box_leaves_keep_their_dtype():
    space = gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(-1, 2, (2,), np.int16)))
    rows = np.array([[1, -1, 2], [0, 0, 1]], np.float32)
    first = unflatten_actions(space, rows)[0]
    assert first[0] == 1 and first[1].dtype == np.int16 and first[1].tolist() == [-1, 2]
    assert space.contains(first)
    nested = nest_action_rows(space, rows)
    assert nested[1].dtype == np.int16 and nested[1].tolist() == [[-1, 2], [0, 1]]


@pytest.mark.parametrize("algorithm", ["PPO", "A2C", "IMPALA"])
def test_policy_gradient_algorithms_act_store_and_train(algorithm):
    """The env gets actions of the space's shape and dtype (RandomEnv checks
    `contains`); the batches hold the env's values; an iteration trains."""
    cls = get_trainer_class(algorithm)
    config = {**TINY, "min_time_s_per_reporting": 0}
    defaults = cls.get_default_config()
    trainer = cls(
        config={
            **{k: v for k, v in config.items() if k in defaults},
            "env_config": {"action_space": SPACE, "max_episode_len": 8},
        },
        env=RandomEnv,
    )
    try:
        trainer.train()
        batch = trainer.workers.local_worker().sample()
        actions = np.asarray(batch["actions"])
        assert actions.shape[1:] == (2, 3)
        assert np.issubdtype(actions.dtype, np.integer)
        assert ((actions >= LOW) & (actions <= HIGH)).all()
        obs = trainer.get_policy().observation_space.sample()
        action = trainer.compute_single_action(obs, explore=False)
        assert action.dtype == np.int32 and SPACE.contains(action)
    finally:
        trainer.stop()


def test_a_tuple_with_an_int_box_leaf_acts_in_its_dtype():
    space = gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(-1, 2, (2,), np.int16)))
    trainer = get_trainer_class("PPO")(
        config={**TINY, "env_config": {"action_space": space, "max_episode_len": 8}},
        env=RandomEnv,
    )
    try:
        trainer.train()  # (RandomEnv raises on an action outside the space)
        action = trainer.compute_single_action(trainer.get_policy().observation_space.sample())
        assert space.contains(action) and action[1].dtype == np.int16
    finally:
        trainer.stop()


_RECURRENT = {"fcnet_hiddens": [8], "use_lstm": True, "lstm_cell_size": 8}


@pytest.mark.parametrize("algorithm", ["SAC", "RNNSAC", "DDPG", "TD3", "CQL", "DREAMER"])
def test_continuous_only_algorithms_refuse_a_1d_int_box(algorithm):
    space = gym.spaces.Box(0, 3, (2,), np.int32)
    config = {"num_workers": 0, "env_config": {"action_space": space}}
    if algorithm == "RNNSAC":
        config.update(Q_model=_RECURRENT, policy_model=_RECURRENT)
    with pytest.raises(UnsupportedSpaceException, match="float Box") as err:
        get_trainer_class(algorithm)(config=config, env=RandomEnv)
    assert str(space) in str(err.value)


def test_es_acts_with_categoricals_in_an_int_box():
    space = gym.spaces.Box(-1, 2, (2,), np.int32)
    trainer = get_trainer_class("ES")(
        config={"num_workers": 0, "env_config": {"action_space": space}}, env=RandomEnv
    )
    try:
        action = trainer.compute_single_action(trainer.get_policy().observation_space.sample())
        assert action.dtype == np.int32 and space.contains(action)
    finally:
        trainer.stop()


@pytest.mark.parametrize("exploration", ["ParameterNoise", "RE3"])
def test_noise_explorations_have_no_default_for_an_int_box(exploration):
    """Their continuous default (Ornstein-Uhlenbeck noise) would not give integers."""
    space = gym.spaces.Box(0, 3, (2,), np.int32)
    with pytest.raises(ValueError, match="no default sub_exploration") as err:
        get_trainer_class("PPO")(
            config={
                "num_workers": 0,
                "env_config": {"action_space": space},
                "exploration_config": {"type": exploration, "embeds_dim": 8}
                if exploration == "RE3"
                else {"type": exploration},
            },
            env=RandomEnv,
        )
    assert str(space) in str(err.value)
