"""Tests of DefaultCallbacks (hooks, legacy dict interface, `overrides`) and MultiCallbacks."""

from __future__ import annotations

import inspect
import logging
import pickle
import re
from pathlib import Path

import pytest

from corral.agents.callbacks import HOOK_NAMES, DefaultCallbacks, MultiCallbacks

REFERENCE = Path(__file__).parents[3] / "shared/seeds/trainer-api-reference.txt"

# Keyword arguments each hook is called with (values are placeholders).
HOOK_KWARGS = {
    "on_trainer_init": {"trainer": "T"},
    "on_sub_environment_created": {"worker": "W", "sub_environment": "E", "env_context": {}},
    "on_episode_start": {"worker": "W", "base_env": "B", "policies": {}, "episode": "EP"},
    "on_episode_step": {"worker": "W", "base_env": "B", "policies": {}, "episode": "EP"},
    "on_episode_end": {"worker": "W", "base_env": "B", "policies": {}, "episode": "EP"},
    "on_postprocess_trajectory": {
        "worker": "W",
        "episode": "EP",
        "agent_id": "ag",
        "policy_id": "default_policy",
        "policies": {},
        "postprocessed_batch": "POST",
        "original_batches": {"ag": "PRE"},
    },
    "on_sample_end": {"worker": "W", "samples": "S"},
    "on_learn_on_batch": {"policy": "P", "train_batch": "TB", "result": {}},
    "on_train_result": {"trainer": "T", "result": {}},
}


def _keyword_names(fn) -> list[str]:
    params = list(inspect.signature(fn).parameters.values())
    assert params[0].name == "self"
    assert params[-1].kind is inspect.Parameter.VAR_KEYWORD
    for p in params[1:-1]:
        assert p.kind is inspect.Parameter.KEYWORD_ONLY, (fn.__name__, p.name)
    return [p.name for p in params[1:-1]]


def test_hook_kwargs_table_is_complete():
    assert set(HOOK_KWARGS) == set(HOOK_NAMES)
    for name in HOOK_NAMES:
        assert _keyword_names(getattr(DefaultCallbacks, name)) == list(HOOK_KWARGS[name])


def test_signatures_match_seed_reference():
    if not REFERENCE.exists():
        pytest.skip(f"seed file {REFERENCE} not found (shared/ must sit beside the checkout)")
    listed = dict(
        re.findall(r"^(on_\w+)\(self, \*, (.*), \*\*kwargs\)$", REFERENCE.read_text(), re.MULTILINE)
    )
    assert len(listed) == 7
    for name, args in listed.items():
        expected = [a.split("=")[0].strip() for a in args.split(",")]
        assert _keyword_names(getattr(DefaultCallbacks, name)) == expected
        assert _keyword_names(getattr(MultiCallbacks, name)) == expected
    step = inspect.signature(DefaultCallbacks.on_episode_step).parameters["policies"]
    assert step.default is None


@pytest.mark.parametrize("hook", HOOK_NAMES)
def test_default_hooks_are_noops(hook):
    assert getattr(DefaultCallbacks(), hook)(**HOOK_KWARGS[hook]) is None


def test_hooks_are_keyword_only():
    with pytest.raises(TypeError):
        DefaultCallbacks().on_sample_end("W", "S")


# --------------------------------------------------------------------------------------
# Legacy dict interface
# --------------------------------------------------------------------------------------


def test_legacy_dict_logs_deprecation(caplog, monkeypatch):
    from corral.utils import deprecation

    monkeypatch.setattr(deprecation, "_logged_keys", set())  # (logged once per process)
    with caplog.at_level(logging.WARNING):
        DefaultCallbacks(legacy_callbacks_dict={"on_train_result": print})
    assert "callbacks dict interface" in caplog.text
    assert "DefaultCallbacks" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        DefaultCallbacks()
    assert caplog.text == ""


def test_legacy_dict_receives_info_dicts():
    seen = {}

    def record(name):
        return lambda info: seen.__setitem__(name, info)

    names = [
        "on_episode_start",
        "on_episode_step",
        "on_episode_end",
        "on_postprocess_traj",
        "on_sample_end",
        "on_train_result",
    ]
    callbacks = DefaultCallbacks(legacy_callbacks_dict={n: record(n) for n in names})
    for hook in HOOK_NAMES:
        getattr(callbacks, hook)(**HOOK_KWARGS[hook])
    assert seen["on_episode_start"] == {"env": "B", "policy": {}, "episode": "EP"}
    assert seen["on_episode_step"] == {"env": "B", "episode": "EP"}
    assert seen["on_episode_end"] == {"env": "B", "policy": {}, "episode": "EP"}
    assert seen["on_postprocess_traj"] == {
        "episode": "EP",
        "agent_id": "ag",
        "pre_batch": "PRE",
        "post_batch": "POST",
        "all_pre_batches": {"ag": "PRE"},
    }
    assert seen["on_sample_end"] == {"worker": "W", "samples": "S"}
    assert seen["on_train_result"] == {"trainer": "T", "result": {}}


