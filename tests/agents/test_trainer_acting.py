"""Trainer acting and weights: compute_single_action / compute_actions, policies, weights."""

import logging

import numpy as np
import pytest

from corral.agents.ppo import PPOTrainer
from corral.agents.ppo.ppo_torch_policy import PPOTorchPolicy
from corral.policy.sample_batch import SampleBatch

SMALL = {
    "num_workers": 0,
    "rollout_fragment_length": 50,
    "train_batch_size": 100,
    "sgd_minibatch_size": 50,
    "num_sgd_iter": 1,
    "model": {"fcnet_hiddens": [16]},
    "seed": 0,
}
OBS = np.array([0.01, -0.02, 0.03, 0.04], np.float32)


@pytest.fixture(scope="module")
def cartpole():
    t = PPOTrainer(config=SMALL, env="CartPole-v1")
    yield t
    t.stop()


@pytest.fixture(scope="module")
def pendulum():
    t = PPOTrainer(config=SMALL, env="Pendulum-v1")
    yield t
    t.stop()


def _greedy_logits(trainer, obs):
    _, extra = trainer.get_policy().compute_actions_from_obs(obs[None], explore=False)
    return extra[SampleBatch.ACTION_DIST_INPUTS][0]


def test_single_action_is_the_greedy_action(cartpole):
    action = cartpole.compute_single_action(OBS, explore=False)
    assert action == int(np.argmax(_greedy_logits(cartpole, OBS)))
    assert all(cartpole.compute_single_action(OBS, explore=False) == action for _ in range(5))
    assert cartpole.compute_single_action(OBS) in (0, 1)


def test_full_fetch_returns_state_and_extra_fetches(cartpole):
    action, state, extra = cartpole.compute_single_action(OBS, full_fetch=True, explore=False)
    assert state == []
    np.testing.assert_allclose(extra[SampleBatch.ACTION_DIST_INPUTS], _greedy_logits(cartpole, OBS))
    assert np.ndim(extra[SampleBatch.VF_PREDS]) == 0
    assert action == int(np.argmax(extra[SampleBatch.ACTION_DIST_INPUTS]))


def test_every_argument_is_accepted(cartpole):
    action = cartpole.compute_single_action(
        OBS,
        prev_action=1,
        prev_reward=1.0,
        info={"x": 1},
        policy_id="default_policy",
        explore=False,
        timestep=7,
        episode=None,
        unsquash_action=False,
        clip_action=False,
    )
    assert action == cartpole.compute_single_action(OBS, explore=False)


def test_input_dict_gives_the_same_action(cartpole):
    plain = cartpole.compute_single_action(OBS, explore=False)
    assert cartpole.compute_single_action(input_dict={"obs": OBS}, explore=False) == plain


@pytest.mark.parametrize(
    "kwargs",
    [
        {"observation": OBS, "input_dict": {"obs": OBS}},
        {"input_dict": {"obs": OBS}, "prev_reward": 1.0},
        {},
    ],
)
def test_observation_xor_input_dict(cartpole, kwargs):
    with pytest.raises(ValueError, match=r"Provide either `input_dict` OR \[`observation`"):
        cartpole.compute_single_action(**kwargs)


def test_unknown_policy_id_is_a_key_error(cartpole):
    with pytest.raises(KeyError, match="nope"):
        cartpole.compute_single_action(OBS, policy_id="nope")
    with pytest.raises(KeyError, match="nope"):
        cartpole.compute_actions({"a": OBS}, policy_id="nope")


def test_filter_is_applied_without_update(cartpole):
    calls = []

    class Shift:
        def __call__(self, obs, update=True):
            calls.append(update)
            return obs + 100.0

    worker = cartpole.workers.local_worker()
    original = worker.filters["default_policy"]
    worker.filters["default_policy"] = Shift()
    try:
        _, _, extra = cartpole.compute_single_action(OBS, full_fetch=True, explore=False)
        cartpole.compute_actions({"a": OBS})
    finally:
        worker.filters["default_policy"] = original
    assert calls == [False, False]
    np.testing.assert_allclose(
        extra[SampleBatch.ACTION_DIST_INPUTS], _greedy_logits(cartpole, OBS + 100.0), rtol=1e-6
    )


def test_discrete_observations_are_preprocessed():
    t = PPOTrainer(config=SMALL, env="FrozenLake-v1")
    try:
        one_hot = np.eye(16, dtype=np.float32)[5]
        action = t.compute_single_action(5, explore=False)
        assert action == int(np.argmax(_greedy_logits(t, one_hot)))
        assert t.compute_actions({"a": 5, "b": 5}, explore=False) == {"a": action, "b": action}
    finally:
        t.stop()


