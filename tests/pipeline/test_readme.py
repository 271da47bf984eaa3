"""The README stays a guide and true: at most 30,000 bytes, the two commands of its quick start, every
command in its tour; the report's column table (docs/readme/report.md) is the declared schema."""

from __future__ import annotations

import re
from pathlib import Path

from nsroof.cli import COMMANDS
from nsroof.schema import render_markdown

README = Path(__file__).resolve().parents[2] / "README.md"
COLUMNS_DOC = README.parent / "docs" / "readme" / "report.md"


def test_the_readme_is_a_guide_of_at_most_30000_bytes() -> None:
    """Issue 41: history, benchmark logs and long explanations live under docs/; the README stays readable."""
    assert len(README.read_bytes()) <= 30_000


def test_schema_table_matches_the_declared_schema() -> None:
    text = COLUMNS_DOC.read_text(encoding="utf-8")
    found = re.search(r"<!-- BEGIN SCHEMA -->\n(.*?)\n<!-- END SCHEMA -->", text, flags=re.S)
    assert found, "docs/readme/report.md lacks the schema markers"
    assert found.group(1).strip() == render_markdown().strip(), "regenerate: python -m nsroof.schema"
    assert "docs/readme/report.md" in README.read_text(encoding="utf-8")  # the README links it


def test_the_readmes_links_to_the_repository_resolve() -> None:
    """Every relative link of the README and docs/ names a file that exists (moved text keeps its links)."""
    root = README.parent
    broken = []
    for doc in [README, *sorted((root / "docs").rglob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text(encoding="utf-8")):
            if not target.startswith(("http://", "https://")) and not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(root)} -> {target}")
    assert not broken, broken


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
