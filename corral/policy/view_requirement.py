"""`ViewRequirement`: which data a policy wants to see of a trajectory (RLlib 1.13's
trajectory view API)."""

from __future__ import annotations

import inspect
from typing import Any

import gymnasium as gym
import numpy as np

from corral.env.gym_compat import convert_space
from corral.policy.sample_batch import SampleBatch


class ViewRequirement:
    """One column a policy reads, and from where in the trajectory.

    Args:
        data_col: the column to read (None: the key this requirement is stored under).
        space: the space of one value of the column (old gym spaces are converted).
        shift: time offset(s) relative to the current step: an int (-1: the previous
            step's value), a list of ints, or a range string such as "-50:-1".
        index: an absolute index instead of a shift (rarely used).
        batch_repeat_value: with `shift` ranges, how often the value repeats in a batch
            (e.g. `max_seq_len` for RNN states: one state per sequence).
        used_for_compute_actions: whether `compute_actions` reads it.
        used_for_training: whether the loss reads it.
    """

    def __init__(
        self,
        data_col: str | None = None,
        space: gym.Space | None = None,
        shift: int | str | list[int] = 0,
        index: int | None = None,
        batch_repeat_value: int = 1,
        used_for_compute_actions: bool = True,
        used_for_training: bool = True,
    ) -> None:
        self.data_col = data_col
        self.space = (
            convert_space(space)
            if space is not None
            else gym.spaces.Box(float("-inf"), float("inf"), shape=())
        )
        self.shift = shift
        if isinstance(shift, (list, tuple)):
            self.shift_arr = np.array(shift)
        elif isinstance(shift, str):
            try:
                lo, hi = (int(p) for p in shift.split(":"))
            except ValueError:
                raise ValueError(
                    f"ViewRequirement shift={shift!r}: a range string is 'from:to' with two "
                    "ints, both included (e.g. '-3:0')."
                ) from None
            if hi < lo:
                raise ValueError(f"ViewRequirement shift={shift!r}: the range is empty.")
            self.shift_arr = np.arange(lo, hi + 1)
        else:
            self.shift_arr = np.array([shift])
        self.shift_from = int(self.shift_arr[0])
        self.shift_to = int(self.shift_arr[-1])
        self.index = index
        self.batch_repeat_value = batch_repeat_value
        self.used_for_compute_actions = used_for_compute_actions
        self.used_for_training = used_for_training

    def __repr__(self) -> str:
        return (
            f"ViewRequirement(data_col={self.data_col!r}, space={self.space}, "
            f"shift={self.shift!r}, used_for_compute_actions={self.used_for_compute_actions}, "
            f"used_for_training={self.used_for_training})"
        )

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, ViewRequirement):
            return NotImplemented
        return (
            self.data_col == other.data_col
            and self.space == other.space
            and self.shift == other.shift
            and self.index == other.index
            and self.used_for_compute_actions == other.used_for_compute_actions
            and self.used_for_training == other.used_for_training
        )


def default_view_requirements(obs_space: Any, action_space: Any) -> dict[str, ViewRequirement]:
    """The columns every policy sees (RLlib 1.13's `Policy._get_default_view_requirements`).

    They are marked as defaults: the samplers fill them their own way (the previous
    action and reward only for stateful policies), and only requirements a policy or
    its model adds or replaces become extra view columns (see `declared_views`).
    """
    return {name: _as_default(vr) for name, vr in _defaults(obs_space, action_space).items()}


def model_view_requirements(obs_space: Any) -> dict[str, ViewRequirement]:
    """A model's own requirements before it adds any (RLlib 1.13's
    `ModelV2.view_requirements`: the current observation)."""
    return {SampleBatch.OBS: _as_default(ViewRequirement(space=obs_space))}


def _as_default(vr: ViewRequirement) -> ViewRequirement:
    vr._corral_default = True  # type: ignore[attr-defined]
    return vr


