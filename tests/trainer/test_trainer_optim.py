"""The learning-rate schedule, a pure function of the step so resume needs only the step."""

from __future__ import annotations

import pytest

from trainer.optim import lr_at


def test_lr_warms_up_linearly() -> None:
    assert [lr_at(s, 1.0, 4, 100, 0.1) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]


def test_lr_follows_a_cosine_down_to_the_floor() -> None:
    assert lr_at(4, 1.0, 4, 104, 0.1) == pytest.approx(1.0)
    assert lr_at(54, 1.0, 4, 104, 0.1) == pytest.approx(0.55)
    assert lr_at(104, 1.0, 4, 104, 0.1) == pytest.approx(0.1)
    assert lr_at(500, 1.0, 4, 104, 0.1) == pytest.approx(0.1)
