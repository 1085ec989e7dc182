"""RLlib 1.13's `EnvContext.set_defaults` and `recreated_worker`."""

from __future__ import annotations

import pickle

from corral.env.env_context import EnvContext


def test_set_defaults_adds_only_missing_keys():
    ctx = EnvContext({"a": 1, "b": 2}, worker_index=3)
    ctx.set_defaults({"a": -42, "c": 3})
    assert dict(ctx) == {"a": 1, "b": 2, "c": 3} and ctx.worker_index == 3


def test_recreated_worker_survives_copies_and_pickles():
    ctx = EnvContext({"a": 1}, recreated_worker=True)
    assert ctx.recreated_worker is True and EnvContext().recreated_worker is False
    assert ctx.copy_with_overrides(vector_index=2).recreated_worker is True
    assert ctx.copy_with_overrides(recreated_worker=False).recreated_worker is False
    assert pickle.loads(pickle.dumps(ctx)).recreated_worker is True