def test_unsquash_and_clip(pendulum, caplog):
    obs = np.array([1.0, 0.0, 0.0], np.float32)
    raw = _greedy_logits(pendulum, obs)[:1]
    unsquashed = np.clip(-2.0 + (raw + 1.0) * 2.0, -2, 2)
    # None -> the config decides: normalize_actions=True by default.
    np.testing.assert_allclose(pendulum.compute_single_action(obs, explore=False), unsquashed)
    act = pendulum.compute_single_action(obs, explore=False, unsquash_action=True)
    np.testing.assert_allclose(act, unsquashed, rtol=1e-6)
    act = pendulum.compute_single_action(obs, explore=False, unsquash_action=False)
    np.testing.assert_allclose(act, raw, rtol=1e-6)
    pendulum.get_policy().model._logits.bias.data += 10.0  # push the mean out of bounds
    try:
        off = {"explore": False, "unsquash_action": False}
        assert pendulum.compute_single_action(obs, **off) > 2.0
        assert pendulum.compute_single_action(obs, **off, clip_action=True) == 2.0
        with caplog.at_level(logging.WARNING):
            deprecated = {"explore": False, "unsquash_actions": False, "clip_actions": True}
            assert pendulum.compute_single_action(obs, **deprecated) == 2.0
        assert "`clip_action`=" in caplog.text and "`unsquash_action`=" in caplog.text
    finally:
        pendulum.get_policy().model._logits.bias.data -= 10.0


def test_compute_actions_on_a_dict(cartpole):
    obs = {"a": OBS, "b": -OBS, 3: OBS * 2}
    actions = cartpole.compute_actions(obs, explore=False)
    assert actions == {k: cartpole.compute_single_action(o, explore=False) for k, o in obs.items()}
    actions2, states, extra = cartpole.compute_actions(obs, explore=False, full_fetch=True)
    assert actions2 == actions
    assert states == {"a": [], "b": [], 3: []}
    assert extra[SampleBatch.ACTION_DIST_INPUTS].shape == (3, 2)
    with_state = cartpole.compute_actions(obs, state={"a": []}, explore=False)
    assert isinstance(with_state, tuple) and with_state[0] == actions
    # A list of observations (not RLlib's {agent_id: obs}) gets an error that says so.
    with pytest.raises(TypeError, match=r"dict of observations keyed by agent id.*got a list"):
        cartpole.compute_actions([OBS, -OBS])


def test_compute_actions_unsquash(pendulum, caplog):
    obs = np.array([1.0, 0.0, 0.0], np.float32)
    single = pendulum.compute_single_action(obs, explore=False, unsquash_action=True)
    with caplog.at_level(logging.WARNING):
        batch = pendulum.compute_actions({"x": obs}, explore=False, normalize_actions=True)
    np.testing.assert_allclose(batch["x"], single)
    assert "normalize_actions" in caplog.text


def test_compute_action_is_a_deprecated_alias_that_warns_once(cartpole, caplog):
    from corral.utils import deprecation

    deprecation._logged_keys.discard("Deprecated:Trainer.compute_action")
    with caplog.at_level(logging.WARNING):
        action = cartpole.compute_action(OBS, explore=False)
        cartpole.compute_action(OBS, explore=False)  # (called per step: one warning)
    assert action == cartpole.compute_single_action(OBS, explore=False)
    assert caplog.text.count("`Trainer.compute_action` has been deprecated") == 1


def test_policies_and_weights():
    t = PPOTrainer(config={**SMALL, "num_workers": 1}, env="CartPole-v1")
    try:
        assert isinstance(t.get_policy(), PPOTorchPolicy)
        assert t.get_policy("missing") is None
        assert t.get_default_policy_class(t.config) is PPOTorchPolicy
        weights = t.get_weights()
        assert list(weights) == ["default_policy"]
        assert list(t.get_weights(["default_policy"])) == ["default_policy"]
        new = {k: np.full_like(v, 0.5) for k, v in weights["default_policy"].items()}
        t.set_weights({"default_policy": new})
        for k, v in t.get_weights()["default_policy"].items():
            np.testing.assert_array_equal(v, new[k])
        remote = t.workers.remote_workers()[0].call("get_weights").result(30)
        for k, v in remote["default_policy"].items():
            np.testing.assert_array_equal(v, new[k])
    finally:
        t.stop()
