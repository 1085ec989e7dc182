"""MAML's policy: the workers' inner step is a plain policy-gradient step of `inner_lr`, and
the driver's meta-gradient runs back through that step (second order): checked against a
hand computation on a tiny linear policy and against finite differences."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.maml import DEFAULT_CONFIG, MAMLTrainer
from corral.agents.maml.maml_torch_policy import (
    ADAPT_STEP,
    TASK_INDEX,
    KLCoeffMixin,
    MAMLLoss,
    MAMLTorchPolicy,
    maml_loss,
    maml_stats,
    task_rows,
)
from corral.models import ModelCatalog
from corral.models.torch.torch_modelv2 import TorchModelV2
from corral.policy.sample_batch import SampleBatch

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACTIONS = gym.spaces.Discrete(3)


class LinearModel(TorchModelV2, torch.nn.Module):
    """logits = W obs + b, value = w obs + c, in the dtype of the weights (float64 here)."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        torch.nn.Module.__init__(self)
        self._logits = torch.nn.Linear(3, num_outputs)
        self._value_branch = torch.nn.Linear(3, 1)
        self._obs = None

    def forward(self, input_dict, state, seq_lens):
        self._obs = input_dict["obs"].to(self._logits.weight.dtype)
        return self._logits(self._obs), state

    def value_function(self):
        return self._value_branch(self._obs)[:, 0]


ModelCatalog.register_custom_model("maml_test_linear", LinearModel)


def _policy(worker_index: int, **config) -> MAMLTorchPolicy:
    """A MAML policy with a `LinearModel`."""
    merged = MAMLTrainer.merge_trainer_configs(
        DEFAULT_CONFIG,
        {"model": {"custom_model": "maml_test_linear"}, "num_workers": 2, "seed": 0, **config},
    )
    merged["worker_index"] = worker_index
    torch.manual_seed(0)
    policy = MAMLTorchPolicy(OBS, ACTIONS, merged)
    with torch.no_grad():  # weights far from the near-uniform init: larger curvature
        for p in policy.model.parameters():
            p.copy_(torch.randn_like(p))
    return policy


def _rows(policy: MAMLTorchPolicy, n: int, seed: int, behaviour_noise: float) -> dict:
    """`n` rows with behaviour logits near the policy's own (exactly them when
    `behaviour_noise` is 0) and actions drawn from them."""
    g = torch.Generator().manual_seed(seed)
    obs = torch.rand(n, 3, generator=g, dtype=torch.float64) * 2 - 1
    with torch.no_grad():
        logits, values = policy.forward_train({SampleBatch.OBS: obs})
    behaviour = logits + behaviour_noise * torch.randn(
        logits.shape, generator=g, dtype=logits.dtype
    )
    actions = torch.multinomial(torch.softmax(behaviour, -1), 1, generator=g)[:, 0]
    return {
        SampleBatch.OBS: obs,
        SampleBatch.ACTIONS: actions,
        SampleBatch.ACTION_DIST_INPUTS: behaviour,
        SampleBatch.VF_PREDS: values + 0.1 * torch.randn(n, generator=g, dtype=values.dtype),
        SampleBatch.ADVANTAGES: torch.randn(n, generator=g, dtype=torch.float64),
        SampleBatch.VALUE_TARGETS: torch.randn(n, generator=g, dtype=torch.float64),
    }


def _meta_batch(policy: MAMLTorchPolicy, tasks: int, steps: int) -> dict:
    """Rows of every (task, step), shuffled: the loss must find them by their columns."""
    parts = []
    for task in range(tasks):
        for step in range(steps + 1):
            rows = _rows(policy, 7 + task + step, seed=10 * task + step, behaviour_noise=0.3)
            rows[TASK_INDEX] = torch.full((len(rows[SampleBatch.OBS]),), task)
            rows[ADAPT_STEP] = torch.full((len(rows[SampleBatch.OBS]),), step)
            parts.append(rows)
    batch = {k: torch.cat([p[k] for p in parts]) for k in parts[0]}
    order = torch.randperm(len(batch[TASK_INDEX]), generator=torch.Generator().manual_seed(1))
    return {k: v[order] for k, v in batch.items()}


