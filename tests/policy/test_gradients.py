"""RLlib 1.13's `Policy.compute_gradients` / `apply_gradients` (A3C's API) and
`bump_weights_seq`: one gradient step gives the weights `learn_on_batch` gives."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.pg import DEFAULT_CONFIG, PGTorchPolicy
from corral.core.learner import Learner, NonFiniteUpdateError
from corral.policy.policy import Policy
from corral.policy.sample_batch import SampleBatch

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACT = gym.spaces.Discrete(3)


def make_policy(**overrides) -> PGTorchPolicy:
    config = {**DEFAULT_CONFIG, "model": {**DEFAULT_CONFIG["model"], "fcnet_hiddens": [16]}}
    return PGTorchPolicy(OBS, ACT, {**config, **overrides})


def make_batch(n: int = 32, seed: int = 0) -> SampleBatch:
    rng = np.random.default_rng(seed)
    return SampleBatch(
        {
            SampleBatch.OBS: rng.uniform(-1, 1, (n, 4)).astype(np.float32),
            SampleBatch.ACTIONS: rng.integers(0, 3, n),
            SampleBatch.ADVANTAGES: rng.normal(size=n).astype(np.float32),
        }
    )


def twins(**overrides) -> tuple[PGTorchPolicy, PGTorchPolicy]:
    a, b = make_policy(**overrides), make_policy(**overrides)
    b.set_weights(a.get_weights())
    return a, b


def assert_same_weights(a: Policy, b: Policy) -> None:
    wa, wb = a.get_weights(), b.get_weights()
    assert wa.keys() == wb.keys()
    for key in wa:
        np.testing.assert_array_equal(wa[key], wb[key], err_msg=key)


@pytest.mark.parametrize("grad_clip", [None, 0.05])
def test_compute_then_apply_equals_learn_on_batch(grad_clip):
    learned, stepped = twins(grad_clip=grad_clip)
    before = stepped.get_weights()
    for seed in range(3):  # several steps: the optimiser's moments are shared too
        batch = make_batch(seed=seed)
        learned.learn_on_batch(batch)
        grads, info = stepped.compute_gradients(batch)
        stepped.apply_gradients(grads)
        assert_same_weights(learned, stepped)
    assert any(not np.array_equal(before[k], v) for k, v in stepped.get_weights().items())
    assert "policy_loss" in info["learner_stats"]
    assert isinstance(info["learner_stats"]["policy_loss"], float)


def test_gradients_are_numpy_in_parameter_order_and_clipped():
    policy = make_policy(grad_clip=0.05)
    grads, info = policy.compute_gradients(make_batch())
    params = list(policy.model.parameters())
    assert len(grads) == len(params)
    reached = [g for g in grads if g is not None]
    # PG's loss does not reach the value branch: those parameters get None.
    assert 0 < len(reached) < len(grads)
    for grad, param in zip(grads, params):
        assert grad is None or (isinstance(grad, np.ndarray) and grad.shape == param.shape)
    total = np.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in reached))
    assert total <= 0.05 * (1 + 1e-4)
    assert info["learner_stats"]["grad_gnorm"] > 0.05  # the norm before clipping
    # No step was taken and no gradient is left on the parameters.
    assert policy.weights_seq == 0
    assert all(p.grad is None for p in params)


def test_gradients_from_a_worker_step_another_policy():
    """A3C: a worker computes, the driver applies; both start from the same weights."""
    driver, worker = twins()
    reference, _ = twins()
    reference.set_weights(driver.get_weights())
    batch = make_batch(seed=5)
    grads, _ = worker.compute_gradients(batch)
    driver.apply_gradients([None if g is None else torch.from_numpy(g) for g in grads])
    reference.learn_on_batch(batch)
    assert_same_weights(driver, reference)
    assert driver.weights_seq == 1 and worker.weights_seq == 0


def test_apply_gradients_rejects_a_wrong_length_or_shape():
    policy = make_policy()
    grads, _ = policy.compute_gradients(make_batch())
    with pytest.raises(ValueError, match=r"got 1 gradients, expected one per parameter"):
        policy.apply_gradients(grads[:1])
    with pytest.raises(ValueError, match=r"gradient 0 has shape \(1,\)"):
        policy.apply_gradients([np.zeros(1, np.float32), *grads[1:]])
    assert grads[0] is not None
    assert policy.weights_seq == 0


def test_nonfinite_gradients_raise_and_leave_the_weights():
    policy = make_policy()
    before = policy.get_weights()
    batch = make_batch()
    batch[SampleBatch.ADVANTAGES][0] = np.nan
    with pytest.raises(NonFiniteUpdateError, match="'default_policy'"):
        policy.compute_gradients(batch)
    grads, _ = policy.compute_gradients(make_batch())
    next(g for g in grads if g is not None)[...] = np.inf
    with pytest.raises(NonFiniteUpdateError, match="'default_policy'"):
        policy.apply_gradients(grads)
    after = policy.get_weights()
    assert all(np.array_equal(before[k], after[k]) for k in before)


class LearnStepPolicy:
    """Updates itself in `learn_step`: there is no single gradient."""

    config: dict = {}
    weights_seq = 0

    def __init__(self) -> None:
        self.w = torch.nn.Parameter(torch.zeros(()))

    def make_optimizer(self) -> dict[str, torch.optim.Optimizer]:
        return {"w": torch.optim.SGD([self.w], lr=0.1)}

    def learn_step(self, batch, optimizers):
        return {}

    def after_update(self, stats):
        return {}

    def bump_weights_seq(self):
        self.weights_seq += 1


def test_learn_step_policies_refuse_the_gradient_api_by_name():
    learner = Learner({"p": LearnStepPolicy()}, {"seed": 0})
    with pytest.raises(NotImplementedError, match="LearnStepPolicy updates itself in `learn_step`"):
        learner.compute_gradients("p", make_batch())
    with pytest.raises(NotImplementedError, match="apply_gradients"):
        learner.apply_gradients("p", [np.zeros(())])
    with pytest.raises(KeyError, match="does not train policy 'q'"):
        learner.compute_gradients("q", make_batch())


def test_bump_weights_seq_counts_weight_changes():
    policy = Policy(OBS, ACT, {})
    assert policy.weights_seq == 0
    policy.bump_weights_seq()
    policy.bump_weights_seq()
    assert policy.weights_seq == 2
    trained = make_policy()
    trained.learn_on_batch(make_batch())
    assert trained.weights_seq == 1
