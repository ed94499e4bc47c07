"""The timed case, repetition by repetition: fresh poison, rotated inputs, checked outputs.

Before every launch (outside the timed region) the harness
- picks the next set of buffers (one or two, at different addresses),
- moves into its inputs an input set other than the one they held: set 0 is the case's
  inputs, set k > 0 equals set 0 except at about 1/32 of each input array's elements
  (random positions), which hold values drawn from another seed, and half of the sets
  also draw their own scalars. Moving costs a scatter of those few elements, not a copy;
- fills its outputs with the poison (NaN, or a sentinel for integers; zeros where the
  problem says the kernel accumulates).
After every launch it checks the output against the reference of the set it got: on the
GPU every repetition, by a reduction enqueued after the end event; on the CPU a random
share of them (all where checking costs less than the kernel), drawn after the
repetition has run, so that the kernel cannot know which ones are looked at.

Because the sets differ in a few scattered elements, a kernel that keys a cache on its
buffers' addresses, the sizes or a sample of input values finds a hit for inputs it has
not seen and replays a stale answer, which the check then finds wrong.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kplay.kernels import draws, repcheck
from kplay.kernels.arrays import ArrayOps, poison_value, scalar
from kplay.kernels.check import (
    PreparedCase,
    array_bytes,
    compare,
    expected_outputs,
    generate_inputs,
    home_module,
    prepare,
    reset_outputs,
)
from kplay.kernels.models import CaseCheck, TimingStage
from kplay.kernels.problem import Case, ProblemSpec
from kplay.kernels.seeds import RunSeeds

PATCH_DIVISOR = 32  # a set other than set 0 changes 1/32 of each input array
MAX_SETS = 4
MIN_CHECK_SHARE = 0.25  # on the CPU, at least this share of timed repetitions is checked


class RepetitionFailed(Exception):
    """A checked repetition's output was wrong; carries the case check that says so."""

    def __init__(self, check: CaseCheck) -> None:
        super().__init__(check.message)
        self.check = check


def plan(nbytes: int, budget: int) -> tuple[int, int]:
    """(input sets, sets of buffers) for a case whose input set takes `nbytes`."""
    sets = next((k for k in range(MAX_SETS, 2, -1) if k * nbytes <= budget), 2)
    buffers = 2 if 2 * nbytes <= budget else 1
    return sets, buffers


@dataclass
class InputSet:
    index: int
    # Every input, arrays and scalars, as the reference saw them, and the reference's
    # outputs for them: NumPy arrays, or CuPy ones for a case that lives on the GPU.
    host: dict[str, Any]
    expected: dict[str, Any]
    # Device arrays, per input array: where this set differs from set 0, its values
    # there, and set 0's values there (to undo it). Empty for set 0.
    positions: dict[str, Any] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    undo: dict[str, Any] = field(default_factory=dict)
    expected_on_device: dict[str, Any] = field(default_factory=dict)  # GPU only


@dataclass
class _Buffers:
    prepared: PreparedCase
    flat: dict[str, Any]
    holds: int = 0  # the input set its inputs hold now


