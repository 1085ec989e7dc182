"""RLlib 1.13's whole public surface exists in corral, and each name is what the table says.

The module list is read from the reference beside the project
(``../shared/rllib-1.13-reference/public-surface.txt``, or ``$CORRAL_RLLIB_SURFACE``); the
table's committed snapshot (``corral._surface``) must equal it. The walk itself runs over the
snapshot, so it runs on a clone without the reference too.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from corral import _surface
from corral._surface import NotBuiltError, TensorFlowOnlyError, classify, is_stand_in

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = Path(
    os.environ.get(
        "CORRAL_RLLIB_SURFACE",
        ROOT.parent / "shared" / "rllib-1.13-reference" / "public-surface.txt",
    )
)


def _reference() -> dict[str, tuple[str, ...]]:
    if not REFERENCE.is_file():
        pytest.skip(
            f"RLlib 1.13's module list is not beside the project ({REFERENCE} is missing); "
            "the walk below still checks the committed snapshot"
        )
    table = {}
    for line in REFERENCE.read_text().splitlines():
        if not line.startswith("ray.rllib"):
            continue
        module, _, names = line.partition(":")
        module = module[len("ray.rllib") :].lstrip(".")
        table[module] = tuple(n.strip() for n in names.split(",") if n.strip())
    return table


def test_snapshot_is_the_reference_list():
    reference = _reference()
    snapshot = _surface.surface()
    assert set(snapshot) == set(reference), (
        f"modules only in the reference: {sorted(set(reference) - set(snapshot))}; "
        f"only in the snapshot: {sorted(set(snapshot) - set(reference))}"
    )
    for module, names in reference.items():
        assert snapshot[module] == names, module


def _check_stand_in(obj, verdict, where):
    assert is_stand_in(obj), (
        f"{where}: the table says it is {verdict.kind} ({verdict.detail}) but corral has a real "
        f"{type(obj).__name__}: update corral/_surface/not_built.py (the list of what is not built)"
    )
    expected = TensorFlowOnlyError if verdict.kind == "tf" else NotBuiltError
    if obj.__dict__.get("_corral_factory"):
        # A TF policy class factory: calling it makes a class, instantiating that raises.
        obj = obj(name="MadeByFactory")
        assert is_stand_in(obj) and obj.__name__ == "MadeByFactory"
    with pytest.raises(expected) as info:
        obj()
    message = str(info.value)
    assert verdict.rllib_path in message
    if verdict.kind == "tf":
        assert isinstance(info.value, ImportError)
        assert "corral" in message and "torch" in message
    else:
        assert isinstance(info.value, NotImplementedError)
    if verdict.kind == "unbuilt":
        assert verdict.detail in message


MODULES = sorted(_surface.surface())


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m or "<root>")
def test_every_name_is_what_the_table_says(module):
    mod = importlib.import_module("corral" + (f".{module}" if module else ""))
    for name in _surface.surface()[module]:
        where = f"corral{'.' + module if module else ''}.{name}"
        obj = getattr(mod, name)
        verdict = classify(module, name)
        if verdict.kind == "real":
            assert not is_stand_in(obj), f"{where}: the table says corral builds it: {obj!r}"
        else:
            _check_stand_in(obj, verdict, where)
        # `from corral.X import name` gives the same object every time.
        assert getattr(importlib.import_module(mod.__name__), name) is obj


def test_tensorflow_is_never_imported():
    # In a fresh interpreter: other tests (Minari's DataCollector) import jax themselves.
    code = (
        "import importlib, sys\n"
        f"for m in {MODULES!r}:\n"
        "    importlib.import_module('corral' + ('.' + m if m else ''))\n"
        "print(sorted({'tensorflow', 'jax'} & set(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout[-2000:]


def test_tf_stand_ins_subclass_and_factories():
    from corral.agents.ppo.ppo_tf_policy import PPOTFPolicy
    from corral.models.tf.tf_modelv2 import TFModelV2
    from corral.policy.tf_policy_template import build_tf_policy

    # RLlib code defines TF models at import time; only building one raises.
    class MyModel(TFModelV2):
        def __init__(self, *args):
            super().__init__(*args)

    with pytest.raises(TensorFlowOnlyError, match="MyModel.*TFModelV2.*TorchModelV2"):
        MyModel(None, None, 2, {}, "m")
    with pytest.raises(ImportError):
        TFModelV2(None, None, 2, {}, "m")
    # Class factories of TF policies make more stand-ins (so a module can define both).
    cc_policy = PPOTFPolicy.with_updates(name="CCPPOTFPolicy", loss_fn=None)
    assert is_stand_in(cc_policy) and cc_policy.__name__ == "CCPPOTFPolicy"
    with pytest.raises(TensorFlowOnlyError, match="PPOTorchPolicy"):
        cc_policy({}, {}, {})
    my_tf_policy = build_tf_policy(name="MyTFPolicy", loss_fn=lambda *a: None)
    assert is_stand_in(my_tf_policy) and my_tf_policy.__name__ == "MyTFPolicy"
    with pytest.raises(TensorFlowOnlyError):
        my_tf_policy()
    # Other uses raise too; introspection does not.
    with pytest.raises(TensorFlowOnlyError):
        PPOTFPolicy.loss  # noqa: B018
    assert not hasattr(PPOTFPolicy, "_private")
    assert "TensorFlow" in repr(PPOTFPolicy)


def _an_unbuilt_algorithm() -> tuple[str, str, str]:
    """(feature name, package, trainer class name) of an algorithm the table says is not
    built, whose package has RLlib's `DEFAULT_CONFIG` (the table shrinks as corral grows)."""
    surface = _surface.surface()
    for feature in _surface.NOT_BUILT:
        for module in feature.modules if feature.algorithms else ():
            names = surface.get(module, ())
            trainer = next((n for n in names if n.endswith("Trainer")), None)
            if trainer and "DEFAULT_CONFIG" in names:
                return feature.name, module, trainer
    pytest.skip("every algorithm of RLlib 1.13 is built")


