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


def test_framework_none_is_rllib_1_13_s_framework_free_setting():
    # RLlib 1.13 skips the framework check for None (policies of one's own in numpy).
    assert Trainer.validate_framework({"framework": None}) is None
    trainer = PGTrainer(
        env="CartPole-v1",
        config={"num_workers": 0, "framework": None, "train_batch_size": 200},
    )
    try:
        assert trainer.train()["timesteps_total"] == 200
    finally:
        trainer.stop()
