"""Numbers as a reader wants them: three significant digits and a unit that fits."""

from __future__ import annotations

from datetime import datetime

_SI = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")]


def sig3(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def duration_us(us: float | None) -> str:
    if us is None:
        return "—"
    if us < 1:
        return f"{sig3(us * 1000)} ns"
    if us < 1000:
        return f"{sig3(us)} µs"
    if us < 1e6:
        return f"{sig3(us / 1000)} ms"
    return f"{sig3(us / 1e6)} s"


def rate(value: float | None, unit: str) -> str:
    """12.3e9, 'FLOP/s' -> '12.3 GFLOP/s'; 1.2e12, 'B/s' -> '1.20 TB/s'."""
    if value is None:
        return "—"
    for scale, prefix in _SI:
        if abs(value) >= scale:
            return f"{sig3(value / scale)} {prefix}{unit}"
    return f"{sig3(value)} {unit}"


def bytes_(value: float | None) -> str:
    if value is None:
        return "—"
    for scale, prefix in ((2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki")):
        if value >= scale:
            return f"{sig3(value / scale)} {prefix}B"
    return f"{int(value)} B"


def percent(value: float | None) -> str:
    return "—" if value is None else f"{sig3(value)} %"


def ratio(value: float | None) -> str:
    return "—" if value is None else f"{sig3(value)}×"


def iso(when: datetime | None) -> str:
    return "" if when is None else when.isoformat()
