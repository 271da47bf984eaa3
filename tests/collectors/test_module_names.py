"""Module range names: the path below a root named by its class, torch.compile's wrapper left out."""

from __future__ import annotations

from nsroof.collectors.module_names import GlobalNames, range_name


def test_range_names_leave_out_the_compile_wrappers_step() -> None:
    assert range_name("Net", "") == "Net"
    assert range_name("Net", "_orig_mod") == "Net"
    assert range_name("Net", "_orig_mod.block.fc1") == "Net.block.fc1"
    assert range_name("Net", "block._orig_mod.fc1") == "Net.block.fc1"  # a compiled submodule


def test_global_names_name_a_tree_once_and_report_each_name() -> None:
    import pytest

    torch = pytest.importorskip("torch")
    given: list[str] = []
    names = GlobalNames(given.append)
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    assert names.of(model[1]) == "ReLU"  # first seen alone: a root named by its class
    assert names.of(model) == "Sequential" and names.of(model[0]) == "Sequential.0"
    assert names.of(model[1]) == "ReLU"  # a name once given stays
    assert given == ["ReLU", "Sequential", "Sequential.0"]


def test_global_names_removed_forget_their_modules() -> None:
    import pytest

    torch = pytest.importorskip("torch")
    names = GlobalNames(lambda name: None)
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    names.of(model)
    table = names.names
    names.remove()
    assert table == {} and names.names == {}
    assert names.of(model[0]) == "Linear"  # named afresh: nothing of the first naming is left
