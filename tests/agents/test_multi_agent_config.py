"""The multi-agent branch of config validation (RLlib 1.x `_validate_config`'s rules)."""

import gymnasium as gym
import pytest

from corral.agents.config import COMMON_CONFIG, merge_trainer_configs, validate_config
from corral.agents.ppo import PPOTorchPolicy, PPOTrainer
from corral.policy.policy import PolicySpec

SPACE = gym.spaces.Discrete(2)


def validated(**multiagent) -> dict:
    config = merge_trainer_configs(COMMON_CONFIG, {"multiagent": multiagent})
    validate_config(config)
    return config


def test_empty_policies_become_the_default_policy():
    config = validated(policies={})
    assert config["multiagent"]["policies"] == {"default_policy": PolicySpec(config={})}


def test_a_set_of_ids_becomes_default_specs():
    policies = validated(policies={"a", "b"})["multiagent"]["policies"]
    assert policies == {"a": PolicySpec(config={}), "b": PolicySpec(config={})}


def test_four_tuples_become_policy_specs():
    policies = validated(policies={"a": (None, SPACE, SPACE, None), "b": [None, None, None, {}]})[
        "multiagent"
    ]["policies"]
    assert policies["a"] == PolicySpec(None, SPACE, SPACE, {})
    assert policies["b"] == PolicySpec(config={})


@pytest.mark.parametrize("policies", [{1: PolicySpec()}, {1, 2}])
def test_policy_ids_must_be_strings(policies):
    with pytest.raises(ValueError, match=r"Policy IDs must always be of type `str`, got 1 \(int\)"):
        validated(policies=policies)
    with pytest.raises(KeyError, match="Policy IDs must always be of type"):  # RLlib 1.13's type
        validated(policies=policies)


def test_unknown_multiagent_keys_are_a_key_error():
    """RLlib 1.13 refuses keys COMMON_CONFIG's `multiagent` lacks with a KeyError."""
    with pytest.raises(KeyError, match=r"Unknown config key 'multiagent/policy_mapping'.*"):
        validated(policies={"a"}, policy_mapping=lambda aid, **kw: "a")
    with pytest.raises(ValueError, match="invalid keys in your 'multiagent' config"):
        PPOTrainer(config={"multiagent": {"wrong_key": 1}}, env="CartPole-v1")


def test_check_multi_agent_applies_the_same_checks():
    from corral.utils.pre_checks.multi_agent import check_multi_agent

    assert check_multi_agent({"multiagent": {"policies": {"a", "b"}}})[1] is True
    with pytest.raises(KeyError, match="Policy IDs must always be of type"):
        check_multi_agent({"multiagent": {"policies": {1, "b"}}})
    with pytest.raises(KeyError, match="invalid keys"):
        check_multi_agent({"multiagent": {"wrong_key": 1}})


@pytest.mark.parametrize("spec", [(None, None, None), "PPO", 3])
def test_policy_specs_must_be_four_tuples(spec):
    with pytest.raises(ValueError, match=r"Policy specs must be tuples/lists of \(cls or None"):
        validated(policies={"a": spec})


def test_policy_config_must_be_a_dict():
    with pytest.raises(ValueError, match="Multiagent policy config for a must be a dict"):
        validated(policies={"a": PolicySpec(config=[1])})


def test_count_steps_by_must_be_known():
    with pytest.raises(ValueError, match=r"`count_steps_by` must be one of \[env_steps\|agent_"):
        validated(count_steps_by="episodes")


def test_multi_agent_settings_are_accepted_by_a_trainer():
    trainer = PPOTrainer(
        env="CartPole-v1",
        config={
            "num_workers": 0,
            "num_envs_per_worker": 1,
            "rollout_fragment_length": 8,
            "train_batch_size": 8,
            "sgd_minibatch_size": 8,
            "model": {"fcnet_hiddens": [4]},
            "multiagent": {
                "policies": {"default_policy": (None, None, None, {"lr": 0.5})},
                "policies_to_train": ["default_policy"],
                "policy_map_capacity": 3,
                "observation_fn": None,
                "count_steps_by": "agent_steps",
            },
        },
    )
    try:
        assert trainer.get_policy().config["lr"] == 0.5  # per-policy override
        assert trainer.workers.local_worker().policy_map.capacity == 3
    finally:
        trainer.stop()


def test_replay_mode_must_be_independent_or_lockstep():
    trainer_config = {"multiagent": {"replay_mode": "sideways"}}
    with pytest.raises(ValueError, match="replay_mode.*sideways"):
        PPOTrainer(env="CartPole-v1", config=trainer_config)


class OwnPolicy(PPOTorchPolicy):
    """A policy class of one's own: it may read config keys of its own."""


@pytest.mark.parametrize(
    ("spec", "warned"),
    [
        (PolicySpec(config={"gama": 0.9}), "'multiagent/policies/p0/config/gama'"),
        (PolicySpec(config={"gamma": 0.9, "model": {"fcnet_hiddens": [8]}}), None),
        (PolicySpec(OwnPolicy, config={"own_key": 1}), None),
    ],
    ids=["typo", "known-keys", "own-class"],
)
def test_a_policy_override_nothing_reads_is_warned_of(spec, warned, caplog):
    # RLlib 1.13 merged a policy's overrides unchecked; a key that neither the trainer
    # nor corral's policy class has is most likely a typo (a warning: the code still runs).
    config = {
        "env": "CartPole-v1",
        "num_workers": 0,
        "multiagent": {"policies": {"p0": spec}, "policy_mapping_fn": lambda *a, **k: "p0"},
    }
    with caplog.at_level("WARNING", logger="corral.agents.config"):
        PPOTrainer(config=config).stop()
    if warned:
        assert f"Unknown config key {warned}. Did you mean: " in caplog.text
        assert "/config/gamma'" in caplog.text
    else:
        assert "Unknown config key" not in caplog.text
