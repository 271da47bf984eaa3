"""The README stays true: its schema table is the declared schema, and it names every command."""

from __future__ import annotations

import re
from pathlib import Path

from nsroof.cli import COMMANDS
from nsroof.schema import render_markdown

README = Path(__file__).resolve().parents[2] / "README.md"


def test_schema_table_matches_the_declared_schema() -> None:
    text = README.read_text(encoding="utf-8")
    found = re.search(r"<!-- BEGIN SCHEMA -->\n(.*?)\n<!-- END SCHEMA -->", text, flags=re.S)
    assert found, "README lacks the schema markers"
    assert found.group(1).strip() == render_markdown().strip(), "regenerate: python -m nsroof.schema"


def test_quick_start_is_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    quick = text.split("## Quick start", 1)[1].split("```", 2)[1]
    commands = [line.split("#")[0].strip() for line in quick.splitlines()[1:] if line.strip()]
    assert commands == ["make demo", "make test"]


def test_every_command_is_in_the_tour() -> None:
    text = README.read_text(encoding="utf-8")
    for name in COMMANDS:
        assert f"nsroof {name}" in text, name


def test_user_facing_text_names_no_development_path() -> None:
    """README, docs/readme and the package's own text cite public sources; the development checkout's fixture
    and notes folders (a sibling `shared/` of the clone) are no path a user has."""
    root = README.parent
    files = [README, *sorted((root / "docs").rglob("*.md")), *sorted((root / "nsroof").rglob("*.py"))]
    offenders = [f"{p.relative_to(root)}:{n}" for p in files
                 for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
                 if "../shared" in line]
    assert not offenders, offenders
