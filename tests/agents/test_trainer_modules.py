"""The modules split out of `Trainer`: the policy ledger and its JSON codec, callbacks
construction, resource bundles, evaluation sampling and the acting methods' binding."""

import gymnasium as gym
import pytest

from corral.agents import acting
from corral.agents.callbacks import DefaultCallbacks, make_callbacks
from corral.agents.config import COMMON_CONFIG
from corral.agents.policy_ledger import (
    AddedPolicy,
    PolicyLedger,
    added_policy_from_json,
    added_policy_to_json,
)
from corral.agents.ppo import PPOTorchPolicy
from corral.agents.resources import resource_bundles
from corral.agents.trainer import Trainer
from corral.evaluation.evaluation_episodes import NO_EVALUATION_ENV, evaluate_episodes
from corral.utils.error import CheckpointError

SPEC = AddedPolicy(
    PPOTorchPolicy, gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2), {"lr": 0.1}, False
)


def test_ledger_nets_out_adds_and_removes():
    ledger = PolicyLedger()
    ledger.record_added("new", SPEC)
    ledger.record_removed("new")  # added then removed: no trace
    ledger.record_removed("default_policy")  # a config policy removed
    assert ledger.added == {} and ledger.removed == ["default_policy"]
    ledger.record_added("default_policy", SPEC)  # ... and added again
    assert ledger.removed == [] and list(ledger.added) == ["default_policy"]
    record = ledger.to_json(lambda pid, batch=None: True)
    assert record["policies_to_train"] is None  # a function cannot be stored
    assert ledger.to_json(["default_policy"])["policies_to_train"] == ["default_policy"]


def test_added_policy_json_round_trip_and_refusals():
    entry = added_policy_to_json("p", SPEC)
    back = added_policy_from_json("p", entry, "ckpt")
    assert back.policy_cls is PPOTorchPolicy and back.config == {"lr": 0.1}
    assert back.observation_space == SPEC.observation_space
    assert back.action_space == SPEC.action_space and back.evaluation_workers is False

    class Local(PPOTorchPolicy):
        pass

    unrestorable = added_policy_to_json("q", SPEC._replace(policy_cls=Local))
    assert "defined inside a function" in unrestorable["unrestorable"]
    with pytest.raises(CheckpointError, match="cannot rebuild added policy 'q'"):
        added_policy_from_json("q", unrestorable, "ckpt")
    with pytest.raises(CheckpointError, match="spaces of added policy 'p' are malformed"):
        added_policy_from_json("p", {**entry, "action_space": {"bad": 1}}, "ckpt")


def test_make_callbacks_names_the_bad_value():
    assert isinstance(make_callbacks(DefaultCallbacks), DefaultCallbacks)
    with pytest.raises(ValueError, match="must be a callable.*got 3"):
        make_callbacks(3)
    with pytest.raises(TypeError, match="returned 'nope'"):
        make_callbacks(lambda: "nope")


def test_resource_bundles_driver_workers_evaluation_learners():
    config = {
        "num_workers": 2,
        "num_cpus_per_worker": 2,
        "evaluation_interval": 1,
        "evaluation_num_workers": 1,
        "evaluation_config": {"num_cpus_per_worker": 3},
        "num_learners": 1,
        "num_gpus": 1,
        "_fake_gpus": True,
    }
    bundles, strategy = resource_bundles(COMMON_CONFIG, config)
    assert [b["CPU"] for b in bundles] == [1, 2, 2, 3, 1]
    assert all(b["GPU"] == 0 for b in bundles) and strategy == "PACK"


def test_evaluation_without_workers_or_env_says_how_to_get_one():
    class NoEnvWorker:
        sampler = None

    with pytest.raises(ValueError, match="Cannot evaluate w/o an evaluation worker set"):
        evaluate_episodes(NoEnvWorker(), None, 1)
    assert "create_env_on_driver" in NO_EVALUATION_ENV


def test_acting_methods_are_trainers_with_their_docstrings():
    assert Trainer.compute_single_action is acting.compute_single_action
    assert Trainer.compute_actions.__doc__.startswith("Actions of policy `policy_id`")
    assert Trainer.compute_action.__doc__ == "Deprecated alias of `compute_single_action`."
