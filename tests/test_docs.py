"""The documentation site: generated pages up to date, every page in the navigation."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]


def _load_gen_docs():
    spec = importlib.util.spec_from_file_location("gen_docs", REPO / "scripts" / "gen_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_pages_are_up_to_date():
    for path, text in _load_gen_docs().pages().items():
        assert path.read_text() == text, f"{path} is stale: run python scripts/gen_docs.py"


def _nav_pages(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [p for v in node.values() for p in _nav_pages(v)]
    return [p for v in node for p in _nav_pages(v)]


def test_every_page_is_reachable_from_the_navigation():
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    nav = set(_nav_pages(config["nav"]))
    pages = {str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md")}
    assert pages - nav == set(), "pages missing from mkdocs.yml's nav"
    assert nav - pages == set(), "nav entries without a page"
    assert config["nav"][0] == {"Home": "index.md"}


def test_site_builds_strictly(tmp_path):
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed (the `docs` extra); .ci/run builds the site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def _bash_blocks(markdown: str) -> list[str]:
    """The lines of each fenced bash block, in order."""
    return [block.split("```", 1)[0].strip() for block in markdown.split("```bash\n")[1:]]


def test_ci_runs_the_test_command_the_readme_and_the_site_give():
    readme_commands = _bash_blocks((REPO / "README.md").read_text())[:2]
    assert "pytest" in readme_commands[1], readme_commands
    ci_lines = (REPO / ".ci" / "run").read_text().splitlines()
    assert readme_commands[1] in ci_lines, ".ci/run must run the README's test command"
    assert readme_commands[1] in _bash_blocks((REPO / "docs" / "index.md").read_text())
