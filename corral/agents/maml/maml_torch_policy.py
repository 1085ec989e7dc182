"""MAML's policy: the workers' inner adaptation step and the driver's meta-objective.

Finn, Abbeel & Levine 2017, "Model-Agnostic Meta-Learning for Fast Adaptation of Deep
Networks" (arXiv:1703.03400), with RLlib 1.13's PPO-style outer objective. One class plays
both parts, by the rollout worker it lives in (RLlib's rule):

- on a rollout worker (``worker_index`` >= 1) the policy adapts to the worker's task:
  ``learn_on_batch`` takes one plain SGD step of size ``inner_lr`` on `WorkerLoss`, the
  unclipped surrogate ``-mean(A * pi / pi_old)`` (whose gradient at the sampling policy is
  the policy gradient ``-mean(A * grad log pi)``) plus the value loss and minus the entropy
  bonus;
- on the driver (``worker_index`` 0) the loss is the meta-objective (`MAMLLoss`): per task,
  the workers' inner steps are taken again on that task's pre-adaptation rows, keeping the
  graph (``theta'_i = theta - inner_lr * grad L_inner(theta)``, eq. 1 of the paper), then
  PPO's clipped surrogate + value loss - entropy of ``theta'_i`` on the rows sampled after
  adaptation, plus a KL penalty on each inner step with its own adaptive coefficient
  (`KLCoeffMixin`). Its gradient w.r.t. ``theta`` runs back through the inner steps (second
  order, eq. 2); Adam with ``lr`` steps ``theta``.

The driver's train batch is every worker's batch of every adaptation step; two columns say
which task (`TASK_INDEX`) and which adaptation step (`ADAPT_STEP`) a row belongs to (RLlib
kept a ``split`` array of block sizes instead).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import torch

from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_mixins import AdvantagesMixin
from corral.policy.torch_policy import TensorDict, TorchPolicy
from corral.utils.torch_utils import make_adam

# The train batch's columns of the meta-update: the task (the position of the worker that
# sampled the row) and the adaptation step (0: before adaptation) of each row.
TASK_INDEX = "maml_task"
ADAPT_STEP = "maml_adaptation_step"

# fn(parameters by name, rows) -> (action-distribution inputs, values): the model run
# with the given parameters in place of its own.
FunctionalForward = Callable[
    [dict[str, torch.Tensor], TensorDict], tuple[torch.Tensor, torch.Tensor]
]


def PPOLoss(  # noqa: N802 - RLlib 1.13's name
    dist_class: type,
    actions: torch.Tensor,
    curr_logits: torch.Tensor,
    behaviour_logits: torch.Tensor,
    advantages: torch.Tensor,
    value_fn: torch.Tensor,
    value_targets: torch.Tensor,
    vf_preds: torch.Tensor,
    cur_kl_coeff: float | torch.Tensor,
    entropy_coeff: float,
    clip_param: float,
    vf_clip_param: float,
    vf_loss_coeff: float,
    clip_loss: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """MAML's PPO loss on a batch of rows (RLlib 1.13's arguments).

    ``-surrogate + cur_kl_coeff * KL(behaviour || current) + vf_loss_coeff * vf_loss -
    entropy_coeff * entropy``, each term a mean over the rows. The surrogate is ``A * r``
    with ``r = pi(a|s) / pi_behaviour(a|s)``, and with ``clip_loss`` PPO's
    ``min(A * r, A * clip(r, 1 - clip_param, 1 + clip_param))``. The value loss is PPO2's:
    the larger squared error of the values and of the values moved at most
    ``vf_clip_param`` away from ``vf_preds``.

    Returns:
        (total loss, mean surrogate objective, mean KL, mean value loss, mean entropy).
    """
    curr = dist_class(curr_logits, None)
    prev = dist_class(behaviour_logits, None)
    ratio = torch.exp(curr.logp(actions) - prev.logp(actions))
    surrogate = advantages * ratio
    if clip_loss:
        clipped = advantages * torch.clamp(ratio, 1 - clip_param, 1 + clip_param)
        surrogate = torch.minimum(surrogate, clipped)
    vf_clipped = vf_preds + torch.clamp(value_fn - vf_preds, -vf_clip_param, vf_clip_param)
    vf_loss = torch.maximum((value_fn - value_targets) ** 2, (vf_clipped - value_targets) ** 2)
    surr, kl = surrogate.mean(), prev.kl(curr).mean()
    vf, entropy = vf_loss.mean(), curr.entropy().mean()
    total = -surr + vf_loss_coeff * vf
    # Terms weighted by 0 stay out of the sum (0 * inf would be NaN).
    if isinstance(cur_kl_coeff, torch.Tensor) or cur_kl_coeff != 0.0:
        total = total + cur_kl_coeff * kl
    if entropy_coeff != 0.0:
        total = total - entropy_coeff * entropy
    return total, surr, kl, vf, entropy


class WorkerLoss:
    """The inner adaptation loss of a rollout worker: `PPOLoss` unclipped, without KL
    (RLlib 1.13's class and arguments; ``model`` and ``cur_kl_coeff`` are not read).

    Attributes:
        loss: the total loss (a scalar tensor).
        surr_loss, kl_loss, vf_loss, entropy: its terms (`PPOLoss`'s).
    """

    def __init__(
        self,
        model: Any,
        dist_class: type,
        actions: torch.Tensor,
        curr_logits: torch.Tensor,
        behaviour_logits: torch.Tensor,
        advantages: torch.Tensor,
        value_fn: torch.Tensor,
        value_targets: torch.Tensor,
        vf_preds: torch.Tensor,
        cur_kl_coeff: float,
        entropy_coeff: float,
        clip_param: float,
        vf_clip_param: float,
        vf_loss_coeff: float,
        clip_loss: bool = False,
    ) -> None:
        self.loss, self.surr_loss, self.kl_loss, self.vf_loss, self.entropy = PPOLoss(
            dist_class=dist_class,
            actions=actions,
            curr_logits=curr_logits,
            behaviour_logits=behaviour_logits,
            advantages=advantages,
            value_fn=value_fn,
            value_targets=value_targets,
            vf_preds=vf_preds,
            cur_kl_coeff=0.0,
            entropy_coeff=entropy_coeff,
            clip_param=clip_param,
            vf_clip_param=vf_clip_param,
            vf_loss_coeff=vf_loss_coeff,
            clip_loss=clip_loss,
        )


class MAMLLoss:
    """The meta-objective of one meta-step over every task of a MAML train batch.

    For each task ``i``: ``inner_adaptation_steps`` differentiable SGD steps of size
    ``inner_lr`` on `WorkerLoss` over the task's rows of steps 0, 1, ... (the steps its
    worker took), starting from the model's parameters; then `PPOLoss` with clipping on
    the rows sampled after the last step, with the adapted parameters; plus
    ``cur_kl_coeff[i * steps + s] * KL_s`` averaged over the inner steps ``s``. The loss
    is the mean over tasks. A task's index is its worker's slot (`worker_index - 1`), so
    it keeps its KL coefficients when another worker is dropped; the indices need not be
    consecutive. The optimiser step is the learner's (RLlib's class also
    stepped the optimiser).

    Args:
        model: the policy's model; its parameters are the meta-parameters.
        dist_class: the action distribution class.
        train_batch: the rows, with `TASK_INDEX` and `ADAPT_STEP` columns.
        forward: runs the model with given parameters (`FunctionalForward`).
        cur_kl_coeff: one KL coefficient per task and inner step, task-major.
        inner_lr: the inner steps' size.
        inner_adaptation_steps: inner steps per task.
        entropy_coeff, clip_param, vf_clip_param, vf_loss_coeff: `PPOLoss`'s.
        grad_clip: clip each inner step's gradient to this global norm, as the workers'
            learners clip theirs (None: no clipping).

    Attributes:
        rows: ``rows[step][task]``, the rows of each adaptation step of each task (all
            columns; RLlib 1.13 kept one such nesting per column, `split_placeholders`).
        task_indices: the task index of each position ``task`` of `rows`.
        loss: the meta-loss (scalar tensor with the graph through the inner steps).
        mean_policy_loss, mean_kl_loss, mean_vf_loss, mean_entropy: the outer terms,
            averaged over tasks (detached; the policy loss is minus the surrogate).
        inner_kls: ``[tasks * steps]`` KL of each inner step, task-major (detached).
        inner_kl_slots: the index into `cur_kl_coeff` of each of `inner_kls`.

    Raises:
        ValueError: the batch lacks the index columns, a task lacks the rows of a step,
            or a task index has no coefficients.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        dist_class: type,
        train_batch: TensorDict,
        forward: FunctionalForward,
        *,
        cur_kl_coeff: Sequence[float],
        inner_lr: float,
        inner_adaptation_steps: int,
        entropy_coeff: float,
        clip_param: float,
        vf_clip_param: float,
        vf_loss_coeff: float,
        grad_clip: float | None = None,
    ) -> None:
        self.dist_class = dist_class
        self.forward = forward
        self.entropy_coeff = entropy_coeff
        self.clip_param = clip_param
        self.vf_clip_param = vf_clip_param
        self.vf_loss_coeff = vf_loss_coeff
        steps = inner_adaptation_steps
        tasks = task_rows(train_batch, steps)
        if (max(tasks) + 1) * steps > len(cur_kl_coeff):
            raise ValueError(
                f"The batch has task indices up to {max(tasks)} x {steps} inner steps, but "
                f"only {len(cur_kl_coeff)} KL coefficients (one per worker and inner step)."
            )
        # The rows step-major, then by task (RLlib 1.13's layout), and the block sizes.
        self.task_indices = list(tasks)
        order = torch.cat([tasks[i][s] for s in range(steps + 1) for i in self.task_indices])
        split = [[len(tasks[i][s]) for i in self.task_indices] for s in range(steps + 1)]
        columns = {
            name: self.split_placeholders(column.index_select(0, order), split)
            for name, column in train_batch.items()
        }
        self.rows: list[list[TensorDict]] = [
            [{name: parts[s][t] for name, parts in columns.items()} for t in range(len(tasks))]
            for s in range(steps + 1)
        ]
        params: dict[str, torch.Tensor] = {
            name: p for name, p in model.named_parameters() if p.requires_grad
        }
        task_losses, terms, inner_kls = [], [], []
        self.inner_kl_slots: list[int] = []
        for t, i in enumerate(self.task_indices):
            fast = params
            penalties = []
            for s in range(steps):
                loss, _, kl, _, _ = self.compute_losses(fast, s, t)
                # create_graph: theta' stays a function of theta (the second-order term).
                grads: Sequence[torch.Tensor | None] = torch.autograd.grad(
                    loss, list(fast.values()), create_graph=True, allow_unused=True
                )
                if grad_clip:
                    grads = _clipped(grads, grad_clip)
                fast = {
                    name: p if g is None else p - inner_lr * g
                    for (name, p), g in zip(fast.items(), grads)
                }
                penalties.append(cur_kl_coeff[i * steps + s] * kl)
                inner_kls.append(kl.detach())
                self.inner_kl_slots.append(i * steps + s)
            outer, surr, kl, vf, entropy = self.compute_losses(fast, steps, t, clip_loss=True)
            task_losses.append(outer + torch.stack(penalties).mean())
            terms.append(torch.stack([-surr, kl, vf, entropy]).detach())
        self.loss = torch.stack(task_losses).mean()
        means = torch.stack(terms).mean(0)
        self.mean_policy_loss, self.mean_kl_loss, self.mean_vf_loss, self.mean_entropy = means
        self.inner_kls = torch.stack(inner_kls)

    def compute_losses(
        self,
        model: dict[str, torch.Tensor] | torch.nn.Module,
        inner_adapt_iter: int,
        task_iter: int,
        clip_loss: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """`PPOLoss`'s (total, surrogate, KL, value, entropy) terms of the model with the
        given parameters on the rows of adaptation step `inner_adapt_iter` of the task at
        position `task_iter` (of `task_indices`).

        Args:
            model: the parameters by name, as the model's `named_parameters()` names them
                (e.g. adapted ones), or a module whose parameters have those names (RLlib
                1.13 passed its adapted functional copy of the model).
            inner_adapt_iter: the adaptation step (0: before adaptation).
            task_iter: the task's position in `rows[inner_adapt_iter]`.
            clip_loss: PPO's clipped surrogate (the outer objective), else the unclipped
                one (the inner steps').
        """
        params: dict[str, torch.Tensor] = (
            dict(model.named_parameters()) if isinstance(model, torch.nn.Module) else model
        )
        return self.ppo_loss(params, self.rows[inner_adapt_iter][task_iter], clip_loss=clip_loss)

    def split_placeholders(
        self, placeholder: torch.Tensor, split: torch.Tensor | Sequence[Sequence[int]]
    ) -> list[tuple[torch.Tensor, ...]]:
        """A column of rows laid out step-major, then by task, cut into its blocks:
        ``out[step][task]``.

        Args:
            placeholder: the column (rows along dim 0).
            split: the block sizes, ``[steps + 1, tasks]`` (RLlib 1.13's "split"
                array): row ``s`` holds each task's row count of adaptation step ``s``.

        Raises:
            RuntimeError: the sizes do not add up to the column's rows.
        """
        sizes = [[int(n) for n in row] for row in split]
        per_step = torch.split(placeholder, [sum(row) for row in sizes], dim=0)
        return [torch.split(block, row, dim=0) for block, row in zip(per_step, sizes)]

    def ppo_loss(
        self, params: dict[str, torch.Tensor], rows: TensorDict, clip_loss: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """`PPOLoss` (without its KL term) of the model with `params` on `rows`."""
        dist_inputs, values = self.forward(params, rows)
        return PPOLoss(
            self.dist_class,
            rows[SampleBatch.ACTIONS],
            dist_inputs,
            rows[SampleBatch.ACTION_DIST_INPUTS],
            rows[SampleBatch.ADVANTAGES],
            values,
            rows[SampleBatch.VALUE_TARGETS],
            rows[SampleBatch.VF_PREDS],
            0.0,
            self.entropy_coeff,
            self.clip_param,
            self.vf_clip_param,
            self.vf_loss_coeff,
            clip_loss,
        )


def task_rows(batch: TensorDict, inner_adaptation_steps: int) -> dict[int, list[torch.Tensor]]:
    """The row indices of each task's adaptation steps: ``rows[task][step]``, steps
    0..`inner_adaptation_steps`, from the `TASK_INDEX` and `ADAPT_STEP` columns; keyed
    by the task indices the batch has, in order (gaps allowed: a dropped worker's).

    Raises:
        ValueError: a column is missing, or a task lacks the rows of a step.
    """
    missing = [c for c in (TASK_INDEX, ADAPT_STEP) if c not in batch]
    if missing:
        raise ValueError(
            f"MAML's meta-loss reads the columns {missing} (each row's task and adaptation "
            "step), which MAMLTrainer's train batch has; this batch has "
            f"{sorted(batch)}."
        )
    per_task = inner_adaptation_steps + 1
    tasks = batch[TASK_INDEX].long()
    steps = batch[ADAPT_STEP].long()
    present = torch.unique(tasks)  # sorted
    # Dense task positions (0..n-1) in the order of the task indices.
    key = torch.searchsorted(present, tasks) * per_task + steps.clamp(0, per_task - 1)
    num_tasks = len(present)
    counts = torch.bincount(key, minlength=num_tasks * per_task)
    if bool(((steps < 0) | (steps >= per_task)).any()) or bool((counts == 0).any()):
        found = set(zip(tasks.tolist(), steps.tolist()))
        raise ValueError(
            f"Every task needs rows of each adaptation step 0..{inner_adaptation_steps}; "
            f"the batch has (task, step) pairs {sorted(found)}."
        )
    chunks = torch.split(torch.argsort(key, stable=True), counts.tolist())
    return {
        int(task): list(chunks[i * per_task : (i + 1) * per_task])
        for i, task in enumerate(present.tolist())
    }


def _clipped(grads: Sequence[torch.Tensor | None], max_norm: float) -> list[torch.Tensor | None]:
    """`grads` scaled as `torch.nn.utils.clip_grad_norm_` scales them (global norm at
    most `max_norm`), differentiably: the scale is a function of the parameters too."""
    present = [g for g in grads if g is not None]
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in present]))
    scale = (max_norm / (norm + 1e-6)).clamp(max=1.0)
    return [None if g is None else g * scale for g in grads]


