"""A torch profiler started inside nsroof.profile is made a no-op with one warning; nsroof's own trace and
report hold the run (before: the inner stop ended nsroof's session and the export died in kineto, SIGSEGV)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nsroof.errors import NsroofError
from nsroof.roofs.machines import Machine

torch = pytest.importorskip("torch")

from nsroof.collectors.nested_profiler import InertSession  # noqa: E402
from nsroof.collectors.torch_profile import profile  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

MACHINE = Machine(
    name="test-cpu", source="file", peak_flop_per_s={"fp32": 1e11}, simt_flop_per_s={"fp32": 1e11},
    bandwidth_bytes_per_s={"dram": 1e10},
)
WARNING = "the script's own torch profiler (started at "


def _train(steps: int, prof: object | None = None) -> None:
    model = torch.nn.Linear(16, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 16)
    for _ in range(steps):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        if prof is not None:
            prof.step()  # type: ignore[attr-defined]


def test_an_inner_torch_profiler_is_a_no_op_and_nsroof_keeps_the_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ready: list[int] = []
    with profile(machine=MACHINE) as prof:
        with torch.profiler.profile(on_trace_ready=lambda p: ready.append(len(p.events()))) as inner:
            _train(2)
        inner.export_chrome_trace(str(tmp_path / "own.json"))
    # the inner profiler recorded nothing, said so once, and its callback was not called
    assert isinstance(inner.profiler, InertSession) and len(inner.events()) == 0 and ready == []
    assert len(inner.key_averages()) == 0
    assert json.loads((tmp_path / "own.json").read_text())["traceEvents"] == []
    err = capsys.readouterr().err
    assert err.count(WARNING) == 1 and f"{__file__}:" in err
    # nsroof's report has the run, with the shapes nsroof records (the inner profiler asked for none)
    report = prof.report
    addmm = report[report["op"].astype(str) == "aten::linear"]
    assert len(addmm) == 2 and addmm["flops"].notna().all()
    assert [w for w in prof.result.warnings if WARNING in w]  # type: ignore[union-attr]


@pytest.mark.filterwarnings("ignore:Warning. Profiler clears events")
def test_a_scheduled_inner_profiler_started_with_start_warns_once() -> None:
    sched = torch.profiler.schedule(wait=0, warmup=1, active=1, repeat=2)
    with profile(machine=MACHINE) as prof:
        inner = torch.profiler.profile(schedule=sched, on_trace_ready=lambda p: pytest.fail("called"))
        inner.start()
        _train(5, inner)
        inner.stop()
    assert sum(WARNING in w for w in prof.result.warnings) == 1  # type: ignore[union-attr]
    assert (prof.report["op"].astype(str) == "aten::linear").sum() == 5


def test_an_inner_profiler_outliving_nsroofs_window_stops_safely() -> None:
    # nsroof stops after its window (2 steps) while the inner one still "records"; its stop comes later
    with profile(machine=MACHINE, steps=2) as prof:
        with torch.profiler.profile() as inner:
            _train(4)
    assert len(inner.events()) == 0
    assert (prof.report["op"].astype(str) == "aten::linear").sum() == 2


def test_a_profiler_started_once_the_window_is_recorded_runs_normally() -> None:
    with profile(machine=MACHINE, steps=1) as prof:
        _train(2)
        with torch.profiler.profile() as inner:
            torch.ones(4).sum()
    assert any(e.name == "aten::sum" for e in inner.events())
    assert not [w for w in prof.result.warnings if WARNING in w]  # type: ignore[union-attr]


def test_the_legacy_autograd_profiler_inside_is_a_no_op_too() -> None:
    with profile(machine=MACHINE) as prof:
        with torch.autograd.profiler.profile() as inner:
            torch.ones(4).sum()
    assert len(inner.function_events) == 0
    assert [w for w in prof.result.warnings if WARNING in w]  # type: ignore[union-attr]


def test_nsroof_profile_inside_a_running_torch_profiler_refuses_to_start() -> None:
    with torch.profiler.profile() as outer:
        with pytest.raises(NsroofError, match="already recording") as caught:
            with profile(machine=MACHINE):
                pytest.fail("must not start")
        torch.ones(4).sum()
    assert "\n" not in str(caught.value)
    assert any(e.name == "aten::sum" for e in outer.events())  # the outer profiler was left untouched


def test_the_interception_is_undone_after_the_session() -> None:
    from torch.autograd import profiler as autograd_profiler

    before = autograd_profiler.profile.__dict__["_prepare_trace"]
    with profile(machine=MACHINE):
        assert autograd_profiler.profile.__dict__["_prepare_trace"] is not before
    assert autograd_profiler.profile.__dict__["_prepare_trace"] is before
