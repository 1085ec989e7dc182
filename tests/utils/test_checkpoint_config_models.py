"""A model class named by a checkpoint (`model.custom_model`, Dreamer's
`dreamer_model.custom_model`) comes back only as an imported `ModelV2` subclass."""

import subprocess  # noqa: F401  (loaded: the refusal must not depend on it being absent)

from corral.agents.dreamer.dreamer_model import DreamerModel
from corral.utils.checkpoint_config import Unresolved, config_from_json, config_to_json


def test_an_imported_model_class_resolves():
    config = {"dreamer_model": {"custom_model": DreamerModel}, "model": {"custom_model": None}}
    assert config_from_json(config_to_json(config), "ckpt") == config


def test_a_class_that_is_not_a_model_is_refused():
    data = {"model": {"custom_model": {"__class__": "subprocess:Popen"}}}
    value = config_from_json(data, "ckpt")["model"]["custom_model"]
    assert isinstance(value, Unresolved) and "not a subclass of ModelV2" in value.reason
