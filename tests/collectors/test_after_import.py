"""nsroof.collectors.after_import: actions on a module now, or right after its first import."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest


def test_an_action_waits_for_the_import_and_the_undo_stops_the_waiting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nsroof.collectors.after_import import when_imported

    for name in ("nsroof_late_a", "nsroof_late_b"):
        (tmp_path / f"{name}.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[tuple[str, int]] = []

    def record(module: ModuleType) -> None:
        seen.append((module.__name__, module.VALUE))

    already: list[ModuleType] = []
    stop = when_imported({"nsroof_late_a": [record], "nsroof_late_b": [record], "sys": [already.append]})
    try:
        assert already == [sys] and seen == []  # an imported module: at once
        import nsroof_late_a  # noqa: F401

        assert seen == [("nsroof_late_a", 1)]  # run after the module's own code
        stop()
        import nsroof_late_b  # noqa: F401

        assert seen == [("nsroof_late_a", 1)]  # imported after the undo: left alone
        assert not any(type(f).__name__ == "AfterImport" for f in sys.meta_path)
    finally:
        stop()
        for name in ("nsroof_late_a", "nsroof_late_b"):
            sys.modules.pop(name, None)
