"""``corral config ALGO [KEY]``: an algorithm's default config, each key with the comment
that documents it (``corral.agents.config_docs``).
"""

from __future__ import annotations

import argparse
import difflib
import json
from collections.abc import Mapping
from typing import Any

from corral.cli.common import EXIT_OK, UsageError, get_trainer_class


def add_config_parser(commands: Any) -> None:
    config = commands.add_parser(
        "config",
        help="show an algorithm's config keys, defaults and documentation",
        description="Print an algorithm's default config, each key with its documentation, "
        "or one key (nested keys as model.fcnet_hiddens).",
        epilog="Example: corral config PPO lr",
    )
    config.add_argument("algorithm", help="e.g. PPO, DQN, SAC")
    config.add_argument("key", nargs="?", help="one key, e.g. lr or model.fcnet_hiddens")
    config.set_defaults(handler=run_config, subparser=config)


def run_config(args: argparse.Namespace) -> int:
    """``corral config ALGO [KEY]``: the default config with each key's documentation."""
    import textwrap

    from corral.agents.config_docs import config_docs

    trainer_class = get_trainer_class(args.algorithm)
    defaults = trainer_class.get_default_config()
    docs = config_docs(trainer_class)
    entries = _config_entries(defaults)
    if args.key:
        key = args.key.replace("/", ".")
        if key not in entries:
            close = difflib.get_close_matches(key, list(entries), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise UsageError(f"{args.algorithm} has no config key {args.key!r}{hint}")
        entries = {key: entries[key]}
    for key, value in entries.items():
        print(f"{key} = {_config_value_text(value)}")
        doc = docs.get(key) or "(undocumented)"
        print(textwrap.fill(doc, width=88, initial_indent="    ", subsequent_indent="    "))
    return EXIT_OK


def _config_entries(defaults: Mapping) -> dict[str, Any]:
    """Every key, with the keys of ``model`` spelled out as ``model.<key>``."""
    out: dict[str, Any] = {}
    for key, value in defaults.items():
        if key == "model" and isinstance(value, Mapping):
            out.update({f"model.{k}": v for k, v in value.items()})
        else:
            out[key] = value
    return out


def _config_value_text(value: Any) -> str:
    if isinstance(value, type) or callable(value):
        return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', value)}"
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
