"""`logger_config` (RLlib 1.13): a logger type with options; Weights & Biases."""

import json
import sys
import types

import pytest

from corral.agents.pg import PGTrainer
from corral.tune.logger import CSVLogger, JsonLogger, NoopLogger, UnifiedLogger

SMALL = {"num_workers": 0, "train_batch_size": 64, "rollout_fragment_length": 64}


class FakeRun:
    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.logged = []
        self.config = types.SimpleNamespace(values={}, update=self._update)
        self.finished = False

    def _update(self, values, allow_val_change=False):
        self.config.values.update(values)

    def log(self, values, step=None):
        self.logged.append((step, values))

    def finish(self):
        self.finished = True


@pytest.fixture
def fake_wandb(monkeypatch):
    runs = []
    module = types.ModuleType("wandb")
    module.init = lambda **kwargs: runs.append(FakeRun(**kwargs)) or runs[-1]
    monkeypatch.setitem(sys.modules, "wandb", module)
    return runs


def test_logger_type_with_options(tmp_path):
    trainer = PGTrainer(config={**SMALL, "logger_config": {"type": NoopLogger}}, env="CartPole-v1")
    trainer.train()
    trainer.stop()
    assert isinstance(trainer._result_logger, NoopLogger)
    assert not any(p.name == "result.json" for p in tmp_path.rglob("*"))


def test_wandb_logger_next_to_the_files(fake_wandb, tmp_path):
    from corral.tune.integration.wandb import WandbLogger

    logger_config = {
        "type": UnifiedLogger,
        "loggers": [JsonLogger, CSVLogger, WandbLogger],
        "project": "corral-test",
        "mode": "offline",
        "logdir": str(tmp_path / "trial"),
    }
    trainer = PGTrainer(config={**SMALL, "logger_config": logger_config}, env="CartPole-v1")
    trainer.train()
    trainer.train()
    trainer.stop()
    [run] = fake_wandb
    assert run.kwargs["project"] == "corral-test" and run.kwargs["mode"] == "offline"
    assert "loggers" not in run.kwargs and run.kwargs["dir"] == str(tmp_path / "trial")
    assert [step for step, _ in run.logged] == [1, 2]
    assert "episode_reward_mean" in run.logged[0][1]
    assert run.config.values["train_batch_size"] == 64 and run.finished
    lines = (tmp_path / "trial" / "result.json").read_text().splitlines()
    assert json.loads(lines[-1])["training_iteration"] == 2


def test_wandb_logger_says_how_to_install_it(monkeypatch, tmp_path):
    from corral.tune.integration.wandb import WandbLogger

    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(ImportError, match="pip install wandb"):
        WandbLogger({"project": "x"}, str(tmp_path))


def test_bad_logger_type_is_named():
    with pytest.raises((TypeError, ValueError), match="logger_config.type"):
        PGTrainer(config={**SMALL, "logger_config": {"type": dict}}, env="CartPole-v1")
