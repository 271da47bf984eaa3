"""nsroof.costs.ledger_map.rules: a ledger-mapping file (--ledger, YAML or JSON) read into rules; a bad file
is one line naming the file, the line and what is wrong."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nsroof.costs.ledger_map import rules
from nsroof.errors import InputError


class TestMappingFiles:
    def test_yaml_and_json_give_the_same_rule(self, data_dir: Path) -> None:
        y = rules.load_mapping(data_dir / "ledger" / "mapping.yaml").rules[0]
        j = rules.load_mapping(data_dir / "ledger" / "mapping.json").rules[0]
        assert (y.formula, y.shape, y.kernel.pattern if y.kernel else None) == (
            j.formula, j.shape, j.kernel.pattern if j.kernel else None)
        assert y.line == 5 and j.line == 4

    def test_top_level_list(self, tmp_path: Path) -> None:
        p = tmp_path / "m.yaml"
        p.write_text("- {kernel: k, formula: softmax, shape: {rows: 2, cols: 3}, dtype: fp16}\n")
        assert rules.load_mapping(p).rules[0].shape == {"rows": 2, "cols": 3, "dtype": "fp16"}

    @pytest.mark.parametrize(
        ("text", "line", "message"),
        [
            ("rules:\n  - kernel: k\n    formula: gemm\n    shape: {m: 1, n: 1}\n    dtype: fp32\n", 2,
             "rule 1: gemm needs k in shape"),
            ("rules:\n  - kernel: k\n    formula: gemv\n", 3,
             "rule 1: unknown ledger formula 'gemv'; known:"),
            ("rules:\n  - kernel: '(unclosed'\n    formula: gemm\n", 2, "bad kernel regex '\\(unclosed'"),
            ("rules:\n  - formula: gemm\n", 2, "rule 1 matches nothing: give kernel, nvtx or op"),
            ("rules:\n  - kernel: k\n    formula: gemm\n    shape: {m: 1, n: 1, k: 1}\n", 2,
             "no dtype for gemm"),
            ("rules:\n  - kernel: k\n    formula: gemm\n    shape: {m: 1.5, n: 1, k: 1}\n    dtype: fp32\n",
             2, "m must be int"),
            ("rules:\n  - kernel: k\n    formual: gemm\n", 3, "unknown key 'formual'"),
            ("dtype: fp12\nrules: []\n", 1, "unknown dtype 'fp12'"),
            ("rules: []\n", 1, "no rules"),
            ("rules:\n  - kernel: k\n    formula: gemm\n    shape: {m: 'sizes[1]', n: 1, k: 1}\n", 4,
             "cannot read size expression"),
            ("rules:\n  - kernel: k\n   formula: gemm\n", 3, "invalid YAML"),
            ("rules:\n  - nvtx: aten\n    formula: aten\n", 2, "formula 'aten' needs a dtype"),
            ("- just a string\n", 1, "rule 1 is not a mapping"),
        ],
    )
    def test_bad_yaml_names_file_and_line(self, tmp_path: Path, text: str, line: int, message: str) -> None:
        p = tmp_path / "bad.yaml"
        p.write_text(text)
        with pytest.raises(InputError) as info:
            rules.load_mapping(p)
        assert info.value.path == str(p) and info.value.line == line
        assert re.search(message, info.value.cause), info.value.cause

    def test_bad_json_syntax_names_the_line(self, tmp_path: Path) -> None:
        p = tmp_path / "bad.json"
        p.write_text('{\n  "rules": [\n    {"kernel": "k",}\n  ]\n}\n')
        with pytest.raises(InputError, match="invalid JSON") as info:
            rules.load_mapping(p)
        assert info.value.line == 3

    def test_missing_empty_and_directory(self, tmp_path: Path) -> None:
        with pytest.raises(InputError, match="no such ledger mapping file"):
            rules.load_mapping(tmp_path / "nope.yaml")
        (tmp_path / "empty.yaml").write_text("  \n")
        with pytest.raises(InputError, match="empty ledger mapping"):
            rules.load_mapping(tmp_path / "empty.yaml")
        with pytest.raises(InputError, match="is a directory"):
            rules.load_mapping(tmp_path)

    def test_error_is_one_line(self, tmp_path: Path) -> None:
        p = tmp_path / "bad.yaml"
        p.write_text("rules:\n  - kernel: k\n    formula: gemv\n")
        with pytest.raises(InputError) as info:
            rules.load_mapping(p)
        assert str(info.value).startswith(f"{p}:3: rule 1: unknown ledger formula 'gemv'")
        assert "\n" not in str(info.value)