class KLCoeffMixin:
    """MAML's KL coefficients: one per worker (task) and inner adaptation step, each
    adapted on the KL of its own step (RLlib 1.13's mixin).

    `__init__(config)` reads `kl_coeff`, `kl_target`, `inner_adaptation_steps` (1 when
    absent) and `num_workers` (at least 1); `update_kls(sampled_kls)` halves a coefficient
    whose KL fell below `kl_target / 1.5` and doubles one above `1.5 * kl_target`, and
    returns the list. `slots` (optional) names the coefficient each KL belongs to
    (default: the first ones, in order).
    """

    def __init__(self, config: dict) -> None:
        steps = int(config.get("inner_adaptation_steps", 1) or 1)
        workers = max(1, int(config.get("num_workers", 1) or 1))
        self.kl_coeff_val = [float(config["kl_coeff"])] * steps * workers
        self.kl_target = float(config["kl_target"])

    def update_kls(
        self, sampled_kls: Sequence[float], slots: Sequence[int] | None = None
    ) -> list[float]:
        if slots is None:
            slots = range(len(sampled_kls))
        for i, kl in zip(slots, sampled_kls, strict=True):
            if kl < self.kl_target / 1.5:
                self.kl_coeff_val[i] *= 0.5
            elif kl > 1.5 * self.kl_target:
                self.kl_coeff_val[i] *= 2.0
        return self.kl_coeff_val


