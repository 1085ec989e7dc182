"""Each config key's documentation, read from the comments where the key is defined.

Config keys are documented once, by the comment block right above them in the
dict literal that defines them (`COMMON_CONFIG` in `corral.agents.config`,
`MODEL_DEFAULTS` in `corral.models.model_defaults`, each algorithm's
`DEFAULT_CONFIG`), plus a comment on the key's own line. This module reads
those comments back (with `ast`, without importing anything it reads) for
`corral config ALGO [KEY]` and the docs' config reference, so that the
documentation has a single source.
"""

from __future__ import annotations

import ast
import functools
import inspect
import io
import tokenize
from collections.abc import Mapping
from typing import Any

# Section headers inside the dicts ("# === Training ===", "# --- LSTM ---") head a
# group of keys; they document none of them.
_HEADER_MARKS = ("# ===", "# ---")


@functools.cache
def _module_docs(path: str) -> dict[str, tuple[str, bool]]:
    """`{key path: (documentation, own)}` for every key of every dict literal in the file.

    `own` is False for a key documented only by the comment of its group (the
    key above it), which a key's own comment elsewhere (e.g. in
    `COMMON_CONFIG`) outranks.
    """
    with open(path, encoding="utf-8") as f:
        source = f.read()
    lines = source.splitlines()
    comments = {
        tok.start[0]: tok.string
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    }
    docs: dict[str, tuple[str, bool]] = {}

    def visit(node: ast.Dict, prefix: str) -> None:
        group_text, group_end = "", -1
        for key, value in zip(node.keys, node.values):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                continue
            path = f"{prefix}{key.value}"
            text = _comment_above(lines, comments, key.lineno)
            own = bool(text)
            if not text and key.lineno == group_end + 1:
                # A key right below another one without a comment of its own
                # belongs to that key's group ("v_min", "v_max" under one comment).
                text = group_text
            group_text, group_end = text, value.end_lineno or key.lineno
            if text and path not in docs:
                docs[path] = (text, own)
            if isinstance(value, ast.Dict):
                visit(value, f"{path}.")

    tree = ast.parse(source)
    # Nested dicts are visited from their parent, so that their keys get the
    # parent's prefix ("model.fcnet_hiddens"); they are not roots of their own.
    nested = {
        id(value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Dict)
        for value in node.values
        if isinstance(value, ast.Dict)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict) and id(node) not in nested:
            visit(node, "")
    return docs


def _comment_above(lines: list[str], comments: Mapping[int, str], lineno: int) -> str:
    """The comment block on the lines right above `lineno` and on `lineno` itself."""
    block: list[str] = []
    line = lineno - 1
    while line >= 1 and lines[line - 1].strip().startswith("#"):
        text = lines[line - 1].strip()
        if text.startswith(_HEADER_MARKS):
            break
        block.insert(0, text[1:].strip())
        line -= 1
    inline = comments.get(lineno)
    if inline and not lines[lineno - 1].strip().startswith("#"):
        block.append(inline[1:].strip())
    return " ".join(b for b in block if b)


def config_docs(trainer_class: type) -> dict[str, str]:
    """`{key: documentation}` for `trainer_class`'s config, nested keys as "model.fcnet_hiddens".

    The algorithm's own modules (its class and base classes) win over
    `COMMON_CONFIG`'s comment where both document a key (e.g. a different default).
    """
    from corral.agents import config as common
    from corral.models import model_defaults

    docs = {f"model.{k}": text for k, (text, _) in _docs_of(model_defaults).items()}
    docs.update({k: text for k, (text, _) in _docs_of(common).items()})
    for klass in reversed(trainer_class.__mro__):
        module = inspect.getmodule(klass)
        if module is None or module is common or not module.__name__.startswith("corral."):
            continue
        for key, (text, own) in _docs_of(module).items():
            if own or key not in docs:
                docs[key] = text
    return docs


def _docs_of(module: Any) -> dict[str, tuple[str, bool]]:
    try:
        path = inspect.getsourcefile(module)
    except TypeError:
        return {}
    return _module_docs(path) if path else {}


def markdown_reference(algorithms: Mapping[str, Any]) -> str:
    """The config reference page: `COMMON_CONFIG` (and `model`), then each algorithm's
    own keys and the common keys whose default it changes."""
    from corral.agents.config import COMMON_CONFIG
    from corral.agents.trainer import Trainer

    common_docs = config_docs(Trainer)
    out = [
        "# Config reference",
        "",
        "Generated by `python scripts/gen_docs.py` from the comments where each key is "
        "defined (`corral/agents/config.py`, `corral/models/model_defaults.py`, each "
        "algorithm's `DEFAULT_CONFIG`); `corral config ALGO [KEY]` prints the same. "
        "Do not edit by hand.",
        "",
        "## Common keys (`COMMON_CONFIG`)",
        "",
    ]
    out += _table({k: v for k, v in COMMON_CONFIG.items() if k != "model"}, common_docs)
    out += ["", "## Model keys (`model`)", ""]
    out += _table({f"model.{k}": v for k, v in COMMON_CONFIG["model"].items()}, common_docs)
    seen: set[type] = set()
    for name, trainer_class in algorithms.items():
        if trainer_class in seen:
            continue
        seen.add(trainer_class)
        docs = config_docs(trainer_class)
        defaults = trainer_class.get_default_config()
        own = {
            k: v
            for k, v in defaults.items()
            if k != "model" and (k not in COMMON_CONFIG or not _same(v, COMMON_CONFIG[k]))
        }
        out += ["", f"## {name} (`{trainer_class.__module__}`)", ""]
        out += _table(own, docs) if own else ["(only the common keys)"]
    return "\n".join(out) + "\n"


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:  # noqa: BLE001 - e.g. arrays: not the same
        return False


def _table(entries: Mapping[str, Any], docs: Mapping[str, str]) -> list[str]:
    rows = ["| key | default | meaning |", "|---|---|---|"]
    for key, value in entries.items():
        doc = (docs.get(key) or "").replace("|", "\\|")
        rows.append(f"| `{key}` | `{_value_text(value)}` | {doc} |")
    return rows


def _value_text(value: Any) -> str:
    import json

    if isinstance(value, type) or callable(value):
        return getattr(value, "__qualname__", repr(value))
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    text = text.replace("|", "\\|").replace("`", "'")
    return text if len(text) <= 60 else text[:57] + "..."