class Rotation:
    """The hooks of timing.time_gpu / time_cpu for one benchmark case."""

    def __init__(
        self,
        problem: ProblemSpec,
        case: Case,
        ops: ArrayOps,
        launch: Callable[[list[Any]], None],
        seeds: RunSeeds,
        budget_bytes: int,
    ) -> None:
        self.problem, self.case, self.ops, self.launch_fn = problem, case, ops, launch
        self.params = dict(case.params)
        self.xp = home_module(problem, self.params, ops)
        n_sets, n_buffers = plan(array_bytes(problem, self.params), budget_bytes)
        self.sets = [self._base(seeds)]
        self.sets += [self._variant(seeds, k) for k in range(1, n_sets)]
        self.buffers = [self._buffers() for _ in range(n_buffers)]
        self.inout_base = {
            a.name: ops.to_device(self.sets[0].host[a.name])
            for a in problem.args
            if a.role == "inout"
        }
        self.poison = {
            name: poison_value(np.dtype(problem.arg(name).dtype))
            for name in self.buffers[0].prepared.poisoned
        }
        self.schedule = seeds.rng(case, "schedule")
        self.current: tuple[int, int] = (0, 0)  # (buffers, input set) of the launch in flight
        self.launches = 0
        self.warmups = 0
        self.timed = 0
        self.checked = 0
        self.kernel_us = 0.0  # CPU: the launches' time so far, in µs
        self.check_us = 0.0  # CPU: the cheapest check of an output so far, in µs
        self.pending: list[tuple[str, int, str, Any]] = []  # GPU counts, read after the loop
        self.closed = False

    # ------------------------------------------------------------ building the sets

    def _base(self, seeds: RunSeeds) -> InputSet:
        seed = seeds.case(self.case)
        host = generate_inputs(self.problem, self.params, seed, seeds.memoise, self.xp)
        expected = expected_outputs(self.problem, self.params, seed, host, seeds.memoise)
        return self._on_device(InputSet(0, host, expected))

    def _variant(self, seeds: RunSeeds, k: int) -> InputSet:
        problem, ops, xp = self.problem, self.ops, self.xp
        base = self.sets[0].host
        seed = seeds.derived(self.case, "variant", k)
        where = seeds.derived(self.case, "positions", k)
        # Odd sets keep set 0's scalars: they differ from it in scattered elements only,
        # which is what a cache keyed on a sample of the inputs misses.
        keeps_scalars = k % 2 == 1 or all(a.is_array for a in problem.inputs)
        shared = None
        if problem.elementwise and xp is np and keeps_scalars:
            # Only the changed elements are drawn, and only their outputs worked out.
            size = next(base[a.name].size for a in problem.inputs if a.is_array)
            shared = draws.positions(where, size, max(1, size // PATCH_DIVISOR), np)
            fresh = problem.reference.generate(dict(self.params), draws.Draws(seed, np, shared))
        else:
            fresh = generate_inputs(problem, self.params, seed, memoise=False, xp=xp)
        host: dict[str, Any] = {}
        out = InputSet(k, host, {})
        changed: dict[str, Any] = {}  # the inputs at `shared`, arrays and scalars
        for j, arg in enumerate(problem.inputs):
            if not arg.is_array:
                host[arg.name] = base[arg.name] if keeps_scalars else fresh[arg.name]
                changed[arg.name] = host[arg.name]
                continue
            flat0 = base[arg.name].reshape(-1)
            if shared is not None:
                positions = shared
                values = np.ascontiguousarray(fresh[arg.name], dtype=arg.dtype).reshape(-1)
            else:
                # Sorted, each once (a scatter needs that), from a stream of the harness's own.
                count = max(1, flat0.size // PATCH_DIVISOR)
                positions = draws.positions(where, flat0.size, count, xp, j)
                values = xp.ascontiguousarray(fresh[arg.name].reshape(-1)[positions])
            changed[arg.name] = values
            arr = base[arg.name].copy()
            arr.reshape(-1)[positions] = values
            if xp is np:
                arr.flags.writeable = False
            host[arg.name] = arr
            out.positions[arg.name] = ops.to_device(positions)
            out.values[arg.name] = ops.to_device(values)
            out.undo[arg.name] = ops.to_device(xp.ascontiguousarray(flat0[positions]))
        if shared is None:
            out.expected = expected_outputs(problem, self.params, seed, host, memoise=False)
        else:
            out.expected = self._expected_at(shared, changed)
        return self._on_device(out)

    def _expected_at(self, positions: np.ndarray, changed: dict[str, Any]) -> dict[str, Any]:
        """An elementwise problem's outputs for a set that differs from set 0 at
        `positions` only: set 0's outputs, with the reference run on those elements."""
        there = self.problem.reference.reference(dict(changed), dict(self.params))
        expected: dict[str, Any] = {}
        for arg in self.problem.outputs:
            full = np.array(self.sets[0].expected[arg.name], copy=True)
            full.reshape(-1)[positions] = np.asarray(there[arg.name]).reshape(-1)
            full.flags.writeable = False
            expected[arg.name] = full
        return expected

    def _on_device(self, input_set: InputSet) -> InputSet:
        if self.ops.on_gpu:
            import cupy

            for arg in self.problem.outputs:
                # Already there for a case that lives on the GPU (no copy then).
                ref = input_set.expected[arg.name]
                if isinstance(ref, np.ndarray):
                    ref = np.ascontiguousarray(ref)
                input_set.expected_on_device[arg.name] = cupy.asarray(ref)
        return input_set

    def _buffers(self) -> _Buffers:
        prepared = prepare(self.problem, self.case, self.ops, 0, host=self.sets[0].host)
        flat = {
            a.name: self.ops.flat(prepared.device[a.name])
            for a in self.problem.args
            if a.role in ("in", "inout")
        }
        return _Buffers(prepared, flat)

    # ------------------------------------------------------------ the hooks

    def before_rep(self) -> None:
        """Move another input set into the next buffers and poison their outputs."""
        if self.closed:
            raise RuntimeError("the rotation ended with the re-check")
        b = self.launches % len(self.buffers)
        buffers = self.buffers[b]
        others = [k for k in range(len(self.sets)) if k != buffers.holds]
        k = others[int(self.schedule.integers(len(others)))]
        old, new = self.sets[buffers.holds], self.sets[k]
        ops, prepared = self.ops, buffers.prepared
        for i, arg in enumerate(self.problem.args):
            if arg.role == "in":
                flat = buffers.flat[arg.name]
                if old.index:
                    ops.put(flat, old.positions[arg.name], old.undo[arg.name])
                if new.index:
                    ops.put(flat, new.positions[arg.name], new.values[arg.name])
            elif arg.role == "inout":
                prepared.device[arg.name][...] = self.inout_base[arg.name]
                if new.index:
                    ops.put(buffers.flat[arg.name], new.positions[arg.name], new.values[arg.name])
            elif arg.role == "scalar":
                prepared.args[i] = scalar(new.host[arg.name], arg.dtype)
        for name in prepared.zero_init:
            ops.fill(prepared.device[name], 0)
        for name in prepared.poisoned:
            ops.fill(prepared.device[name], self.poison[name])
        buffers.holds = k
        prepared.host_inputs = new.host
        self.current = (b, k)

    def launch(self) -> None:
        self.launch_fn(self.buffers[self.current[0]].prepared.args)

    def after_rep(self, timed: bool, elapsed_us: float | None) -> None:
        """Check this repetition's output (all on the GPU, a random share on the CPU)."""
        self.launches += 1
        if timed:
            self.timed += 1
        else:
            self.warmups += 1
        label = f"timed repetition {self.timed}" if timed else f"warm-up repetition {self.warmups}"
        b, k = self.current
        if self.ops.on_gpu:
            self._enqueue_check(label, b, k)
            return
        if elapsed_us is not None:
            self.kernel_us += elapsed_us
        # Drawn now, after the launch has returned: the kernel could not know it.
        if timed and self.schedule.random() >= self.check_share():
            return
        started = time.perf_counter()
        self._check_now(label, b, k)
        took = (time.perf_counter() - started) * 1e6
        # The cheapest check seen: the first one also compiles the checker.
        self.check_us = took if self.check_us <= 0 else min(self.check_us, took)

    def check_share(self) -> float:
        """On the CPU: every repetition while a check costs less than a launch, else fewer."""
        if self.check_us <= 0 or self.launches == 0:
            return 1.0
        per_launch = self.kernel_us / self.launches
        return float(min(1.0, max(MIN_CHECK_SHARE, per_launch / self.check_us)))

    def _check_now(self, label: str, b: int, k: int) -> None:
        prepared = self.buffers[b].prepared
        self.checked += 1
        for arg in self.problem.outputs:
            got = prepared.device[arg.name]
            expected = self.sets[k].expected[arg.name]
            tol = self.problem.tolerance[arg.dtype]
            bad, _unwritten, _first = repcheck.count_on_host(got, expected, tol)
            if bad:
                worded = compare(arg.name, np.asarray(got), expected, tol)
                worded["output"] = arg.name
                raise RepetitionFailed(self._failed(label, k, worded))

    def _enqueue_check(self, label: str, b: int, k: int) -> None:
        prepared = self.buffers[b].prepared
        self.checked += 1
        for arg in self.problem.outputs:
            got = self.ops.as_cupy(prepared.device[arg.name])
            expected = self.sets[k].expected_on_device[arg.name]
            tol = self.problem.tolerance[arg.dtype]
            counts = repcheck.count_on_device(got, expected, tol)
            self.pending.append((label, k, arg.name, counts))

    def failure(self) -> CaseCheck | None:
        """After the timing loop: the first checked repetition whose output was wrong."""
        if not self.pending:
            return None
        import cupy

        packed = cupy.stack([c for _, _, _, c in self.pending]).get()
        for (label, k, name, _), value in zip(self.pending, packed.tolist(), strict=True):
            bad, unwritten = repcheck.decode(int(value))
            if bad:
                size = int(self.sets[k].expected[name].size)
                never = f", {unwritten} of them never written (still poisoned)" if unwritten else ""
                message = f"{name}: {bad} of {size} elements outside the tolerance{never}"
                details = {"ok": False, "output": name, "mismatches": bad, "message": message}
                return self._failed(label, k, details)
        return None

    def _failed(self, label: str, k: int, details: dict[str, Any]) -> CaseCheck:
        details = dict(details)
        inner = details.pop("message", None) or "wrong output"
        details["message"] = (
            f"the output of {label} (input set {k + 1} of {len(self.sets)}) was wrong: {inner}"
        )
        return CaseCheck(name=f"{self.case.name} ({label})", params=self.case.params, **details)

    # ------------------------------------------------------------ after the loop

    def describe(self, stage: TimingStage) -> None:
        """Record on the timing stage what the harness did around the repetitions."""
        stage.input_sets = len(self.sets)
        stage.buffer_sets = len(self.buffers)
        stage.checked_reps = self.checked
        if self.ops.on_gpu:
            stage.checked_policy = "every repetition, on the device"
        else:
            share = self.check_share()
            stage.checked_policy = (
                "every repetition"
                if share >= 1.0
                else f"a random {share:.0%} of timed repetitions, drawn after each ran"
            )

    def last_launch(self) -> tuple[PreparedCase, dict[str, Any]]:
        """The buffers of the last launch and the reference outputs of the set they held."""
        b, k = self.current
        return self.buffers[b].prepared, self.sets[k].expected

    def load_fresh(self, fresh: dict[str, Any], seed: int) -> PreparedCase:
        """The first buffers, holding `fresh` inputs (the re-check), outputs poisoned."""
        buffers = self.buffers[0]
        prepared, ops = buffers.prepared, self.ops
        for i, arg in enumerate(self.problem.args):
            if arg.role in ("in", "inout"):
                ops.copy_from_host(prepared.device[arg.name], fresh[arg.name])
            elif arg.role == "scalar":
                prepared.args[i] = scalar(fresh[arg.name], arg.dtype)
        prepared.host_inputs = fresh
        prepared.seed = seed
        self.closed = True  # the buffers hold no input set any more
        reset_outputs(prepared, ops, self.problem)
        return prepared
