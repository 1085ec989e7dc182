"""RLlib 1.13's `utils.annotations`, `utils.deprecation.Deprecated` and `utils.framework`."""

import logging
import sys

import pytest
import torch

from corral.utils import annotations, framework
from corral.utils.annotations import DeveloperAPI, ExperimentalAPI, PublicAPI, override
from corral.utils.deprecation import Deprecated


class Parent:
    def loss(self):
        return 1

    @classmethod
    def make(cls):
        return cls()


def test_override_checks_the_parent_has_the_method():
    class Child(Parent):
        @override(Parent)
        def loss(self):
            return 2

        @override(Parent)
        @classmethod
        def make(cls):
            return cls()

    assert Child().loss() == 2 and isinstance(Child.make(), Child)
    with pytest.raises(NameError, match="does not override any method of"):

        class Typo(Parent):
            @override(Parent)
            def lsos(self):
                return 3


def test_override_of_a_tensorflow_stand_in_defines_the_class():
    # RLlib 1.13's examples define a TF model beside the torch one, at import time.
    from corral.models.tf.recurrent_net import RecurrentNetwork

    class TFRNNModel(RecurrentNetwork):
        @override(RecurrentNetwork)
        def forward_rnn(self, inputs, state, seq_lens):
            return inputs, state

    with pytest.raises(Exception, match="TensorFlow"):
        TFRNNModel(None, None, 2, {}, "tf_rnn")


def test_documenting_decorators_return_the_object():
    def f():
        return 1

    for deco in (
        PublicAPI,
        DeveloperAPI,
        ExperimentalAPI,
        annotations.OverrideToImplementCustomLogic,
        annotations.OverrideToImplementCustomLogic_CallToSuperRecommended,
    ):
        assert deco(f) is f
    assert annotations.Deprecated is Deprecated


def test_deprecated_warns_once_or_raises(caplog):
    @Deprecated(new="new_function", error=False)
    def old_function(x):
        return x + 1

    # On corral's logger itself: an earlier trainer's `log_level` may have raised its level.
    with caplog.at_level(logging.WARNING, logger="corral"):
        assert old_function(1) == 2
        assert old_function(2) == 3
    warnings = [r for r in caplog.records if "old_function" in r.getMessage()]
    assert len(warnings) == 1 and "new_function" in warnings[0].getMessage()

    @Deprecated(old="OldClass", new="NewClass", error=True)
    class OldClass:
        pass

    with pytest.raises(ValueError, match="`OldClass` has been deprecated. Use `NewClass`"):
        OldClass()

    @Deprecated(help="gone", error=KeyError)
    def gone():
        return None

    with pytest.raises(KeyError, match="gone"):
        gone()


def test_try_import_torch_and_the_tf_jax_stand_ins():
    torch_mod, nn = framework.try_import_torch()
    assert torch_mod is torch and nn is torch.nn
    assert framework.try_import_tf() == (None, None, None)
    assert framework.try_import_jax() == (None, None)
    assert framework.try_import_tfp() is None
    with pytest.raises(ImportError, match="PyTorch only"):
        framework.try_import_tf(error=True)
    assert "tensorflow" not in sys.modules


def test_try_import_torch_stubs(monkeypatch):
    monkeypatch.setenv("RLLIB_TEST_NO_TORCH_IMPORT", "1")
    torch_mod, nn = framework.try_import_torch()
    assert torch_mod is None and isinstance(nn, framework.NNStub)

    class Model(nn.Module):  # a torch-less module definition still imports
        pass

    with pytest.raises(ImportError):
        Model()


def test_get_variable_and_tf_function():
    assert framework.get_variable(3.0, framework="torch") == 3.0
    v = framework.get_variable(
        [1.0, 2.0], framework="torch", torch_tensor=True, trainable=True, dtype=torch.float32
    )
    assert v.dtype == torch.float32 and v.requires_grad
    with pytest.raises(ImportError, match="PyTorch only"):
        framework.get_variable(1.0, framework="tf")

    def f(x):
        return x

    assert framework.tf_function(None)(f) is f


def test_deprecated_get_activation_fn_location():
    assert framework.get_activation_fn("relu", framework="torch") is torch.nn.ReLU