def test_inner_step_is_one_policy_gradient_step_of_inner_lr():
    policy = _policy(worker_index=1, inner_lr=0.7, vf_loss_coeff=0.5, vf_clip_param=100.0)
    rows = _rows(policy, 12, seed=3, behaviour_noise=0.0)
    before = {k: v.detach().double() for k, v in policy.model.named_parameters()}
    policy.learn_on_batch(SampleBatch({k: v.numpy() for k, v in rows.items()}))
    after = {k: v.detach().double() for k, v in policy.model.named_parameters()}

    obs, adv = rows[SampleBatch.OBS], rows[SampleBatch.ADVANTAGES]
    # -mean(A * grad log pi(a|s)) for logits W obs + b: grad_logits log pi = onehot(a) - pi.
    probs = torch.softmax(obs @ before["_logits.weight"].T + before["_logits.bias"], -1)
    dlogits = -(adv[:, None] * (torch.nn.functional.one_hot(rows[SampleBatch.ACTIONS], 3) - probs))
    dlogits /= len(obs)
    # 0.5 * mean((V - T)^2) for V = w obs + c (nothing clipped: vf_preds == V, clip 100).
    values = obs @ before["_value_branch.weight"][0] + before["_value_branch.bias"][0]
    dvalues = 0.5 * 2 * (values - rows[SampleBatch.VALUE_TARGETS]) / len(obs)
    expected_step = {
        "_logits.weight": dlogits.T @ obs,
        "_logits.bias": dlogits.sum(0),
        "_value_branch.weight": (dvalues @ obs)[None],
        "_value_branch.bias": dvalues.sum()[None],
    }
    for name, step in expected_step.items():
        torch.testing.assert_close(after[name], before[name] - 0.7 * step, rtol=0, atol=2e-5)
    assert policy.cur_lr == 0.7
    assert isinstance(policy._own_learner().optimizers["default_policy"], torch.optim.SGD)


def test_meta_gradient_is_the_second_order_gradient_through_the_inner_step():
    # Only the surrogates (no value loss, entropy or KL terms; no clipping), so the
    # meta-gradient has a closed form: (I - inner_lr * H_inner)^T grad L_outer(theta').
    inner_lr = 0.9
    policy = _policy(
        worker_index=0,
        inner_lr=inner_lr,
        vf_loss_coeff=0.0,
        kl_coeff=0.0,
        clip_param=1e6,
        num_workers=1,
    )
    policy.model.double()
    batch = _meta_batch(policy, tasks=1, steps=1)
    names = ["_logits.weight", "_logits.bias"]
    params = dict(policy.model.named_parameters())
    theta = torch.cat([params[n].detach().reshape(-1) for n in names])

    def surrogate_loss(flat: torch.Tensor, step: int) -> torch.Tensor:
        rows = batch[ADAPT_STEP] == step
        w, b = flat[:9].reshape(3, 3), flat[9:]
        logp = torch.log_softmax(batch[SampleBatch.OBS][rows] @ w.T + b, -1)
        old = torch.log_softmax(batch[SampleBatch.ACTION_DIST_INPUTS][rows], -1)
        idx = torch.arange(int(rows.sum())), batch[SampleBatch.ACTIONS][rows]
        ratio = torch.exp(logp[idx] - old[idx])
        return -(batch[SampleBatch.ADVANTAGES][rows] * ratio).mean()

    inner_grad = torch.autograd.functional.jacobian(lambda f: surrogate_loss(f, 0), theta)
    hessian = torch.autograd.functional.hessian(lambda f: surrogate_loss(f, 0), theta)
    adapted = theta - inner_lr * inner_grad
    outer_grad = torch.autograd.functional.jacobian(lambda f: surrogate_loss(f, 1), adapted)
    expected = (torch.eye(len(theta), dtype=theta.dtype) - inner_lr * hessian).T @ outer_grad

    loss, stats = policy.loss(policy.model, policy.dist_class, batch)
    grads = torch.autograd.grad(loss, [params[n] for n in names])
    got = torch.cat([g.reshape(-1) for g in grads])
    torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-12)
    # The second-order term matters here: the first-order gradient is far off.
    assert (got - outer_grad).norm() > 0.1 * got.norm()
    torch.testing.assert_close(loss, surrogate_loss(adapted, 1))


