"""`kplay`: the terminal front door: run, problems, check-problem, calibrate, config, serve,
worker and book."""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import date
from pathlib import Path

from kplay.accountcli import add_parsers as add_account_parsers
from kplay.app import format as fmt
from kplay.kernels.problem import SUFFIXES, backend_for_path

EXIT_BAD_INPUT = 2


def _fail(message: str) -> int:
    print(f"kplay: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def render_result(result) -> str:  # type: ignore[no-untyped-def]
    """A readable summary of a RunResult: the verdict first, then the few numbers."""
    lines = [f"{result.state.value.upper():<14} {result.message or ''}".rstrip()]
    comp = result.compile
    if comp is not None:
        for d in comp.diagnostics[:10]:
            where = f"line {d.line}: " if d.line else ""
            lines.append(f"  {d.severity}: {where}{d.message}")
        for r in comp.resources:
            lines.append(
                f"  resources {r.kernel or ''}: {r.registers} registers, "
                f"{r.shared_bytes} B shared, {r.stack_frame_bytes} B stack, "
                f"spills {r.spill_stores_bytes}/{r.spill_loads_bytes} B"
            )
    if result.check is not None:
        for case in result.check.cases:
            mark = "ok " if case.ok else "BAD"
            err = f"max abs err {case.max_abs_err:.2e}" if case.max_abs_err is not None else ""
            lines.append(f"  [{mark}] {case.name:<28} {case.message or err}")
            if case.grid:
                lines.extend(f"        {row}" for row in case.grid.splitlines())
        if result.check.message:
            lines.append(f"  note: {result.check.message}")
    t = result.timing
    if t is not None and t.timed:
        lines.append(
            f"  time  median {fmt.duration_us(t.median_us)}  IQR {fmt.duration_us(t.iqr_us)}  "
            f"mean {fmt.duration_us(t.mean_us)} ± {fmt.duration_us(t.stderr_us)}  "
            f"({t.reps} reps, {t.case})"
        )
    elif t is not None:
        lines.append(f"  untimed: {t.untimed_reason}")
    r = result.roofline
    if r is not None:
        lines.append(
            f"  roofline  {fmt.rate(r.achieved_flops_per_s, 'FLOP/s')}  "
            f"{fmt.rate(r.achieved_bytes_per_s, 'B/s')}  intensity "
            f"{r.intensity_flops_per_byte:.3g} FLOP/B  {r.note}  "
            f"{r.percent_of_roofline:.1f}% of roofline ({r.ceilings_source} ceilings, {r.device})"
        )
        if r.speedup_over_baseline:
            lines.append(f"  speedup over baseline: {r.speedup_over_baseline:.2f}x")
    if result.system is not None:
        lines.append(f"  ran on: {result.system.device} ({result.system.kind})")
    lines += _printed(result.output_tail)
    return "\n".join(lines)


PRINTED_LINES = 20  # the end of what the kernel printed, shown under the verdict


def _printed(tail: str | None) -> list[str]:
    """The last lines the kernel (or its compiler) printed, indented under a heading."""
    if not tail or not tail.strip():
        return []
    shown = tail.rstrip("\n").splitlines()
    head = (
        f"  printed (last {PRINTED_LINES} of {len(shown)} lines):"
        if len(shown) > PRINTED_LINES
        else "  printed:"
    )
    return [head, *(f"    {line}" for line in shown[-PRINTED_LINES:])]


# `kplay run`'s exit status: 0 correct, 3 compiled but not checked (nothing known of its
# correctness: no GPU for CUDA C++, or --mode compile), 1 anything else (wrong, errors,
# timeout, a time beyond the device); 2 a bad command line or file (EXIT_BAD_INPUT).
EXIT_CORRECT, EXIT_FAILED, EXIT_NOT_CHECKED = 0, 1, 3


def exit_code(state) -> int:  # type: ignore[no-untyped-def]
    from kplay.kernels.models import RunState

    if state is RunState.done:
        return EXIT_CORRECT
    return EXIT_NOT_CHECKED if state is RunState.compiled else EXIT_FAILED


def cmd_run(args: argparse.Namespace) -> int:
    from kplay.kernels.catalog import get_problem
    from kplay.kernels.models import RunJob

    path = Path(args.file)
    if not path.is_file():
        return _fail(f"no such file: {path}")
    try:
        source = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        return _fail(f"cannot read {path}: {exc}")
    try:
        problem = get_problem(args.problem)
    except KeyError as exc:
        return _fail(str(exc.args[0]))
    backend = args.backend or backend_for_path(path)
    if backend is None:
        if path.suffix == ".py" and len([b for b in problem.backends if b != "cuda"]) == 1:
            backend = next(b for b in problem.backends if b != "cuda")
        else:
            names = ", ".join(f"{k} ({v})" for k, v in SUFFIXES.items())
            return _fail(
                f"cannot tell the backend from {path.name}; pass --backend (one of {names})"
            )
    if backend not in problem.backends:
        return _fail(
            f"problem {problem.slug!r} offers {', '.join(problem.backends)}; not {backend!r}"
        )
    if args.profile:
        return _profile(args, path, source)
    job = RunJob(
        problem=problem.slug,
        backend=backend,
        source=source,
        mode=args.mode,
        seed=args.seed,
        benchmark=args.benchmark,
    )
    result = _run_isolated(job, args.timeout, quiet=args.json, profiled=args.under_profiler)
    if args.json:
        print(result.model_dump_json(indent=2))
    else:
        print(render_result(result))
    return exit_code(result.state)


def _profile(args: argparse.Namespace, path: Path, source: str) -> int:
    """The same full run under Nsight Compute; prints the profile of the benchmark launch."""
    from kplay.kernels.ncuprofile import stall_table
    from kplay.kernels.ncurun import ProfileError, take_profile

    report = Path(args.report or path.with_suffix(".ncu-rep").name).resolve()
    argv = [str(path), "--problem", args.problem, "--timeout", str(args.timeout), "--json"]
    argv.append("--under-profiler")
    if args.backend:
        argv += ["--backend", args.backend]
    command = [sys.executable, "-c", "import sys; from kplay.cli import main; sys.exit(main())"]
    try:
        prof, printed = take_profile([*command, "run", *argv], report, args.timeout * 4)
    except ProfileError as exc:
        return _fail(f"profile: {exc}")
    try:
        run = json.loads(printed)
        print(f"run: {run.get('state')}: {run.get('message') or ''}".strip())
    except ValueError:
        pass
    if args.json:
        print(json.dumps(prof.as_dict(), indent=2))
        return 0
    print(f"{prof.kernel}  grid {prof.grid}  block {prof.block}  {prof.duration_ms} ms")
    print("speed of light: " + ", ".join(f"{k} {v:.1f}%" for k, v in prof.speed_of_light.items()))
    print("memory: " + ", ".join(f"{k} {v:,.0f}" for k, v in prof.memory.items()))
    print("occupancy: " + ", ".join(f"{k} {v:g}" for k, v in prof.occupancy.items()))
    print("top stalls (cycles per issued instruction):")
    for stall in prof.stalls[:5]:
        print(f"  {stall['reason']:<14} {stall['cycles_per_issue']:.2f}  {stall['words']}")
    print("your lines by stall samples:")
    for row in stall_table(prof, source):
        print("  " + row)
    for advice in prof.advice[:3]:
        print(f"ncu: {advice['text'][:300]}")
    print(f"report (open in Nsight Compute): {report}")
    return 0


def _run_isolated(job, timeout: float, quiet: bool, profiled: bool = False):  # type: ignore[no-untyped-def]
    from kplay.workers.limits import Limits
    from kplay.workers.profilebox import PROFILER_ENV
    from kplay.workers.runner import WorkerPool

    def progress(event) -> None:  # type: ignore[no-untyped-def]
        if not quiet:
            print(
                f"  … {event.state.value}{': ' + event.detail if event.detail else ''}",
                file=sys.stderr,
            )

    passed = [n for n in os.environ if profiled and n.startswith(PROFILER_ENV)]
    limits = Limits(wall_timeout_s=timeout, pass_env=passed)
    pool = WorkerPool(size=1, limits=limits, warm=False)
    try:
        return pool.run(job, on_event=progress)
    finally:
        pool.close()


def cmd_problems(args: argparse.Namespace) -> int:
    from kplay.kernels.catalog import ProblemLoadError, load_catalog

    try:
        catalog = load_catalog()
    except ProblemLoadError as exc:
        return _fail(str(exc))
    if args.json:
        print(json.dumps({k: v.public_dict() for k, v in catalog.items()}, indent=2))
        return 0
    rows = [("problem", "backends", "title")]
    rows += [(slug, ", ".join(spec.backends), spec.title) for slug, spec in catalog.items()]
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    for slug, backends, title in rows:  # the title last: a long one cannot push a column
        print(f"{slug:<{widths[0]}}  {backends:<{widths[1]}}  {title}")
    return 0


def cmd_check_problem(args: argparse.Namespace) -> int:
    from kplay.kernels.problemcheck import check_problem

    report = check_problem(args.problem)
    print("\n".join(report.lines))
    return 0 if report.ok else 1


def cmd_calibrate(args: argparse.Namespace) -> int:
    from kplay.kernels.calibrate import calibrate
    from kplay.kernels.roofline import ceilings_path

    for c in calibrate(args.kind):
        print(f"{c.device} ({c.kind}), saved to {ceilings_path(c.device)}")
        for field in ("copy_bytes_per_s", "read_bytes_per_s"):
            print(f"  {field:<22} {fmt.rate(getattr(c, field), 'B/s')}")
        for field in (
            "fp32_flops_per_s",
            "fp16_tc_flops_per_s",
            "bf16_tc_flops_per_s",
            "tf32_tc_flops_per_s",
        ):
            if getattr(c, field):
                print(f"  {field:<22} {fmt.rate(getattr(c, field), 'FLOP/s')}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from kplay.app.main import serve
    from kplay.config import Settings

    overrides = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    settings = Settings(**overrides)
    if settings.broker_url:
        # The distributed mode trusts no verdict it cannot check: refuse before serving.
        from kplay.workers.signing import MissingResultKey, result_key

        try:
            result_key(settings)
        except MissingResultKey as exc:
            return _fail(str(exc))
    serve(settings)
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from kplay import configview

    if args.markdown:
        print(configview.settings_block())
        return 0
    try:
        rows = configview.effective_rows()
    except ValidationError as exc:
        return _fail(f"bad setting:\n{configview.describe_error(exc)}")
    print(configview.render_json(rows) if args.json else configview.render_text(rows))
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from kplay.workers.fleet_main import main as worker_main

    return worker_main(args)


def cmd_book(args: argparse.Namespace) -> int:
    from kplay.app.bookbuild import build_book

    if not (args.html or args.epub or args.pdf):
        return _fail("book build: give --html DIR, --epub FILE and/or --pdf FILE")
    html, epub, pdf = (Path(p) if p else None for p in (args.html, args.epub, args.pdf))
    try:
        when = args.date.isoformat() if args.date else None
        done = build_book(html, epub, pdf, args.playground_url, when, args.commit)
    except (ValueError, OSError) as exc:  # a broken chapter or problem, an unwritable path
        return _fail(str(exc))
    print("\n".join(done))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kplay", description="Kernel Playground")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run",
        help="check and time a kernel file against a problem",
        epilog="exit status: 0 correct, 1 not (wrong, an error, a timeout), 3 compiled but "
        "not checked (CUDA C++ without a GPU, or --mode compile)",
    )
    run.add_argument("file")
    run.add_argument("--problem", required=True)
    run.add_argument("--backend", choices=list(SUFFIXES))
    run.add_argument("--json", action="store_true", help="print the RunResult as JSON")
    run.add_argument("--mode", choices=["full", "check", "compile"], default="full")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument(
        "--benchmark", metavar="NAME", help="benchmark case to time (default: the problem's first)"
    )
    run.add_argument("--timeout", type=float, default=120.0, help="wall-clock limit, seconds")
    run.add_argument(
        "--profile", action="store_true", help="profile the benchmark launch with Nsight Compute"
    )
    run.add_argument("--under-profiler", action="store_true", help=argparse.SUPPRESS)
    run.add_argument("--report", help="where --profile keeps the .ncu-rep (default: FILE's stem)")
    run.set_defaults(func=cmd_run)
    problems = sub.add_parser("problems", help="list the problem catalog")
    problems.add_argument("--json", action="store_true")
    problems.set_defaults(func=cmd_problems)
    check = sub.add_parser(
        "check-problem",
        help="load one problem, run its generator and reference, check names, shapes, dtypes",
        epilog="exit status: 0 the problem is sound, 1 not",
    )
    check.add_argument("problem", help="a slug (also under KPLAY_EXTRA_PROBLEMS) or a folder")
    check.set_defaults(func=cmd_check_problem)
    cal = sub.add_parser("calibrate", help="measure this machine's ceilings and cache them")
    cal.add_argument("--kind", choices=["auto", "gpu", "cpu"], default="auto")
    cal.set_defaults(func=cmd_calibrate)
    serve = sub.add_parser("serve", help="serve the book (embedded mode by default)")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.set_defaults(func=cmd_serve)
    config = sub.add_parser(
        "config", help="print the effective settings and where each value came from"
    )
    shape = config.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="one object per setting")
    shape.add_argument(
        "--markdown", action="store_true", help="the table of every setting, for docs/settings.md"
    )
    config.set_defaults(func=cmd_config)
    worker = sub.add_parser("worker", help="run GPU/CPU workers for the distributed mode")
    worker.add_argument("--queues", help="comma-separated queues (default: detected)")
    worker.add_argument("--gpus", help="comma-separated device ids (default: all)")
    worker.add_argument("--cpu-only", action="store_true")
    worker.set_defaults(func=cmd_worker)
    book = sub.add_parser("book", help="the book as files")
    book_sub = book.add_subparsers(dest="book_command", required=True)
    build = book_sub.add_parser(
        "build", help="a static site (--html), an EPUB 3 (--epub), a PDF (--pdf)"
    )
    build.add_argument("--html", metavar="DIR", help="write the static site into DIR")
    build.add_argument("--epub", metavar="FILE", help="write the EPUB 3 file FILE")
    build.add_argument("--pdf", metavar="FILE", help="write the PDF file FILE")
    build.add_argument("--playground-url", default="http://127.0.0.1:8000", metavar="URL")
    build.add_argument("--date", type=date.fromisoformat, help="YYYY-MM-DD (default: today)")
    build.add_argument("--commit", help="the commit the edition names (default: git's HEAD)")
    build.set_defaults(func=cmd_book)
    add_account_parsers(sub)  # login, whoami, admin create-user
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
