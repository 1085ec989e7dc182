"""RLlib 1.13's `Trainer.validate_framework`."""

from __future__ import annotations

import pytest

from corral.agents.pg import PGTrainer
from corral.agents.trainer import Trainer


def test_validate_framework_accepts_torch_and_refuses_the_rest():
    assert Trainer.validate_framework({"framework": "torch"}) is None
    assert PGTrainer.validate_framework({}) is None  # (the default is torch)
    with pytest.raises(ValueError, match="framework='tf2' is not available.*PyTorch only"):
        Trainer.validate_framework({"framework": "tf2"})
    with pytest.raises(ValueError, match="Unknown framework 'pytorch'"):
        Trainer.validate_framework({"framework": "pytorch"})