@pytest.mark.parametrize(
    ("steps", "grad_clip"), [(1, None), (2, None), (1, 0.5)], ids=["1", "2", "1-clipped"]
)
def test_meta_gradient_matches_finite_differences(steps, grad_clip):
    # All terms: clipped surrogate, PPO2 value loss, entropy, the inner steps' KL penalties
    # (and inner gradients clipped to a norm they exceed).
    policy = _policy(
        worker_index=0,
        inner_lr=0.3,
        inner_adaptation_steps=steps,
        kl_coeff=0.4,
        entropy_coeff=0.05,
        vf_loss_coeff=0.5,
        clip_param=0.2,
        vf_clip_param=0.5,
        grad_clip=grad_clip,
    )
    policy.kl_coeff_val = [0.4, 0.1, 0.25, 0.7][: 2 * steps]
    policy.model.double()
    batch = _meta_batch(policy, tasks=2, steps=steps)
    params = list(policy.model.parameters())
    loss, _ = policy.loss(policy.model, policy.dist_class, batch)
    grads = torch.autograd.grad(loss, params)
    eps = 1e-6
    for param, grad in zip(params, grads):
        flat, numeric = param.data.view(-1), torch.zeros_like(grad).view(-1)
        for i in range(len(flat)):
            value = flat[i].item()
            flat[i] = value + eps
            plus = policy.loss(policy.model, policy.dist_class, batch)[0].item()
            flat[i] = value - eps
            minus = policy.loss(policy.model, policy.dist_class, batch)[0].item()
            flat[i] = value
            numeric[i] = (plus - minus) / (2 * eps)
        torch.testing.assert_close(grad.reshape(-1), numeric, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("grad_clip", [None, 0.05])
def test_meta_objective_adapts_as_the_worker_did(grad_clip):
    # The meta-objective's inner step reproduces the worker's step (clipped alike).
    config = {"inner_lr": 0.5, "grad_clip": grad_clip, "num_workers": 1}
    worker, driver = _policy(worker_index=1, **config), _policy(worker_index=0, **config)
    driver.model.double()
    rows = _rows(worker, 10, seed=4, behaviour_noise=0.0)
    worker.learn_on_batch(SampleBatch({k: v.numpy() for k, v in rows.items()}))
    adapted = {k: v.detach().double() for k, v in worker.model.named_parameters()}
    # The rows as step 0 (what the worker adapted on), again as step 1 (any rows do).
    batch = {k: torch.cat([v, v]) for k, v in rows.items()}
    batch[TASK_INDEX] = torch.zeros(20, dtype=torch.long)
    batch[ADAPT_STEP] = torch.tensor([0] * 10 + [1] * 10)
    seen = []

    def forward(params, part):
        seen.append({k: v.detach() for k, v in params.items()})
        return driver.functional_forward(params, part)

    MAMLLoss(
        driver.model,
        driver.dist_class,
        batch,
        forward,
        cur_kl_coeff=[0.0],
        inner_lr=0.5,
        inner_adaptation_steps=1,
        entropy_coeff=0.0,
        clip_param=0.3,
        vf_clip_param=10.0,
        vf_loss_coeff=DEFAULT_CONFIG["vf_loss_coeff"],
        grad_clip=grad_clip,
    )
    outer_params = seen[-1]
    for name, value in adapted.items():
        torch.testing.assert_close(outer_params[name], value, rtol=0, atol=1e-5)
    moved = sum((adapted[k] - v).norm() ** 2 for k, v in seen[0].items()) ** 0.5
    if grad_clip:
        assert moved == pytest.approx(0.5 * grad_clip, rel=1e-3)


def test_kl_coefficients_adapt_per_task_and_step_after_the_meta_update():
    policy = _policy(worker_index=0, kl_coeff=0.2, kl_target=0.01, inner_adaptation_steps=1)
    assert policy.kl_coeff_val == [0.2, 0.2]  # 2 workers x 1 step
    policy.model.double()
    loss, stats = policy.loss(policy.model, policy.dist_class, _meta_batch(policy, 2, 1))
    assert set(stats) >= {"total_loss", "policy_loss", "vf_loss", "kl_loss", "inner_kl"}
    assert stats["cur_kl_coeff"] == pytest.approx(0.2)
    kls = policy._inner_kls.tolist()
    assert len(kls) == 2 and all(kl > 0.015 for kl in kls)  # behaviour logits differ
    assert policy.after_update({}) == {"cur_kl_coeff": pytest.approx(0.4)}
    assert policy.kl_coeff_val == [0.4, 0.4]
    assert policy.extra_state() == {"kl_coeff_val": [0.4, 0.4]}
    # RLlib's rule: below kl_target / 1.5 halves, above 1.5 * kl_target doubles.
    assert KLCoeffMixin.update_kls(policy, [0.001, 0.012]) == [0.2, 0.4]


def test_rllib_loss_and_stats_functions():
    policy = _policy(worker_index=0)
    policy.model.double()
    batch = _meta_batch(policy, 2, 1)
    loss = maml_loss(policy, policy.model, policy.dist_class, batch)
    stats = maml_stats(policy, batch)
    assert torch.allclose(stats["total_loss"], loss.detach())
    assert "inner_kl" in stats


def test_meta_loss_names_what_the_batch_lacks():
    policy = _policy(worker_index=0)
    batch = _rows(policy, 5, seed=0, behaviour_noise=0.0)
    policy.model.double()
    with pytest.raises(ValueError, match="maml_task"):
        policy.loss(policy.model, policy.dist_class, batch)
    batch[TASK_INDEX] = torch.zeros(5, dtype=torch.long)
    batch[ADAPT_STEP] = torch.zeros(5, dtype=torch.long)
    with pytest.raises(ValueError, match=r"\(task, step\) pairs \[\(0, 0\)\]"):
        task_rows(batch, 1)


def test_task_rows_keep_the_task_indices_of_a_batch_with_gaps():
    # Workers 2 and 3 (slots 1, 2) left after worker 1 was dropped: no task 0.
    batch = {
        TASK_INDEX: torch.tensor([2, 1, 2, 1, 1, 2]),
        ADAPT_STEP: torch.tensor([0, 0, 1, 1, 0, 1]),
    }
    rows = task_rows(batch, 1)
    assert list(rows) == [1, 2]
    assert [r.tolist() for r in rows[1]] == [[1, 4], [3]]
    assert [r.tolist() for r in rows[2]] == [[0], [2, 5]]


# -- RLlib 1.13's MAMLLoss methods: split_placeholders, compute_losses ------------------------


def _meta_loss(policy: MAMLTorchPolicy, batch: dict, steps: int) -> MAMLLoss:
    cfg = policy.config
    return MAMLLoss(
        policy.model,
        policy.dist_class,
        batch,
        policy.functional_forward,
        cur_kl_coeff=[0.1] * 3 * steps,
        inner_lr=cfg["inner_lr"],
        inner_adaptation_steps=steps,
        entropy_coeff=0.01,
        clip_param=cfg["clip_param"],
        vf_clip_param=cfg["vf_clip_param"],
        vf_loss_coeff=cfg["vf_loss_coeff"],
    )


@pytest.mark.parametrize("as_array", [False, True])
def test_split_placeholders_cuts_rllibs_step_major_layout(as_array):
    policy = _policy(worker_index=0)
    policy.model.double()
    meta = _meta_loss(policy, _meta_batch(policy, 2, 1), 1)
    split = [[2, 3], [1, 4]]  # step 0: task 0 has 2 rows, task 1 3; step 1: 1 and 4
    parts = meta.split_placeholders(torch.arange(10), np.array(split) if as_array else split)
    assert [[p.tolist() for p in step] for step in parts] == [
        [[0, 1], [2, 3, 4]],
        [[5], [6, 7, 8, 9]],
    ]
    with pytest.raises(RuntimeError):
        meta.split_placeholders(torch.arange(9), split)


def test_meta_loss_rows_and_compute_losses_are_each_tasks_step():
    policy = _policy(worker_index=0, num_workers=3, inner_adaptation_steps=2)
    policy.model.double()
    batch = _meta_batch(policy, 3, 2)
    keep = batch[TASK_INDEX] != 1  # a batch with a gap: task 1's worker was dropped
    batch = {k: v[keep] for k, v in batch.items()}
    meta = _meta_loss(policy, batch, 2)
    assert meta.task_indices == [0, 2]
    params = {k: p.detach() for k, p in policy.model.named_parameters()}
    for step in range(3):
        for t, task in enumerate(meta.task_indices):
            rows = meta.rows[step][t]
            mine = (batch[TASK_INDEX] == task) & (batch[ADAPT_STEP] == step)
            for name, column in batch.items():  # the rows of that task and step, in order
                torch.testing.assert_close(rows[name], column[mine], rtol=0, atol=0)
            for clip in (False, True):
                expected = meta.ppo_loss(params, rows, clip_loss=clip)
                by_params = meta.compute_losses(params, step, t, clip_loss=clip)
                by_module = meta.compute_losses(policy.model, step, t, clip_loss=clip)
                for a, b, c in zip(expected, by_params, by_module):
                    torch.testing.assert_close(a, b)
                    torch.testing.assert_close(a.detach(), c.detach())
    # RLlib's default: the unclipped surrogate (the inner steps').
    default = meta.compute_losses(params, 0, 0)[0]
    torch.testing.assert_close(default, meta.ppo_loss(params, meta.rows[0][0], clip_loss=False)[0])
