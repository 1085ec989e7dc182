import subprocess
import sys

import pytest

from corral import tune
from corral.tune.registry import (
    ENV_CREATOR,
    TRAINABLE_CLASS,
    _global_registry,
    global_registry,
    register_env,
    register_input,
    register_trainable,
    registry_contains_input,
    registry_get_input,
)


def test_register_env_is_found_by_trainers_lookup():
    def creator(ctx):
        return ("env", ctx)

    register_env("test_registry_env", creator)
    assert _global_registry is global_registry
    assert global_registry.contains(ENV_CREATOR, "test_registry_env")
    assert global_registry.get(ENV_CREATOR, "test_registry_env")({"a": 1}) == ("env", {"a": 1})
    assert tune.register_env is register_env


def test_register_env_rejects_non_str_name():
    with pytest.raises(TypeError, match="str.*42"):
        register_env(42, lambda ctx: None)


def test_register_env_rejects_non_callable_creator():
    with pytest.raises(TypeError, match="env_creator must be callable.*not-callable"):
        register_env("bad_env", "not-callable")
    assert not global_registry.contains(ENV_CREATOR, "bad_env")


def test_get_unknown_name_suggests_close_ones():
    register_env("test_close_env", lambda ctx: None)
    with pytest.raises(ValueError, match="test_close_env"):
        global_registry.get(ENV_CREATOR, "test_clse_env")


def test_unknown_category_is_rejected():
    with pytest.raises(ValueError, match="category 'nope'"):
        global_registry.register("nope", "x", 1)


def test_register_trainable_takes_a_trainable_class_or_a_function():
    class Mine(tune.Trainable):
        pass

    register_trainable("test_mine", Mine)
    assert global_registry.get(TRAINABLE_CLASS, "test_mine") is Mine

    def train_fn(config):
        pass

    register_trainable("test_fn", train_fn)
    wrapped = global_registry.get(TRAINABLE_CLASS, "test_fn")
    assert issubclass(wrapped, tune.Trainable) and wrapped.__name__ == "train_fn"
    with pytest.raises(TypeError, match="subclass of corral.tune.Trainable or a function"):
        register_trainable("test_number", 3)


def test_import_corral_tune_does_not_import_torch():
    code = (
        "import sys, corral\n"
        "before = 'torch' in sys.modules\n"
        "import corral.tune\n"
        "assert before or 'torch' not in sys.modules, 'corral.tune imported torch'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_registry_get_input_returns_the_registered_creator():
    def creator(ioctx):
        return ("reader", ioctx)

    assert not registry_contains_input("test_registry_input")
    register_input("test_registry_input", creator)
    assert registry_contains_input("test_registry_input")
    assert registry_get_input("test_registry_input") is creator
    with pytest.raises(ValueError, match="test_registry_inputt.*test_registry_input"):
        registry_get_input("test_registry_inputt")


def test_register_all_puts_the_built_in_algorithms_back():
    """RLlib 1.13's `_register_all` (its tests call it after replacing registrations)."""
    import corral
    from corral.agents.pg import PGTrainer
    from corral.agents.ppo import PPOTrainer
    from corral.tune.registry import get_trainable_cls

    saved = dict(global_registry._values)
    try:
        register_trainable("PPO", PGTrainer)
        assert get_trainable_cls("PPO") is PGTrainer
        corral._register_all()
        assert get_trainable_cls("PPO") is PPOTrainer
        assert global_registry.get(TRAINABLE_CLASS, "PG") is PGTrainer
    finally:
        global_registry._values.clear()
        global_registry._values.update(saved)
