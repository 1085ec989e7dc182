"""The trajectory view API in the single-agent sampler (`SingleAgentViews`).

A policy's or model's extra `view_requirements` (`corral.policy.view_requirement`) become
batch columns and, for acting, entries of the model's input dict. The sampler runs these
steps only when there are such columns (`views` is None otherwise): planning them from the
policy, allocating their buffers once the first forward pass told the shapes, reading each
step's past offsets (for acting and for the batch), pushing the step's values into the
windows, and filling the later offsets from the complete fragment.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from corral.evaluation.sampler_base import (
    actions_with_views,
    clip_rewards_in_place,
    sampler_columns,
)
from corral.policy.sample_batch import SampleBatch
from corral.policy.view_requirement import (
    ViewPlan,
    ViewWindows,
    accepts_view_inputs,
    action_spec,
    fill_future,
    fill_future_rows,
)


def views_key(policy: Any) -> tuple:
    """What the planned views depend on: the policy's and its model's view requirements
    (a requirement added, replaced or removed changes it). Asked once per `sample()`,
    which is once per step for one-step fragments: two C-level tuple copies, compared
    entry by entry (by identity first)."""
    model = getattr(policy, "model", None)
    return (
        tuple((getattr(policy, "view_requirements", None) or {}).items()),
        tuple((getattr(model, "view_requirements", None) or {}).items()),
    )


class SingleAgentViews:
    """The view-column steps of `SingleAgentSampler` (it sets these attributes)."""

    policy: Any
    recurrent: bool
    obs: np.ndarray
    obs_shape: tuple[int, ...]
    obs_dtype: np.dtype
    ep_len: np.ndarray
    eps_ids: np.ndarray
    states: list[np.ndarray]
    prev_actions: np.ndarray
    prev_rewards: np.ndarray
    reward_clip: Any
    views: ViewPlan | None
    view_windows: ViewWindows | None
    _valid: np.ndarray | None
    _step_views: dict[str, np.ndarray]
    _view_compute: Any
    call_step_hook: bool
    episodes: list[Any]
    num_envs: int
    _buffers: dict[str, np.ndarray] | None
    _pending: list[list[SampleBatch]]
    _complete_queue: list[SampleBatch]
    _views_key: tuple

    def _plan_views(self) -> ViewPlan | None:
        """The policy's extra view columns (see `corral.policy.view_requirement`)."""
        native = sampler_columns(self.recurrent)
        specs = {
            SampleBatch.OBS: (self.obs_shape, self.obs_dtype),
            SampleBatch.NEXT_OBS: (self.obs_shape, self.obs_dtype),
            SampleBatch.ACTIONS: action_spec(self.policy.action_space),
            SampleBatch.REWARDS: ((), np.dtype(np.float32)),
            SampleBatch.TERMINATEDS: ((), np.dtype(np.bool_)),
            SampleBatch.TRUNCATEDS: ((), np.dtype(np.bool_)),
            SampleBatch.EPS_ID: ((), np.dtype(np.int64)),
            SampleBatch.T: ((), np.dtype(np.int64)),
        }
        self._views_key = views_key(self.policy)
        plan = ViewPlan.for_policy(self.policy, native, specs)
        if plan is not None:
            self._view_compute = accepts_view_inputs(self.policy)
            if plan.infos:  # the episodes keep each step's infos (`_observed_infos`)
                self.call_step_hook = True
        return plan

    def _refresh_views(self) -> None:
        """Plans the views again when the policy's (or its model's) view requirements
        were added, replaced or removed since they were planned; asked once per
        `sample()`, before its first step.

        RLlib 1.13's collectors read the requirements whenever they built a batch, so
        one added to `policy.view_requirements` after the worker was built was sampled
        too. Here the new columns are sampled from the next step on: the fragment
        buffers are allocated again, and the windows start empty, so an episode that
        was running reads zeros for its steps before the change (as for the steps
        before an episode's start). Pieces of unfinished episodes kept from earlier
        fragments (`complete_episodes`) get the new columns too.
        """
        if views_key(self.policy) == self._views_key:
            return
        self.views = self._plan_views()
        self.view_windows = None if self.views is None else ViewWindows(self.views, self.num_envs)
        self._step_views = {}
        self._buffers = None  # allocated again, with the new columns, at the next step
        if self.views is None:
            return
        for pieces in self._pending:
            for piece in pieces:
                self._add_view_columns(piece, finished=False)
        for episode in self._complete_queue:
            self._add_view_columns(episode, finished=True)

    def _add_view_columns(self, batch: SampleBatch, finished: bool) -> None:
        """The plan's training columns a batch sampled before they were planned lacks:
        zeros, and the later offsets of a finished episode filled from its rows."""
        assert self.views is not None
        n = batch.count
        for c in self.views.training:
            data = batch.get(c.data_col)
            if c.name in batch or not isinstance(data, np.ndarray):
                continue
            batch[c.name] = np.zeros((n, *c.value_shape(data.shape[1:])), data.dtype)
        if finished:
            fill_future_rows(self.views, batch)

    def _allocate_views(
        self,
        buf: dict[str, np.ndarray],
        T: int,
        N: int,
        actions: np.ndarray,
        extra: dict[str, np.ndarray],
    ) -> None:
        """The buffers of the extra view columns kept for training, once the first
        forward pass told the shapes of the columns it returns."""
        views = self.views
        assert views is not None
        views.specs[SampleBatch.ACTIONS] = (actions.shape[1:], actions.dtype)
        for k, v in extra.items():
            views.specs[k] = (v.shape[1:], v.dtype)
        views.keep_available(set(buf))
        for c in views.training:
            shape, dtype = views.specs[c.data_col]
            buf[c.name] = np.zeros((T, N, *c.value_shape(tuple(shape))), dtype)

    def _compute_with_views(self, explore: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """One step's actions with the view columns in the model's input dict: this
        step's observation enters the windows, every column's past offsets are read
        (and kept for the batch)."""
        windows = self.view_windows
        assert windows is not None
        windows.push(SampleBatch.OBS, self.obs)
        self._step_views = windows.step_views(self.ep_len)
        inputs = windows.acting_inputs(self._step_views)
        assert self.views is not None
        if self.views.ids:
            inputs.update(self._id_inputs(self.views.ids))
        state, prev_actions, prev_rewards = (
            (self.states, self.prev_actions, self.prev_rewards)
            if self.recurrent
            else (None, None, None)
        )
        infos = self._observed_infos() if self.views.infos else None
        return actions_with_views(
            self.policy,
            self.obs,
            explore,
            inputs,
            self._view_compute,
            state,
            prev_actions,
            prev_rewards,
            infos,
        )

    def _id_inputs(self, names: tuple[str, ...]) -> dict[str, np.ndarray]:
        """The id columns `names` of each sub-env's step about to act."""
        n = len(self.ep_len)
        values = {
            SampleBatch.EPS_ID: self.eps_ids.copy(),
            SampleBatch.ENV_ID: np.arange(n, dtype=np.int64),
            SampleBatch.AGENT_INDEX: np.zeros(n, np.int64),
            SampleBatch.T: self.ep_len.copy(),
        }
        return {name: values[name] for name in names}

    def _observed_infos(self) -> list[dict]:
        """The infos that came with each sub-env's observation ({} after a reset, as
        RLlib 1.13's old-gym resets gave none)."""
        return [episode.last_info_for() or {} for episode in self.episodes]

    def _record_step_views(self, buf: dict[str, np.ndarray], t: int) -> None:
        """Row `t` of the view columns kept for training: the past offsets just read."""
        assert self.views is not None
        for c in self.views.training:
            values = self._step_views.get(c.name)
            if values is None:
                continue
            if c.stacked:
                buf[c.name][t][:, c.past] = values
            else:
                buf[c.name][t] = values[:, 0]

    def _push_step_views(self, buf: dict[str, np.ndarray], t: int) -> None:
        """The step's values of the data columns that past offsets read (rewards
        clipped as the batch's are)."""
        windows = self.view_windows
        assert windows is not None and self.views is not None
        for d in self.views.pushed_cols:
            values = buf[d][t]
            if d == SampleBatch.REWARDS and self.reward_clip is not None:
                values = values.copy()
                clip_rewards_in_place(values, self.reward_clip)
            windows.push(d, values)

    def _fill_future_views(self, buf: dict[str, np.ndarray]) -> None:
        """The view columns' later offsets, from the complete fragment."""
        assert self.views is not None
        for c in self.views.training:
            if len(c.future):
                fill_future(
                    c, buf[c.name], buf, buf[SampleBatch.EPS_ID], buf[SampleBatch.T], self._valid
                )