def _defaults(obs_space: Any, action_space: Any) -> dict[str, ViewRequirement]:
    return {
        SampleBatch.OBS: ViewRequirement(space=obs_space),
        SampleBatch.NEXT_OBS: ViewRequirement(
            data_col=SampleBatch.OBS, shift=1, space=obs_space, used_for_compute_actions=False
        ),
        SampleBatch.ACTIONS: ViewRequirement(space=action_space, used_for_compute_actions=False),
        SampleBatch.PREV_ACTIONS: ViewRequirement(
            data_col=SampleBatch.ACTIONS, shift=-1, space=action_space
        ),
        SampleBatch.REWARDS: ViewRequirement(),
        SampleBatch.PREV_REWARDS: ViewRequirement(data_col=SampleBatch.REWARDS, shift=-1),
        SampleBatch.DONES: ViewRequirement(),
        SampleBatch.INFOS: ViewRequirement(),
        SampleBatch.EPS_ID: ViewRequirement(),
        SampleBatch.UNROLL_ID: ViewRequirement(),
        SampleBatch.AGENT_INDEX: ViewRequirement(),
        SampleBatch.T: ViewRequirement(),
    }


# -- the samplers' side: extra view columns --------------------------------------
#
# A view column `name` reads `data_col` at time offsets `shift` relative to each step
# of one agent's episode. Before the episode's first step (offset < 0 past its start)
# it reads zeros, as RLlib 1.13's collectors fill the time before an episode; after
# the last step a sampler has seen of the trajectory, zeros too.
#
# What a step's forward pass can see: the observation up to the current one (shift
# <= 0) and every other column up to the previous step (shift <= -1). Those offsets
# ("past" ones) are read from a rolling window of each data column, step by step, so
# the values the model acts on are the values that go into the train batch. Later
# offsets (e.g. `new_obs`-style `shift=1` on "obs", or "actions" at shift 0 or +1)
# are filled from the sampled fragment once it is complete.

_STATE_PREFIXES = ("state_in_", "state_out_")


def declared_views(view_requirements: dict[str, Any]) -> dict[str, ViewRequirement]:
    """The view requirements a policy (or its model) added beyond the defaults that
    the samplers fill themselves: the extra columns to build.

    Left out: the marked defaults (`default_view_requirements`), RNN state views
    (`state_in_<i>` / `state_out_<i>`: the samplers carry states), and requirements
    on a column of their own name at shift 0 (filled by whoever adds the column: a
    postprocessing function, a callback).
    """
    out: dict[str, ViewRequirement] = {}
    for name, vr in view_requirements.items():
        if not isinstance(vr, ViewRequirement) or getattr(vr, "_corral_default", False):
            continue
        data_col = vr.data_col or name
        if (
            name.startswith(_STATE_PREFIXES) or data_col.startswith(_STATE_PREFIXES)
        ) and not is_ranged_state_view(name, vr):
            continue
        if data_col == name and not vr.shift_arr.any():
            continue
        if not (vr.used_for_compute_actions or vr.used_for_training):
            continue
        out[name] = vr
    return out


# The default views a `Policy` of one's own keeps (`bare_policy_views`).
_BARE_POLICY_VIEWS = (SampleBatch.PREV_ACTIONS, SampleBatch.PREV_REWARDS)


def bare_policy_views(policy: Any, view_requirements: dict[str, Any]) -> dict[str, ViewRequirement]:
    """The previous action and reward views of a `Policy` of one's own (one without a
    `TorchPolicy`'s `compute_actions_from_obs`), while its `view_requirements` keep them.

    RLlib 1.13 pruned the default views only in a `TorchPolicy` / `TFPolicy` (the dummy
    batch run through its loss); any other `Policy` kept them, so it got `prev_actions`
    and `prev_rewards` when acting and its batches had them. A `TorchPolicy` acts
    without them unless it declares them (a recurrent one gets them from the samplers,
    which carry them themselves).
    """
    if getattr(policy, "compute_actions_from_obs", None) is not None:
        return {}
    out: dict[str, ViewRequirement] = {}
    for name in _BARE_POLICY_VIEWS:
        vr = view_requirements.get(name)
        if isinstance(vr, ViewRequirement) and (
            vr.used_for_compute_actions or vr.used_for_training
        ):
            out[name] = vr
    return out


