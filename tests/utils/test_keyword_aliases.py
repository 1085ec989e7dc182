"""`keyword_aliases`: a parameter answering to a second keyword name."""

from __future__ import annotations

import inspect

import pytest

from corral.utils.keyword_aliases import keyword_aliases


@keyword_aliases(x="value", scale_by="factor")
def _scaled(value, factor=2, **extra):
    return value * factor, extra


def test_either_name_or_position_reaches_the_parameter():
    assert _scaled(3) == (6, {})
    assert _scaled(value=3) == (6, {})
    assert _scaled(x=3) == (6, {})
    assert _scaled(x=3, scale_by=5, other=1) == (15, {"other": 1})
    assert _scaled(3, factor=4) == (12, {})


def test_both_names_of_one_parameter_are_refused():
    with pytest.raises(TypeError, match="got both 'value' and its other name 'x'"):
        _scaled(value=1, x=2)
    with pytest.raises(TypeError, match="multiple values"):
        _scaled(1, x=2)


def test_signature_shows_the_aliases_keyword_only_before_kwargs():
    params = inspect.signature(_scaled).parameters
    assert list(params) == ["value", "factor", "x", "scale_by", "extra"]
    assert params["x"].kind is inspect.Parameter.KEYWORD_ONLY
    assert repr(params["x"].default) == "<as value>"
    assert _scaled.__name__ == "_scaled"


def test_methods_and_static_methods():
    class Thing:
        @keyword_aliases(ac="action")
        def step(self, action):
            return action + 1

        @staticmethod
        @keyword_aliases(remotes="workers")
        def sync(workers):
            return list(workers)

    assert Thing().step(ac=1) == 2 and Thing().step(1) == 2
    assert Thing.sync(remotes=(1, 2)) == [1, 2]
    assert list(inspect.signature(Thing.step).parameters) == ["self", "action", "ac"]


def test_bad_aliases_fail_at_decoration():
    with pytest.raises(TypeError, match="'nope' must be a parameter"):

        @keyword_aliases(y="nope")
        def f(a):
            return a

    with pytest.raises(TypeError, match="'a' must not"):

        @keyword_aliases(a="b")
        def g(a, b):
            return a
