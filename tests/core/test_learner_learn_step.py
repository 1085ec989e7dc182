"""`Learner` with a policy that defines `learn_step` and several optimisers."""

import numpy as np
import pytest
import torch

from corral.core.learner import Learner, NonFiniteUpdateError
from corral.policy.sample_batch import SampleBatch


class TwoOptimizerPolicy:
    """Two parameters, each with its own optimiser and loss, updated by `learn_step`."""

    train_columns = ("obs",)
    weights_seq = 0

    def __init__(self) -> None:
        self.config = {}
        self.a = torch.nn.Parameter(torch.zeros(()))
        self.b = torch.nn.Parameter(torch.zeros(()))
        self.calls = []

    def make_optimizer(self) -> dict[str, torch.optim.Optimizer]:
        return {
            "a": torch.optim.SGD([self.a], lr=0.1),
            "b": torch.optim.SGD([self.b], lr=0.5),
        }

    def learn_step(self, batch, optimizers):
        self.calls.append(len(batch["obs"]))
        target = batch["obs"].mean()
        stats = {}
        for name, param in (("a", self.a), ("b", self.b)):
            loss = 0.5 * (param - target) ** 2
            optimizers[name].zero_grad()
            loss.backward()
            optimizers[name].step()
            stats[f"{name}_loss"] = loss.detach()
        return stats

    def after_update(self, stats):
        return {}

    def bump_weights_seq(self):
        self.weights_seq += 1


def test_learn_step_replaces_loss_backward_step_and_checkpoints_all_optimizers():
    policy = TwoOptimizerPolicy()
    learner = Learner({"default_policy": policy}, {"seed": 0})
    batch = SampleBatch({"obs": np.ones(8, np.float32)})
    results = learner.update(batch=batch, minibatch_size=4, num_epochs=1)
    assert policy.calls == [4, 4]
    # Each parameter followed its own learning rate: a: 0 -> 0.1 -> 0.19; b: 0 -> 0.5 -> 0.75.
    assert policy.a.item() == np.float32(0.19)
    assert policy.b.item() == 0.75
    assert "a_loss" in results["default_policy"] and "b_loss" in results["default_policy"]
    state = learner.get_state()
    assert set(state["optimizers"]["default_policy"]) == {"a", "b"}
    fresh = Learner({"default_policy": TwoOptimizerPolicy()}, {"seed": 0})
    fresh.set_state(state)
    assert fresh.get_state()["optimizers"]["default_policy"].keys() == {"a", "b"}


def test_an_overflow_in_the_second_optimisers_step_puts_both_weights_back():
    # `a` has stepped (finitely) before `b` overflows: both must come back as they were
    # before the update (the copy they are put back from predates every step of it).
    policy = TwoOptimizerPolicy()
    learner = Learner({"default_policy": policy}, {"seed": 0})
    learner.update(batch=SampleBatch({"obs": np.ones(4, np.float32)}))
    before = (policy.a.item(), policy.b.item())
    # One step of gradient -1.5 at this rate overflows float32.
    learner.optimizers["default_policy"]["b"].param_groups[0]["lr"] = 3e38
    with pytest.raises(NonFiniteUpdateError, match="optimiser step"):
        learner.update(batch=SampleBatch({"obs": np.full(4, 2.0, np.float32)}))
    assert (policy.a.item(), policy.b.item()) == before
