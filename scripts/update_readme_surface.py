"""Rewrites README.md's list of what corral does not build from `corral._surface.NOT_BUILT`.

Usage: python scripts/update_readme_surface.py
"""

from __future__ import annotations

import re
from pathlib import Path

from corral._surface import markdown_not_built

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"(<!-- not-built: start.*?-->\n)(?:.*?\n)?(<!-- not-built: end -->)", re.DOTALL)


def main() -> None:
    text = README.read_text()
    if not BLOCK.search(text):
        raise SystemExit("README.md has no <!-- not-built: start --> ... end --> block")
    README.write_text(
        BLOCK.sub(lambda m: m.group(1) + markdown_not_built() + "\n" + m.group(2), text)
    )


if __name__ == "__main__":
    main()
