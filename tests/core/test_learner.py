"""Learner.update: epochs, minibatches, shuffling, reducible metrics."""

import numpy as np
import pytest
import torch

from corral.core.learner import Learner, LearnerGroup, TrainingData
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch
from corral.utils.metrics import MetricsLogger, Stats, stats_to_values


class LinearPolicy:
    """Fits y = w x; records the rows of every minibatch it sees."""

    train_columns = ("x", "y")
    weights_seq = 0

    def __init__(self):
        self.config = {"grad_clip": None}
        self.model = torch.nn.Linear(1, 1, bias=False)
        self.dist_class = None
        self.seen: list[list[float]] = []

    def make_optimizer(self):
        return torch.optim.SGD(self.model.parameters(), lr=0.1)

    def loss(self, model, dist_class, batch):
        self.seen.append(batch["x"][:, 0].tolist())
        loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
        return loss, {"loss": loss.detach(), "batch_size": torch.tensor(float(len(batch["x"])))}

    def after_update(self, stats):
        return {}

    def bump_weights_seq(self):
        self.weights_seq += 1


def data(n=10):
    x = np.arange(n, dtype=np.float32).reshape(n, 1)
    return SampleBatch({"x": x, "y": 2 * x})


def test_epochs_times_minibatches():
    policy = LinearPolicy()
    learner = Learner({"p": policy}, {"seed": 0})
    learner.update(batch=MultiAgentBatch({"p": data(10)}, 10), num_epochs=3, minibatch_size=4)
    # 10 // 4 = 2 minibatches per epoch, in order without shuffling.
    assert policy.seen == [[0, 1, 2, 3], [4, 5, 6, 7]] * 3


def test_shuffle_per_epoch_uses_permutations():
    policy = LinearPolicy()
    learner = Learner({"p": policy}, {"seed": 0})
    learner.update(
        batch=MultiAgentBatch({"p": data(8)}, 8),
        num_epochs=2,
        minibatch_size=4,
        shuffle_batch_per_epoch=True,
    )
    first_epoch = sorted(policy.seen[0] + policy.seen[1])
    assert first_epoch == list(range(8))
    assert policy.seen[0] != [0, 1, 2, 3] or policy.seen[2] != [0, 1, 2, 3]


def test_num_total_minibatches_overrides_epochs():
    policy = LinearPolicy()
    learner = Learner({"p": policy}, {"seed": 0})
    learner.update(
        batch=MultiAgentBatch({"p": data(8)}, 8),
        num_epochs=10,
        minibatch_size=4,
        num_total_minibatches=5,
    )
    assert len(policy.seen) == 5


def test_whole_batch_when_no_minibatch_size():
    policy = LinearPolicy()
    Learner({"p": policy}, {}).update(batch=MultiAgentBatch({"p": data(6)}, 6), num_epochs=2)
    assert policy.seen == [list(range(6))] * 2


def test_batches_and_training_data_inputs():
    policy = LinearPolicy()
    learner = Learner({"p": policy}, {})
    learner.update(batches=[data(3).as_multi_agent(), data(2).as_multi_agent()])
    assert len(policy.seen) == 0  # "default_policy" is not trained by this learner
    learner.update(training_data=TrainingData(batch=MultiAgentBatch({"p": data(4)}, 4)))
    assert policy.seen == [[0, 1, 2, 3]]
    with pytest.raises(ValueError, match="needs training data"):
        learner.update()
    with pytest.raises(ValueError, match="data_iterators need minibatch_size >= 1"):
        learner.update(data_iterators=[iter([])])


def test_results_are_stats_that_reduce_across_learners():
    results = []
    for seed in (0, 1):
        policy = LinearPolicy()
        learner = Learner({"p": policy}, {"seed": seed})
        results.append(
            learner.update(batch=MultiAgentBatch({"p": data(8)}, 8), num_epochs=2, minibatch_size=4)
        )
    assert isinstance(results[0]["p"]["loss"], Stats)
    values = stats_to_values(results[0])
    assert values["p"]["batch_size"] == 4.0
    assert values["p"]["num_module_steps_trained"] == 8
    merged = MetricsLogger()
    merged.aggregate(results)
    combined = merged.peek()
    assert combined["p"]["num_module_steps_trained"] == 16
    expected = (float(results[0]["p"]["loss"]) + float(results[1]["p"]["loss"])) / 2
    assert combined["p"]["loss"] == pytest.approx(expected)


def test_no_metrics_reduce_returns_none():
    policy = LinearPolicy()
    out = Learner({"p": policy}, {}).update(
        batch=MultiAgentBatch({"p": data(4)}, 4), _no_metrics_reduce=True
    )
    assert out is None


def test_learning_actually_fits():
    policy = LinearPolicy()
    learner = Learner({"p": policy}, {"seed": 0})
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(-1, 1)
    batch = MultiAgentBatch({"p": SampleBatch({"x": x, "y": 3 * x})}, 64)
    learner.update(batch=batch, num_epochs=50, minibatch_size=16, shuffle_batch_per_epoch=True)
    assert policy.model.weight.item() == pytest.approx(3.0, abs=1e-2)


def test_learner_group_checks_num_learners():
    with pytest.raises(ValueError, match="num_learners must be an int >= 0, got -1"):
        LearnerGroup({"num_learners": -1}, {})
    group = LearnerGroup({}, {"p": LinearPolicy()})
    assert group.local_learner is not None and group.is_local


def test_without_a_seed_the_learner_follows_torchs_global_seed():
    """No `seed`: the shuffles come from torch's global generator, which the learner
    must not reseed (torch.seed() would, from the OS: runs under torch.manual_seed then
    differ, as a CQL test did on CI)."""
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        policy = LinearPolicy()
        learner = Learner({"p": policy}, {})
        learner.update(
            batch=MultiAgentBatch({"p": data(8)}, 8),
            num_epochs=3,
            minibatch_size=4,
            shuffle_batch_per_epoch=True,
        )
        runs.append((policy.seen, torch.rand(4).tolist()))
    assert runs[0] == runs[1]


class RecordingPolicy(LinearPolicy):
    """Records the stats each `after_update` call gets (PPO adapts its KL coefficient
    from them)."""

    def __init__(self):
        super().__init__()
        self.after_update_stats: list[dict] = []

    def after_update(self, stats):
        self.after_update_stats.append(dict(stats))
        return {}


def test_after_update_sees_its_own_update_while_metrics_wait_for_a_reduce():
    policy = RecordingPolicy()
    group = LearnerGroup({}, {"p": policy})
    for n in (4, 8):  # minibatches of 2 and 4 rows: mean batch_size 2, then 4
        group.update(
            batch=MultiAgentBatch({"p": data(n)}, n),
            num_epochs=1,
            minibatch_size=n // 2,
            _no_metrics_reduce=True,
        )
    assert [s["batch_size"] for s in policy.after_update_stats] == [2.0, 4.0]
    # One reduce for both updates: means over all four minibatches, sums over all rows.
    values = stats_to_values(group.reduce_metrics())
    assert values["p"]["batch_size"] == 3.0
    assert values["p"]["num_module_steps_trained"] == 12
    assert stats_to_values(group.reduce_metrics())["p"]["num_module_steps_trained"] == 0