def setup_mixins(policy: Any, obs_space: gym.Space, action_space: gym.Space, config: dict) -> None:
    """RLlib 1.13's `after_init`: the policy's KL coefficients (`KLCoeffMixin`); corral's
    torch policies compute values without a mixin."""
    KLCoeffMixin.__init__(policy, config)


def maml_optimizer_fn(policy: TorchPolicy, config: dict) -> torch.optim.Optimizer:
    """A rollout worker's plain SGD with `inner_lr` (its inner adaptation step); the
    driver's Adam with `lr` (the meta-update, `optimizer` options as other policies)."""
    if config.get("worker_index"):
        return torch.optim.SGD(policy.model.parameters(), lr=config["inner_lr"])
    return make_adam(policy.model.parameters(), config.get("optimizer"), lr=config["lr"])


class _TrainForward(torch.nn.Module):
    """The policy's training forward pass as a module call whose parameters
    `torch.func.functional_call` can replace (``model.<name>``): the value head then reads
    the replaced parameters too, which a call of the model alone would not guarantee
    (`value_function()` runs after the call)."""

    def __init__(self, policy: TorchPolicy) -> None:
        super().__init__()
        self.model = policy.model
        self.forward_train = policy.forward_train

    def forward(self, batch: TensorDict) -> tuple[torch.Tensor, torch.Tensor]:
        return self.forward_train(batch)


