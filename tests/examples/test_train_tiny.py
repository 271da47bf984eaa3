"""nsroof.examples.train_tiny: the example `nsroof demo` profiles trains on its own too, as a user runs it."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")


def test_train_tiny_runs_standalone() -> None:
    from nsroof.examples.train_tiny import Config, train

    losses = train(2, Config(layers=1, seq=16, batch=2))
    assert len(losses) == 2 and all(loss > 0 for loss in losses)