def test_unbuilt_algorithms_raise_naming_them():
    feature, module, trainer_name = _an_unbuilt_algorithm()
    package = importlib.import_module(f"corral.{module}")
    trainer, config = getattr(package, trainer_name), package.DEFAULT_CONFIG

    with pytest.raises(NotImplementedError, match=feature):
        trainer(config={}, env="CartPole-v1")
    with pytest.raises(NotImplementedError, match=feature):
        config.copy()
    with pytest.raises(NotImplementedError, match=feature):
        config["lr"]


def test_package_reexports_are_the_defining_objects():
    import corral
    from corral.evaluation.postprocessing import compute_advantages
    from corral.policy.sample_batch import SampleBatch

    assert corral.SampleBatch is SampleBatch
    from corral.evaluation import compute_advantages as reexported

    assert reexported is compute_advantages
    from corral.agents.ppo.ppo_tf_policy import PPOTFPolicy as defining

    from corral.agents.ppo import PPOTFPolicy

    assert PPOTFPolicy is defining


def test_registry_reads_the_table(monkeypatch):
    from corral._surface import not_built
    from corral.agents.registry import ALGORITHMS, get_trainer_class

    # Every RLlib 1.13 algorithm is built: the table gets a planned one for this test.
    planned_feature = not_built.Feature("Planned", "an algorithm to come", algorithms=("PLANNED",))
    monkeypatch.setattr(not_built, "NOT_BUILT", (*not_built.NOT_BUILT, planned_feature))
    planned = _surface.not_built_algorithms()
    assert "PLANNED" in planned
    for name in sorted(planned)[:2]:
        with pytest.raises(NotImplementedError, match=f"'{name}'.*not built yet"):
            get_trainer_class(name)
    trainer, config = ALGORITHMS["PPO"]()
    assert trainer.__name__ == "PPOTrainer" and config["lr"] > 0
    assert not set(planned) & set(ALGORITHMS)


def test_readme_lists_what_is_not_built_from_the_table():
    readme = (ROOT / "README.md").read_text()
    found = re.search(
        r"<!-- not-built: start.*?-->\n(.*?)\n<!-- not-built: end -->", readme, re.DOTALL
    )
    assert found, "README.md lacks the generated list of what corral does not build"
    assert found.group(1).strip() == _surface.markdown_not_built().strip(), (
        "README.md's list differs from corral/_surface/not_built.py: regenerate it with "
        "`python scripts/update_readme_surface.py`"
    )


def test_import_corral_stays_lazy():
    code = (
        "import sys, corral\n"
        "print(sorted(m for m in sys.modules if m.startswith('corral')))\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.split("\n")
    loaded = eval(out[0])  # noqa: S307 (our own subprocess' repr of a list of names)
    # Only the package and private helpers (the surface table, import hooks) load eagerly.
    assert "corral._surface" in loaded
    assert all(m == "corral" or m.startswith("corral._") for m in loaded), loaded
    assert out[1] == "False"


def test_missing_name_of_a_real_module_is_an_attribute_error():
    import corral.utils.filter as filters

    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        filters.no_such_name  # noqa: B018
    assert not hasattr(filters, "__no_such_dunder__")


def test_the_import_hook_keeps_modules_ordinary():
    import importlib.util
    import inspect
    import pickle

    from corral.models.tf.tf_modelv2 import TFModelV2

    import corral.utils.framework as framework

    # A real module loaded through the hook: source, reload and its own names still work.
    assert "def try_import_torch" in inspect.getsource(framework)
    assert importlib.reload(framework).try_import_torch()[0] is not None
    # Modules without a file are packages whose dir() lists RLlib's names.
    import corral.models.tf as models_tf

    assert "TFModelV2" in dir(models_tf) and models_tf.__spec__.origin is None
    assert importlib.util.find_spec("corral.agents.impala") is not None
    # Stand-ins pickle by reference (e.g. a config dict holding one, sent to a worker).
    assert pickle.loads(pickle.dumps(TFModelV2)) is TFModelV2
    # Unknown names stay AttributeErrors, also on the root package.
    import corral

    assert not hasattr(corral, "no_such_name")
    assert corral.Policy.__module__ == "corral.policy.policy"