# The id columns the samplers know of each step when it acts (its own values, shift 0).
ID_COLUMNS = (SampleBatch.EPS_ID, SampleBatch.ENV_ID, SampleBatch.AGENT_INDEX, SampleBatch.T)


def acting_id_columns(view_requirements: dict[str, Any]) -> tuple[str, ...]:
    """The id columns (`ID_COLUMNS`) whose requirement is used for computing actions
    (RLlib 1.13's defaults are: `eps_id`, `agent_index`, `t`), for the input dict of a
    policy acting through `compute_actions_from_input_dict`: each step's own values."""
    out = []
    for name in ID_COLUMNS:
        vr = view_requirements.get(name)
        if (
            isinstance(vr, ViewRequirement)
            and vr.used_for_compute_actions
            and vr.data_col in (None, name)
            and not vr.shift_arr.any()
        ):
            out.append(name)
    return tuple(out)


def is_ranged_state_view(name: str, vr: ViewRequirement) -> bool:
    """Whether `name` is an RNN state input (`state_in_<i>`) that reads its state output
    at other shifts than the last step's (e.g. "-2:-1": the last two), which the
    samplers fill as a view column; the usual shift -1 is the state they carry."""
    data_col = vr.data_col or name
    return (
        name.startswith("state_in_")
        and data_col.startswith("state_out_")
        and not (isinstance(vr.shift, (int, np.integer)) and vr.shift == -1)
    )


def acts_by_input_dict(policy: Any) -> bool:
    """Whether `policy` is a `Policy` of one's own that overrides RLlib's
    `compute_actions_from_input_dict` (and has no `compute_actions_from_obs`): the
    samplers then act through it with RLlib 1.13's inference input dict."""
    from corral.policy.policy import Policy

    if getattr(policy, "compute_actions_from_obs", None) is not None:
        return False
    own = getattr(type(policy), "compute_actions_from_input_dict", None)
    return own is not None and own is not Policy.compute_actions_from_input_dict