class MAMLTorchPolicy(KLCoeffMixin, AdvantagesMixin, TorchPolicy):
    """MAML: GAE postprocessing; the inner step on workers, the meta-loss on the driver."""

    @staticmethod
    def get_default_config() -> dict:
        """MAML's `DEFAULT_CONFIG`: fills the keys this policy reads when it runs under
        another algorithm's trainer (RLlib 1.13's policy-template defaults)."""
        from corral.agents.maml.maml import DEFAULT_CONFIG

        return DEFAULT_CONFIG

    train_columns = (
        SampleBatch.OBS,
        SampleBatch.ACTIONS,
        SampleBatch.ACTION_DIST_INPUTS,
        SampleBatch.VF_PREDS,
        SampleBatch.ADVANTAGES,
        SampleBatch.VALUE_TARGETS,
        TASK_INDEX,
        ADAPT_STEP,
    )

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        TorchPolicy.__init__(self, observation_space, action_space, config)
        setup_mixins(self, observation_space, action_space, config)
        # A rollout worker's policy adapts to its task; the driver's is the meta-policy.
        self.adapts_to_task = bool(config.get("worker_index"))
        self.entropy_coeff = float(config["entropy_coeff"])
        # The learner steps at `cur_lr`: the inner step's size on workers.
        self.cur_lr = float(config["inner_lr"] if self.adapts_to_task else config["lr"])
        self._train_forward = _TrainForward(self)
        # The inner steps' KLs of the last meta-step (what `after_update` adapts to).
        self._inner_kls: torch.Tensor | None = None
        self._inner_kl_slots: list[int] = []

    def advantage_settings(self) -> dict[str, Any]:
        """GAE with `lambda` (or returns minus the value baseline, `use_gae=False`): MAML
        always has a critic."""
        return {"lambda_": self.config["lambda"], "use_gae": self.config["use_gae"]}

    def make_optimizer(self) -> torch.optim.Optimizer:
        return maml_optimizer_fn(self, self.config)

    def functional_forward(
        self, params: dict[str, torch.Tensor], rows: TensorDict
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(dist_inputs, values) of the model run with `params` (name -> tensor, names as
        `model.named_parameters()`) instead of its own parameters."""
        replaced = {f"model.{name}": p for name, p in params.items()}
        return torch.func.functional_call(self._train_forward, replaced, (rows,))

    def loss(
        self, model: torch.nn.Module, dist_class: type, train_batch: TensorDict
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        cfg = self.config
        if self.adapts_to_task:
            dist_inputs, values = self.forward_train(train_batch)
            worker = WorkerLoss(
                model,
                dist_class,
                train_batch[SampleBatch.ACTIONS],
                dist_inputs,
                train_batch[SampleBatch.ACTION_DIST_INPUTS],
                train_batch[SampleBatch.ADVANTAGES],
                values,
                train_batch[SampleBatch.VALUE_TARGETS],
                train_batch[SampleBatch.VF_PREDS],
                0.0,
                self.entropy_coeff,
                cfg["clip_param"],
                cfg["vf_clip_param"],
                cfg["vf_loss_coeff"],
            )
            return worker.loss, {"worker_loss": worker.loss.detach()}
        if TASK_INDEX in train_batch and len(train_batch[TASK_INDEX]):
            # A worker added later (a slot past `num_workers`) starts at `kl_coeff`.
            needed = (int(train_batch[TASK_INDEX].max()) + 1) * cfg["inner_adaptation_steps"]
            missing = needed - len(self.kl_coeff_val)
            self.kl_coeff_val.extend([float(cfg["kl_coeff"])] * max(0, missing))
        meta = MAMLLoss(
            model,
            dist_class,
            train_batch,
            self.functional_forward,
            cur_kl_coeff=self.kl_coeff_val,
            inner_lr=cfg["inner_lr"],
            inner_adaptation_steps=cfg["inner_adaptation_steps"],
            entropy_coeff=self.entropy_coeff,
            clip_param=cfg["clip_param"],
            vf_clip_param=cfg["vf_clip_param"],
            vf_loss_coeff=cfg["vf_loss_coeff"],
            grad_clip=cfg["grad_clip"],
        )
        self._inner_kls = meta.inner_kls
        self._inner_kl_slots = meta.inner_kl_slots
        stats = {
            "total_loss": meta.loss.detach(),
            "policy_loss": meta.mean_policy_loss,
            "vf_loss": meta.mean_vf_loss,
            "kl_loss": meta.mean_kl_loss,
            "inner_kl": meta.inner_kls.mean(),
            "entropy": meta.mean_entropy,
            "cur_kl_coeff": sum(self.kl_coeff_val) / len(self.kl_coeff_val),
            "cur_lr": self.cur_lr,
        }
        return meta.loss, stats

    def after_update(self, stats: dict[str, float]) -> dict[str, float]:
        """The driver adapts each KL coefficient to its inner step's KL of the last
        meta-step (RLlib updated them once per iteration, after the meta-steps)."""
        if self.adapts_to_task or self._inner_kls is None:
            return {}
        self.update_kls(self._inner_kls.tolist(), self._inner_kl_slots)
        self._inner_kls = None
        return {"cur_kl_coeff": sum(self.kl_coeff_val) / len(self.kl_coeff_val)}

    def extra_state(self) -> dict[str, Any]:
        return {"kl_coeff_val": list(self.kl_coeff_val)}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        if "kl_coeff_val" in state:
            self.kl_coeff_val = [float(v) for v in state["kl_coeff_val"]]


def maml_loss(
    policy: MAMLTorchPolicy, model: torch.nn.Module, dist_class: type, train_batch: TensorDict
) -> torch.Tensor:
    """RLlib 1.13's loss function (a worker's `WorkerLoss`, the driver's `MAMLLoss`), for
    ``build_policy_class(loss_fn=...)`` / ``with_updates(loss_fn=...)``; its stats go to
    ``model.tower_stats`` (read by `maml_stats`)."""
    loss, stats = MAMLTorchPolicy.loss(policy, model, dist_class, train_batch)
    tower_stats = getattr(model, "tower_stats", None)
    if isinstance(tower_stats, dict):
        tower_stats.update(stats)
    return loss


def maml_stats(policy: TorchPolicy, train_batch: TensorDict) -> dict[str, Any]:
    """RLlib 1.13's stats function: the stats `maml_loss` stored last."""
    return dict(getattr(policy.model, "tower_stats", {}))
