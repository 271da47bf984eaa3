"""Per-row text functions evaluated once per distinct row (nsroof.frames.distinct) give what a plain loop
over the rows gives (None and NaN being one missing value), and call the function once per distinct row."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from nsroof.frames.distinct import first_appearances, group_rows, map_rows, row_codes

# a column holds one type, as report columns do; None and NaN are its missing value
_COLUMN_OF = {
    "text": st.one_of(st.sampled_from(["", "a", "b", "a, b", "long " * 50]), st.none()),
    "int": st.integers(0, 3),
    "bool": st.booleans(),
    "float": st.one_of(st.sampled_from([0.5, 1e9]), st.just(float("nan"))),
}


@st.composite
def tables(draw: st.DrawFn) -> list[list[object]]:
    kinds = draw(st.lists(st.sampled_from(sorted(_COLUMN_OF)), min_size=1, max_size=3))
    n = draw(st.integers(0, 60))
    return [draw(st.lists(_COLUMN_OF[k], min_size=n, max_size=n)) for k in kinds]


def _key(v: object) -> object:
    return "missing" if v is None or (isinstance(v, float) and v != v) else v


@settings(deadline=None)  # a slow or busy machine must not fail a property on time
@given(tables())
def test_map_rows_equals_the_loop(columns: list[list[object]]) -> None:
    calls: list[tuple[object, ...]] = []

    def f(*values: object) -> str:
        calls.append(values)
        return "|".join(repr(_key(v)) for v in values)

    got = map_rows(f, *[np.array(c, dtype=object) for c in columns])
    rows = list(zip(*columns, strict=True))
    assert got.tolist() == ["|".join(repr(_key(v)) for v in r) for r in rows]
    assert len(calls) == len({tuple(_key(v) for v in r) for r in rows})  # once per distinct row


def test_row_codes_number_rows_in_order_of_first_appearance() -> None:
    codes, first = row_codes(["x", "y", "x", "z", "y"], [1, 1, 1, 2, 2])
    # rows (x,1) (y,1) (x,1) (z,2) (y,2): four distinct, first seen at rows 0, 1, 3, 4
    assert codes.tolist() == [0, 1, 0, 2, 3]
    assert first.tolist() == [0, 1, 3, 4]


@settings(deadline=None)  # a slow or busy machine must not fail a property on time
@given(st.lists(st.integers(0, 5), max_size=80))
def test_first_appearances_match_a_sort(values: list[int]) -> None:
    codes, _ = pd.factorize(np.array(values, dtype=np.int64))
    expected = np.unique(codes, return_index=True)[1] if len(codes) else np.zeros(0, np.int64)
    assert first_appearances(codes).tolist() == expected.tolist()


def test_row_codes_of_many_columns_renumber_before_the_key_overflows() -> None:
    rng = np.random.default_rng(1)
    # 70 flag columns (2^70 combinations) and a text column: the combined key is renumbered on the way
    columns = ([rng.random(300) < 0.02 for _ in range(70)]
               + [rng.choice(np.array(["a", "b", None], dtype=object), 300)])
    rows = list(zip(*(c.tolist() for c in columns), strict=True))
    seen: dict[tuple[object, ...], int] = {}
    expected = [seen.setdefault(r, len(seen)) for r in rows]
    codes, first = row_codes(*columns)
    assert codes.tolist() == expected and len(set(expected)) > 50
    assert first.tolist() == [expected.index(c) for c in range(len(seen))]


@settings(deadline=None)  # a slow or busy machine must not fail a property on time
@given(st.lists(st.sampled_from(["", "a", "b", "long " * 50, None, float("nan")]), min_size=256,
                max_size=600),
       st.booleans())
def test_row_codes_of_long_object_columns_code_by_value(values: list[object], copies: bool) -> None:
    # >= 256 rows: coded by object identity first; equal texts that are distinct str objects (copies)
    # must still share a code, and None and NaN are one missing value
    cells = np.array([("".join(v) if copies and isinstance(v, str) else v) for v in values], dtype=object)
    codes, first = row_codes(cells)
    keys = [_key(v) for v in values]
    distinct = list(dict.fromkeys(keys))
    assert codes.tolist() == [distinct.index(k) for k in keys]
    assert first.tolist() == [keys.index(k) for k in distinct]


def test_object_ids_are_the_cells_ids() -> None:
    from nsroof.frames.distinct import object_ids

    cells = np.array(["x", None, 3.5, "x" * 9], dtype=object)
    assert object_ids(cells).tolist() == [id(c) for c in cells]


def test_identity_codes_share_a_code_per_object_in_order_of_first_appearance() -> None:
    import numpy as np

    from nsroof.frames.distinct import identity_codes

    a, b = [1], [1]  # equal lists, two objects
    cells = np.empty(5, dtype=object)
    cells[:] = [b, a, b, None, a]
    assert identity_codes(cells).tolist() == [0, 1, 0, 2, 1]
    assert identity_codes(np.empty(0, dtype=object)).tolist() == []


@settings(deadline=None)  # a slow or busy machine must not fail a property on time
@given(st.lists(st.integers(0, 4), max_size=60), st.integers(0, 2))
def test_group_rows_are_each_codes_rows_in_order(values: list[int], extra: int) -> None:
    count = max(values, default=-1) + 1 + extra  # codes that no row has: empty groups
    groups = group_rows(np.array(values, dtype=np.int64), count)
    assert [g.tolist() for g in groups] == [[i for i, v in enumerate(values) if v == c] for c in range(count)]