def test_legacy_dict_unknown_name_rejected():
    with pytest.raises(ValueError, match="on_learn_on_batch"):
        DefaultCallbacks(legacy_callbacks_dict={"on_learn_on_batch": print})


def test_subclass_skipping_super_init_still_works():
    class NoSuper(DefaultCallbacks):
        def __init__(self):
            self.count = 0

    cb = NoSuper()
    cb.on_episode_end(**HOOK_KWARGS["on_episode_end"])
    assert cb.overrides("on_episode_end") is False


# --------------------------------------------------------------------------------------
# overrides()
# --------------------------------------------------------------------------------------


class StepCounter(DefaultCallbacks):
    def __init__(self):
        super().__init__()
        self.steps = 0

    def on_episode_step(self, *, worker, base_env, policies=None, episode, **kwargs):
        self.steps += 1


def test_overrides_on_class_and_instance():
    assert StepCounter.overrides("on_episode_step") is True
    assert StepCounter.overrides("on_episode_end") is False
    assert StepCounter().overrides("on_episode_step") is True
    assert StepCounter().overrides("on_sample_end") is False
    assert DefaultCallbacks.overrides("on_episode_step") is False
    assert not any(DefaultCallbacks().overrides(h) for h in HOOK_NAMES)


def test_overrides_counts_legacy_dict_and_instance_attributes():
    cb = DefaultCallbacks(legacy_callbacks_dict={"on_postprocess_traj": print})
    assert cb.overrides("on_postprocess_trajectory") is True
    assert cb.overrides("on_episode_step") is False
    cb.on_episode_step = lambda **kwargs: None
    assert cb.overrides("on_episode_step") is True


def test_overrides_rejects_unknown_hook():
    with pytest.raises(ValueError, match="Unknown callback hook 'on_step'"):
        DefaultCallbacks().overrides("on_step")


# --------------------------------------------------------------------------------------
# MultiCallbacks
# --------------------------------------------------------------------------------------

_calls: list[tuple[str, str]] = []


def _recording_class(tag: str) -> type[DefaultCallbacks]:
    def make(hook):
        def method(self, **kwargs):
            assert kwargs == HOOK_KWARGS[hook]
            _calls.append((tag, hook))

        return method

    return type(f"Rec{tag}", (DefaultCallbacks,), {h: make(h) for h in HOOK_NAMES})


RecA = _recording_class("A")
RecB = _recording_class("B")


class OnlyEnd(DefaultCallbacks):
    def on_episode_end(self, *, worker, base_env, policies, episode, **kwargs):
        _calls.append(("end", "on_episode_end"))


@pytest.mark.parametrize("hook", HOOK_NAMES)
def test_multi_callbacks_call_each_in_order(hook):
    _calls.clear()
    multi = MultiCallbacks([RecA, RecB])()
    getattr(multi, hook)(**HOOK_KWARGS[hook])
    assert _calls == [("A", hook), ("B", hook)]


def test_multi_callbacks_order_follows_list():
    _calls.clear()
    MultiCallbacks([RecB, OnlyEnd, RecA])().on_episode_end(**HOOK_KWARGS["on_episode_end"])
    assert [tag for tag, _ in _calls] == ["B", "end", "A"]


def test_multi_callbacks_calls_give_fresh_instances():
    factory = MultiCallbacks([StepCounter, RecA])
    first, second = factory(), factory()
    assert isinstance(first, MultiCallbacks) and first is not second
    assert first._callback_list[0] is not second._callback_list[0]
    first.on_episode_step(**HOOK_KWARGS["on_episode_step"])
    assert first._callback_list[0].steps == 1
    assert second._callback_list[0].steps == 0


def test_multi_callbacks_pickles_and_accepts_factories():
    factory = pickle.loads(pickle.dumps(MultiCallbacks([StepCounter, OnlyEnd])))
    multi = factory()
    assert [type(c) for c in multi._callback_list] == [StepCounter, OnlyEnd]
    legacy = lambda: DefaultCallbacks(legacy_callbacks_dict={"on_train_result": print})  # noqa: E731
    assert MultiCallbacks([legacy])().overrides("on_train_result") is True


def test_multi_callbacks_overrides_any():
    multi = MultiCallbacks([StepCounter, OnlyEnd])()
    assert multi.overrides("on_episode_step") is True
    assert multi.overrides("on_episode_end") is True
    assert multi.overrides("on_sample_end") is False
    assert MultiCallbacks.overrides("on_sample_end") is True  # the class forwards every hook


def test_multi_callbacks_rejects_non_callables():
    with pytest.raises(ValueError, match="list of callbacks classes"):
        MultiCallbacks([StepCounter, 3])