class ViewColumn:
    """One extra view column as a sampler builds it.

    Args:
        name: the column's key in the input dict and the train batch.
        vr: its requirement.

    Raises:
        ValueError: the requirement uses `index` or a `batch_repeat_value` (state
            views only), or is used for computing actions while it reads a later
            step than the forward pass can see.
    """

    def __init__(self, name: str, vr: ViewRequirement) -> None:
        self.name = name
        self.data_col = vr.data_col or name
        if vr.index is not None:
            raise ValueError(f"ViewRequirement {name!r}: `index` views are not built; use `shift`.")
        state_view = is_ranged_state_view(name, vr)
        if state_view and vr.used_for_training:
            raise ValueError(
                f"ViewRequirement {name!r} (data_col={vr.data_col!r}, shift={vr.shift!r}): "
                "a state input of other shifts than -1 is built for computing actions "
                "only; the train batch's state inputs are the states the samplers carry "
                "(shift -1). Set used_for_training=False."
            )
        if vr.batch_repeat_value != 1 and not state_view:
            raise ValueError(
                f"ViewRequirement {name!r}: batch_repeat_value={vr.batch_repeat_value!r} is "
                "only built for RNN state views (state_in_<i>); expected 1."
            )
        self.shifts = np.asarray(vr.shift_arr, np.int64).reshape(-1)
        # An int shift gives a value per step; a list or range adds a time axis.
        self.stacked = not isinstance(vr.shift, (int, np.integer))
        self.for_actions = bool(vr.used_for_compute_actions)
        self.for_training = bool(vr.used_for_training)
        self.space = vr.space
        # The latest offset a forward pass sees: this step's obs, the last step's rest.
        self.latest = 0 if self.data_col == SampleBatch.OBS else -1
        self.past = np.flatnonzero(self.shifts <= self.latest)
        self.future = np.flatnonzero(self.shifts > self.latest)
        if self.for_actions and len(self.future):
            raise ValueError(
                f"ViewRequirement {name!r} (data_col={self.data_col!r}, shift={vr.shift!r}) "
                "has used_for_compute_actions=True, but when actions are computed "
                f"{self.data_col!r} is known only up to shift {self.latest}; set "
                "used_for_compute_actions=False for a view of later steps."
            )
        # How many of the latest values of `data_col` its past offsets need.
        self.depth = int(self.latest - self.shifts[self.past].min() + 1) if len(self.past) else 0

    def value_shape(self, row_shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape of one row of the column, given one row of its data column."""
        return (len(self.shifts), *row_shape) if self.stacked else row_shape


class ViewPlan:
    """The extra view columns of one policy in one sampler, and the data columns
    (with their row shape and dtype) they read.

    Args:
        columns: the columns (`ViewColumn`s).
        specs: `{data_col: (row shape, dtype)}` of the columns the sampler records
            (the previous actions' shape before the first action, ...); a data column
            missing here takes its requirement's `space`.
        infos: whether the input dict gets the infos that came with the observations.
        ids: the id columns (`ID_COLUMNS`) the input dict gets, each step's own.
    """

    def __init__(
        self,
        columns: list[ViewColumn],
        specs: dict[str, tuple[tuple, Any]],
        infos: bool = False,
        ids: tuple[str, ...] = (),
    ) -> None:
        self.columns = columns
        self.acting = [c for c in columns if c.for_actions]
        self.training = [c for c in columns if c.for_training]
        self.specs = dict(specs)
        for c in columns:
            if c.data_col not in self.specs:
                shape = tuple(getattr(c.space, "shape", None) or ())
                dtype = getattr(c.space, "dtype", None) or np.float32
                self.specs[c.data_col] = (shape, np.dtype(dtype))
        # The window depth per data column: the deepest past offset any column reads.
        self.depths: dict[str, int] = {}
        for c in columns:
            if c.depth:
                self.depths[c.data_col] = max(self.depths.get(c.data_col, 0), c.depth)
        self.pushed_cols = [d for d in self.depths if d != SampleBatch.OBS]
        # Whether the policy's input dict also gets the infos that came with each
        # observation (a policy acting through `compute_actions_from_input_dict`).
        self.infos = infos
        self.ids = ids

    @classmethod
    def for_policy(
        cls, policy: Any, native: set[str], specs: dict[str, tuple[tuple, Any]]
    ) -> ViewPlan | None:
        """The plan of `policy`'s declared views (its `view_requirements`, which
        include its model's), or None when there is none and the policy does not act
        through an input dict of its own (`acts_by_input_dict`): the sampler then runs
        exactly as without the trajectory view API. Views of columns the sampler
        writes anyway (`native`, e.g. prev_actions of a stateful policy) are left to it.
        """
        reqs = dict(getattr(policy, "view_requirements", None) or {})
        model_reqs = getattr(getattr(policy, "model", None), "view_requirements", None)
        for name, vr in (model_reqs or {}).items():
            reqs.setdefault(name, vr)
        declared = declared_views(reqs)
        declared.update(bare_policy_views(policy, reqs))
        columns = [ViewColumn(name, vr) for name, vr in declared.items() if name not in native]
        by_input_dict = acts_by_input_dict(policy)
        if not (columns or by_input_dict):
            return None
        specs = dict(specs)
        for c in columns:  # a data column's own requirement may give its space
            space = getattr(reqs.get(c.data_col), "space", None)
            shape = getattr(space, "shape", None)
            if c.data_col not in specs and shape is not None:
                specs[c.data_col] = (tuple(shape), np.dtype(space.dtype))  # type: ignore[union-attr]
        ids = acting_id_columns(reqs) if by_input_dict else ()
        return cls(columns, specs, infos=by_input_dict, ids=ids)

    def keep_available(self, available: set[str]) -> None:
        """Drops the columns whose data column the sampler does not record (e.g. one
        that postprocessing adds later: RLlib skips those too)."""
        dropped = [c for c in self.columns if c.data_col not in available]
        if not dropped:
            return
        kept = [c for c in self.columns if c not in dropped]
        self.__init__(kept, self.specs, self.infos, self.ids)  # type: ignore[misc]

    def acting_inputs(self, step_views: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The input-dict entries of the columns used for computing actions, from
        `ViewWindows.step_views`."""
        out = {}
        for c in self.acting:
            values = step_views[c.name]
            out[c.name] = values if c.stacked else values[:, 0]
        return out

    def training_rows(self, step_views: dict[str, np.ndarray], rows: int) -> dict[str, np.ndarray]:
        """The train-batch rows of the columns kept for training (`[rows, ...]`): the
        past offsets of `step_views`, zeros where later offsets go (filled once the
        trajectory is complete)."""
        out = {}
        for c in self.training:
            past = step_views.get(c.name)
            if past is None:
                continue
            if not c.stacked:
                out[c.name] = past[:, 0]
            elif len(c.future):
                full = self.zeros(c, rows)
                full[:, c.past] = past
                out[c.name] = full
            else:
                out[c.name] = past
        return out

    def zeros(self, column: ViewColumn, rows: int) -> np.ndarray:
        shape, dtype = self.specs[column.data_col]
        return np.zeros((rows, *column.value_shape(tuple(shape))), dtype)


class ViewWindows:
    """The latest values of each data column a plan's past offsets read, per row (a
    sub-env or an agent), newest last: `[rows, depth, ...]`.

    Past offsets are masked with each row's step in its episode (`ep_t`): the window
    is never cleared, a value from before the episode's start is simply not read.
    """

    def __init__(self, plan: ViewPlan, rows: int) -> None:
        self.plan = plan
        self.rows = rows
        self.windows: dict[str, np.ndarray] = {}

    def push(self, data_col: str, values: Any) -> None:
        """Appends each row's newest value of `data_col` (`[rows, ...]`)."""
        depth = self.plan.depths.get(data_col)
        if depth is None:
            return
        values = np.asarray(values)
        win = self.windows.get(data_col)
        if win is None or win.shape[2:] != values.shape[1:]:
            win = self.windows[data_col] = np.zeros(
                (self.rows, depth, *values.shape[1:]), values.dtype
            )
        if depth > 1:
            win[:, :-1] = win[:, 1:]
        win[:, -1] = values

    def past_values(self, column: ViewColumn, ep_t: np.ndarray) -> np.ndarray:
        """`[rows, len(column.past), ...]`: the column's past offsets at each row's
        current step `ep_t`, zeros before the episode's first step."""
        shifts = column.shifts[column.past]
        win = self.windows.get(column.data_col)
        if win is None:  # nothing recorded yet: everything lies before the start
            shape, dtype = self.plan.specs[column.data_col]
            return np.zeros((self.rows, len(shifts), *shape), dtype)
        depth = win.shape[1]
        out = win[:, depth - 1 + shifts - column.latest]
        before = (np.asarray(ep_t).reshape(-1, 1) + shifts.reshape(1, -1)) < 0
        if before.any():
            out[before] = 0
        return out

    def step_views(self, ep_t: np.ndarray) -> dict[str, np.ndarray]:
        """Every column's past offsets at the current step (after the current obs was
        pushed): `{name: [rows, len(past), ...]}` (columns with no past offset left
        out)."""
        return {c.name: self.past_values(c, ep_t) for c in self.plan.columns if len(c.past)}

    def acting_inputs(self, step_views: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The input-dict entries of the columns used for computing actions."""
        return self.plan.acting_inputs(step_views)

    def get_state(self) -> dict[str, np.ndarray]:
        return {k: v.copy() for k, v in self.windows.items()}

    def set_state(self, state: dict[str, Any]) -> None:
        self.windows = {k: np.array(v) for k, v in state.items()}


def future_values(
    data: np.ndarray,
    eps_id: np.ndarray,
    ep_t: np.ndarray,
    offset: int,
    valid: np.ndarray | None = None,
) -> np.ndarray:
    """`data` `offset >= 0` rows later along axis 0 within the same episode, zeros
    where that row lies past what was sampled, in another episode, or is dropped.

    Args:
        data: `[T, N, ...]` (time-major) rows of one data column.
        eps_id: `[T, N]` episode ids.
        ep_t: `[T, N]` each row's step in its episode.
        offset: how many steps later.
        valid: `[T, N]` rows kept in the batch (None: all).
    """
    out = np.zeros_like(data)
    T = len(data)
    if offset >= T:
        return out
    if offset == 0:
        return data.copy()
    same = (eps_id[offset:] == eps_id[:-offset]) & (ep_t[offset:] == ep_t[:-offset] + offset)
    if valid is not None:
        same &= valid[offset:]
    head = out[: T - offset]
    head[same] = data[offset:][same]
    return out


def fill_future(
    column: ViewColumn,
    target: np.ndarray,
    columns: dict[str, np.ndarray],
    eps_id: np.ndarray,
    ep_t: np.ndarray,
    valid: np.ndarray | None = None,
) -> None:
    """Writes `column`'s later offsets into `target` (`[T, N, ...]` time-major, of
    `column.value_shape`) from a complete fragment's time-major `columns`."""
    for pos in column.future:
        shift = int(column.shifts[pos])
        if column.data_col == SampleBatch.OBS:  # obs at t + s is new_obs at t + s - 1
            values = future_values(columns[SampleBatch.NEXT_OBS], eps_id, ep_t, shift - 1, valid)
        else:
            values = future_values(columns[column.data_col], eps_id, ep_t, shift, valid)
        if column.stacked:
            target[:, :, pos] = values
        else:
            target[...] = values


def fill_future_rows(
    plan: ViewPlan, columns: dict[str, Any], ep_t: np.ndarray | None = None
) -> None:
    """The later offsets of the view columns of one agent's rows in time order
    (pieces of episodes told apart by `eps_id`, when present), in place; zeros past
    the last row. A view column not there yet is created. `ep_t` numbers each row's
    step of its agent (None: the `t` column; a multi-agent row's `t` counts env steps,
    which an agent may skip)."""
    n = len(columns[SampleBatch.REWARDS])
    time_major = {
        k: v.reshape(n, 1, *v.shape[1:])
        for k, v in columns.items()
        if isinstance(v, np.ndarray) and len(v) == n
    }
    eps = time_major.get(SampleBatch.EPS_ID)
    if eps is None:
        eps = np.zeros((n, 1), np.int64)
    ep_t = time_major[SampleBatch.T] if ep_t is None else np.asarray(ep_t).reshape(n, 1)
    for c in plan.training:
        if not len(c.future):
            continue
        source = SampleBatch.NEXT_OBS if c.data_col == SampleBatch.OBS else c.data_col
        if source not in time_major:
            continue
        if c.name not in columns:
            columns[c.name] = plan.zeros(c, n)
        target = columns[c.name]
        fill_future(c, target.reshape(n, 1, *target.shape[1:]), time_major, eps, ep_t)


def next_step_inputs(
    view_requirements: dict[str, Any], batch: Any, rows: np.ndarray
) -> dict[str, np.ndarray]:
    """The acting-time view columns of the step after each of `rows` of a sampled
    batch (RLlib 1.13's `get_single_step_input_dict(..., index="last")`), e.g. to
    bootstrap V(s') where a trajectory is cut.

    The next step's offset `s` is the row's offset `s + 1`: the row's own view
    value when its column has that offset, `new_obs` / the row's value for the
    newest one, else the batch row that far back in the same episode (zeros before
    the episode's start or before the batch).
    """
    out: dict[str, np.ndarray] = {}
    rows = np.asarray(rows)
    for name, vr in declared_views(view_requirements).items():
        if not vr.used_for_compute_actions:
            continue
        column = ViewColumn(name, vr)
        parts = []
        for s in column.shifts.tolist():
            parts.append(_next_value(column, batch, rows, int(s) + 1))
        values = np.stack(parts, axis=1)
        out[name] = values if column.stacked else values[:, 0]
    return out


def _next_value(column: ViewColumn, batch: Any, rows: np.ndarray, offset: int) -> np.ndarray:
    """`column.data_col` at `offset` steps from each of `rows` (offset <= latest + 1)."""
    d = column.data_col
    if offset == column.latest + 1:  # the newest value: known at the row itself
        return np.asarray(batch[SampleBatch.NEXT_OBS if d == SampleBatch.OBS else d])[rows]
    own = batch.get(column.name) if hasattr(batch, "get") else None
    matches = np.flatnonzero(column.shifts == offset)
    if own is not None and len(matches):
        values = np.asarray(own)[rows]
        return values[:, int(matches[0])] if column.stacked else values
    data = np.asarray(batch[d])
    eps = np.asarray(batch[SampleBatch.EPS_ID])
    t = np.asarray(batch[SampleBatch.T])
    src = rows + offset
    inside = (src >= 0) & (src < len(data))
    src_c = np.clip(src, 0, len(data) - 1)
    same = eps[src_c] == eps[rows]
    unroll = batch.get(SampleBatch.UNROLL_ID) if hasattr(batch, "get") else None
    if unroll is not None:  # sampled pieces: consecutive steps of one agent each
        unroll = np.asarray(unroll)
        same &= unroll[src_c] == unroll[rows]
    else:  # (a multi-agent row's `t` counts env steps: only pieces tell agents' steps)
        same &= t[src_c] == t[rows] + offset
    ok = inside & same
    values = data[src_c].copy()
    values[~ok] = 0
    return values


def action_spec(space: Any) -> tuple[tuple[int, ...], np.dtype]:
    """(row shape, dtype) of a policy's actions as the samplers store them."""
    if isinstance(space, (gym.spaces.Tuple, gym.spaces.Dict)):  # flat rows
        from corral.utils.spaces import flat_action_width

        width = flat_action_width(space)
        return (width,), np.dtype(np.float32)
    dtype = getattr(space, "dtype", None)
    integral = dtype is not None and np.issubdtype(dtype, np.integer)
    shape = tuple(getattr(space, "shape", None) or ())
    return shape, np.dtype(np.int64 if integral else np.float32)


def accepts_view_inputs(policy: Any) -> bool:
    """Whether `policy.compute_actions_from_obs` takes `view_inputs` (TorchPolicy's
    fast path); other policies get an input dict (`compute_actions_from_input_dict`)."""
    fast = getattr(policy, "compute_actions_from_obs", None)
    if fast is None:
        return False
    try:
        return "view_inputs" in inspect.signature(fast).parameters
    except (TypeError, ValueError):
        return False


__all__ = [
    "ViewColumn",
    "ViewPlan",
    "ViewRequirement",
    "ViewWindows",
    "accepts_view_inputs",
    "action_spec",
    "declared_views",
    "default_view_requirements",
    "fill_future",
    "fill_future_rows",
    "future_values",
    "model_view_requirements",
    "next_step_inputs",
]
