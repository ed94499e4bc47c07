"""The kernels' own stamps (kernels.cuptitime): which records make a repetition's time, and
when the CUDA events stand instead. CUPTI itself needs a GPU; these parts do not."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kplay.config import EngineSettings
from kplay.kernels import cuptitime
from kplay.kernels.cuptitime import KernelStamps, consistent, sort_records, spans_us

KERNEL, LINK, API = 10, 48, 2


def test_a_repetition_spans_its_own_kernels_and_no_other() -> None:
    kernels = [
        (1, 1_000, 2_000),  # the flush, launched outside every pushed id
        (5, 10_000, 60_000),  # repetition 0: one kernel of 50 µs
        (7, 100_000, 120_000),  # repetition 1: two kernels, 20 µs apart ...
        (8, 125_000, 140_000),  # ... ending 40 µs after the first began
        (9, 130_000, 900_000),  # another thread's kernel, whatever its name
    ]
    links = [(5, 0), (7, 1), (8, 1), (6, 0)]  # 6: an API call that launched no kernel
    assert spans_us(kernels, links) == {0: 50.0, 1: 40.0}


def test_records_are_sorted_by_kind_and_the_rest_left_out() -> None:
    records = [
        SimpleNamespace(kind=KERNEL, correlation_id=5, start=10, end=20, name="kplay_l2_sweep"),
        SimpleNamespace(kind=LINK, correlation_id=5, external_id=3, external_kind=1),
        SimpleNamespace(kind=API, correlation_id=5, start=1, end=2),
    ]
    assert sort_records(records, KERNEL, LINK) == ([(5, 10, 20)], [(5, 3)])


@pytest.mark.parametrize(
    ("events", "kernels", "stands"),
    [
        ([63.0, 64.0, 65.0], [61.0, 61.2, 61.5], True),  # the events' own 3 µs
        ([2953.0] * 3, [2950.0] * 3, True),
        ([64.0] * 3, [30.0] * 3, False),  # half the time ran outside any kernel
        ([5000.0] * 3, [4880.0] * 3, False),  # 120 µs: more than 8 µs + 2%
        ([64.0] * 3, [61.0] * 2, False),  # a repetition without a kernel
        ([64.0] * 3, [0.0] * 3, False),
        ([], [], False),
    ],
)
def test_the_kernels_stand_for_the_events_only_within_their_overhead(
    events: list[float], kernels: list[float], stands: bool
) -> None:
    assert consistent(events, kernels) is stands


def test_without_cupti_nothing_is_recorded_and_the_events_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(__import__("sys").modules, "cupti", None)  # an import that fails
    assert KernelStamps.open() is None
    assert KernelStamps._current is None
    assert KernelStamps._lock.acquire(blocking=False)  # nothing left holding it
    KernelStamps._lock.release()


def test_the_timer_is_a_setting_and_events_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert EngineSettings().gpu_timer == "events"
    monkeypatch.setenv("KPLAY_GPU_TIMER", "kernels")
    assert EngineSettings().gpu_timer == "kernels"
    monkeypatch.setenv("KPLAY_GPU_TIMER", "ncu")
    with pytest.raises(ValueError, match="events"):
        EngineSettings()


def test_completed_buffers_reach_the_open_recorder_only(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = SimpleNamespace(
        ActivityKind=SimpleNamespace(
            CONCURRENT_KERNEL=KERNEL, EXTERNAL_CORRELATION=LINK, DRIVER=API, RUNTIME=3
        ),
        ExternalCorrelationKind=SimpleNamespace(CUSTOM0=1),
    )
    stamps = KernelStamps(fake)
    record = SimpleNamespace(kind=KERNEL, correlation_id=5, start=10, end=20)
    cuptitime._completed([record])  # nobody recording: dropped
    monkeypatch.setattr(KernelStamps, "_current", stamps)
    cuptitime._completed([record])
    assert stamps.kernels == [(5, 10, 20)]


class FakeEvent:
    clock = 0.0

    def record(self) -> None:
        FakeEvent.clock += 0.064  # ms: each launch reads 64 µs between its two events
        self.at = FakeEvent.clock

    def synchronize(self) -> None:
        pass


class FakeStamps:
    """Stands for CUPTI: each pushed repetition gets a 61 µs span (or none, if told)."""

    def __init__(self, span_us: float | None) -> None:
        self.span_us, self.pushed, self.open_ids, self.closed = span_us, [], [], False

    def push(self, rep: int) -> None:
        self.pushed.append(rep)
        self.open_ids.append(rep)

    def pop(self) -> None:
        self.open_ids.pop()

    def spans(self) -> dict[int, float]:
        return {} if self.span_us is None else {i: self.span_us for i in self.pushed}

    def close(self) -> None:
        self.closed = True


def fake_cupy() -> SimpleNamespace:
    device = SimpleNamespace(synchronize=lambda: None)
    cuda = SimpleNamespace(
        Event=FakeEvent,
        Device=lambda: device,
        get_elapsed_time=lambda start, end: end.at - start.at,
    )
    return SimpleNamespace(cuda=cuda)


@pytest.mark.parametrize(("span_us", "timer"), [(61.0, "cupti-kernels"), (None, "cuda-events")])
def test_the_timer_takes_the_stamps_of_every_repetition_or_keeps_the_events(
    monkeypatch: pytest.MonkeyPatch, span_us: float | None, timer: str
) -> None:
    from kplay.kernels import timing

    stamps = FakeStamps(span_us)
    monkeypatch.setitem(__import__("sys").modules, "cupy", fake_cupy())
    monkeypatch.setattr(timing, "_kernel_stamps", lambda: stamps)
    monkeypatch.setattr(timing, "_delay", lambda ns: None)
    monkeypatch.setattr(timing, "gpu_clocks", lambda: None)
    launched: list[list[int]] = []
    stage = timing.time_gpu(lambda: launched.append(list(stamps.open_ids)), flush_l2=False)
    # Warm-ups run outside any id; each timed launch inside its own, numbered in order.
    assert launched[:3] == [[], [], []]
    assert launched[3:] == [[i] for i in range(stage.reps or 0)]
    assert stamps.closed and stage.timer == timer
    assert stage.median_us == pytest.approx(61.0 if span_us else 64.0)
    assert stage.events_median_us == (pytest.approx(64.0) if span_us else None)
