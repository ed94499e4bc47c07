"""Loading a learner's Python source as a module, and turning its errors into diagnostics.

The three Python backends (Numba on the CPU, Numba CUDA, Triton) share this. The source
is written to a real file because Triton reads a kernel's source with `inspect`, and
because tracebacks and Numba's messages then name a file and line the learner knows.
Every compile gets a fresh module under a unique name that is taken out of
`sys.modules` once it has run, so nothing leaks from one submission into the next.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import inspect
import re
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from kplay.kernels.backends.base import DeferredCompileError
from kplay.kernels.models import CompileStage, Diagnostic

# Lines of an error kept in a diagnostic; the whole text stays in the stage's log.
MAX_MESSAGE_LINES = 30
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass
class LoadedSource:
    module: ModuleType
    path: Path
    load_ms: float


# The learner's file is kplay_src.py: the evaluator recognises the learner's frames in a
# runtime error's traceback by this name.
SOURCE_STEM = "kplay_src"


def source_file(workdir: Path, stem: str = SOURCE_STEM) -> Path:
    """A file name not used yet in `workdir`: kplay_src.py, then kplay_src_1.py, ...

    A new name per compile keeps `linecache` (and so tracebacks and `inspect`) from
    showing the lines of an earlier submission.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / f"{stem}.py"
    n = 0
    while path.exists():
        n += 1
        path = workdir / f"{stem}_{n}.py"
    return path


def load_source(
    source: str, workdir: Path, compiler: str | None = None
) -> tuple[LoadedSource | None, CompileStage | None]:
    """Write `source` to a file in `workdir` and run it as a fresh module.

    Returns the module, or a failed stage whose diagnostics point into the source.
    """
    path = source_file(workdir)
    path.write_text(source, encoding="utf-8")
    name = f"kplay_learner_{uuid.uuid4().hex[:16]}"
    start = time.perf_counter()
    try:
        compile(source, str(path), "exec")
    except SyntaxError as exc:  # also IndentationError and TabError
        return None, syntax_error_stage(exc, compiler)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # pragma: no cover - a .py path always has a loader
        return None, failed_stage(f"could not load {path.name}", compiler=compiler)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and friends look the module up while it runs
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        return None, exception_stage(exc, path, "error while loading your source", compiler)
    finally:
        sys.modules.pop(name, None)
    return LoadedSource(module, path, (time.perf_counter() - start) * 1e3), None


# ---------------------------------------------------------------- stages


def failed_stage(
    message: str,
    line: int | None = None,
    column: int | None = None,
    log: str | None = None,
    compiler: str | None = None,
) -> CompileStage:
    diag = Diagnostic(line=line, column=column, message=message)
    return CompileStage(
        ok=False, log=log if log is not None else message, diagnostics=[diag], compiler=compiler
    )


def syntax_error_stage(exc: SyntaxError, compiler: str | None = None) -> CompileStage:
    kind = type(exc).__name__
    message = f"{kind}: {exc.msg}"
    where = f"line {exc.lineno}: " if exc.lineno else ""
    text = (exc.text or "").rstrip("\n")
    log = f"{where}{message}" + (f"\n    {text}" if text else "")
    return failed_stage(message, line=exc.lineno, column=exc.offset, log=log, compiler=compiler)


def exception_stage(
    exc: BaseException, path: Path, context: str, compiler: str | None = None
) -> CompileStage:
    """A failed stage for an exception raised by the learner's code or on its behalf."""
    line = traceback_line(exc, path) or line_in_text(str(exc), path)
    message = f"{type(exc).__name__}: {clean_message(str(exc))}".rstrip(": ")
    message = short_paths(message, path)
    log = f"{context}:\n" + learner_traceback(exc, path)
    return failed_stage(message, line=line, log=log, compiler=compiler)


def clean_message(text: str, max_lines: int = MAX_MESSAGE_LINES) -> str:
    """Strip colour codes and blank edges; keep the first `max_lines` lines."""
    lines = _ANSI.sub("", text).strip().splitlines()
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"... ({len(lines) - max_lines} more lines in the log)"]
    return "\n".join(lines)


def short_paths(text: str, path: Path) -> str:
    """Spell the learner's file by its name alone: the temporary folder means nothing to them."""
    return re.sub(rf"[^\s\"'(]*/{re.escape(path.name)}\b", path.name, text)


# ---------------------------------------------------------------- line numbers


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception, then its causes and contexts, each once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def traceback_line(exc: BaseException, path: Path) -> int | None:
    """The deepest line of the learner's file in the exception's traceback or its causes'.

    The innermost learner frame is where the mistake is, even when a library raised.
    """
    target = str(path)
    for link in exception_chain(exc):
        frames = traceback.extract_tb(link.__traceback__) if link.__traceback__ else []
        lines = [f.lineno for f in frames if f.filename == target and f.lineno]
        if lines:
            return lines[-1]
        if isinstance(link, SyntaxError) and link.filename == target and link.lineno:
            return link.lineno
    return None


def line_in_text(text: str, path: Path) -> int | None:
    """The first line number of the learner's file mentioned in an error message.

    Recognises `File "kplay_src.py", line 7`, `/dir/kplay_src.py (7)` (Numba) and
    `kplay_src.py:7:` (compilers and MLIR locations). The first mention wins: Numba
    names the innermost place first and the call sites that led there after it.
    """
    name = re.escape(path.name)
    patterns = (
        rf'File "(?:[^"]*/)?{name}", line (\d+)',
        rf"(?:\S*/)?{name} \((\d+)\)",
        rf'(?:\S*/)?{name}"?:(\d+)',
    )
    found: list[tuple[int, int]] = []
    for pattern in patterns:
        for m in re.finditer(pattern, text):
            found.append((m.start(), int(m.group(1))))
    return min(found)[1] if found else None


def line_from_compiler_frames(exc: BaseException, path: Path) -> int | None:
    """The learner's line that a compiler was working on when it raised.

    Some of Numba CUDA's errors lose their location on the way up (the exception's
    `loc` is reset, or an error class the pipeline does not annotate escapes it). The
    traceback still holds the compiler's frames, whose locals include the IR statement
    or typing constraint being handled; the innermost one in the learner's file wins.
    """
    target = str(path)
    for link in exception_chain(exc):
        frames = []
        tb = link.__traceback__
        while tb is not None:
            frames.append(tb.tb_frame)
            tb = tb.tb_next
        for frame in reversed(frames):
            for value in list(frame.f_locals.values()):
                if not type(value).__module__.startswith("numba"):
                    continue  # never touch attributes of the learner's own objects
                loc: Any = value if _is_loc(value) else getattr(value, "loc", None)
                if _is_loc(loc) and str(loc.filename) == target and loc.line:
                    return int(loc.line)
    return None


def _is_loc(value: Any) -> bool:
    """A Numba IR location (numba.core.ir.Loc or numba-cuda's copy of it)."""
    return all(hasattr(value, a) for a in ("filename", "line", "col", "strformat"))


def learner_traceback(exc: BaseException, path: Path) -> str:
    """The traceback text, cut down to the learner's frames where it passes through them."""
    te = traceback.TracebackException.from_exception(exc)
    seen: set[int] = set()
    pending: list[traceback.TracebackException | None] = [te]
    while pending:
        link = pending.pop()
        if link is None or id(link) in seen:
            continue
        seen.add(id(link))
        frames = list(link.stack)
        mine = [i for i, f in enumerate(frames) if f.filename == str(path)]
        if mine:  # from the learner's first frame to their last: the library's are noise
            link.stack = traceback.StackSummary.from_list(frames[mine[0] : mine[-1] + 1])
        pending += [link.__cause__, link.__context__]
    return _ANSI.sub("", "".join(te.format())).rstrip() or repr(exc)


# ---------------------------------------------------------------- the kernel object


def lookup(
    module: ModuleType, kernel_name: str, compiler: str | None = None
) -> tuple[Any, CompileStage | None]:
    """The module's attribute `kernel_name`, or a stage saying it is missing."""
    if not kernel_name.isidentifier():
        return None, failed_stage(f"{kernel_name!r} is not a valid Python name", compiler=compiler)
    if not hasattr(module, kernel_name):
        defined = sorted(
            n for n, v in vars(module).items() if not n.startswith("_") and _defined_here(v, module)
        )
        hint = f" (it defines: {', '.join(defined)})" if defined else ""
        return None, failed_stage(
            f"no function named {kernel_name} in your source{hint}", compiler=compiler
        )
    return getattr(module, kernel_name), None


def _defined_here(obj: Any, module: ModuleType) -> bool:
    fn = python_function(obj)
    return fn is not None and getattr(fn, "__module__", None) == module.__name__


def python_function(obj: Any) -> Any:
    """The plain Python function under a decorator's wrapper, if one can be found."""
    for _ in range(5):  # wrappers of wrappers (autotune over jit), never a cycle
        if inspect.isfunction(obj):
            return obj
        inner = None
        for attr in ("py_func", "fn", "__wrapped__"):
            inner = getattr(obj, attr, None)
            if inner is not None and inner is not obj:
                break
        if inner is None:
            return None
        obj = inner
    return obj if inspect.isfunction(obj) else None


def definition_line(obj: Any) -> int | None:
    fn = python_function(obj)
    code = getattr(fn, "__code__", None)
    return code.co_firstlineno if code is not None else None


def describe(obj: Any) -> str:
    """A short, learner-facing name for the kind of object found."""
    if inspect.isfunction(obj):
        return "a plain Python function"
    if inspect.isclass(obj):
        return f"a class ({obj.__name__})"
    if inspect.ismodule(obj):
        return f"a module ({obj.__name__})"
    kind = type(obj)
    return f"a {kind.__module__}.{kind.__qualname__} object"


def wrong_kind_stage(
    name: str, obj: Any, expected: str, compiler: str | None = None
) -> CompileStage:
    message = f"{name} is {describe(obj)}; {expected}"
    return failed_stage(message, line=definition_line(obj), compiler=compiler)


def parameter_names(obj: Any) -> list[str] | None:
    fn = python_function(obj)
    if fn is None:
        return None
    return list(inspect.signature(fn).parameters)


# ---------------------------------------------------------------- errors at the first launch


def deferred_error(
    exc: BaseException,
    path: Path,
    compiler: str | None,
    message: str | None = None,
    line: int | None = None,
    note: str | None = None,
) -> DeferredCompileError:
    """A DeferredCompileError for a lazy JIT's failure, pointing into the learner's file."""
    text = str(exc)
    if line is None:
        line = line_in_text(text, path) or traceback_line(exc, path)
    if message is None:
        message = f"{type(exc).__name__}: {clean_message(text)}"
    if note:
        message = f"{message}\n({note})"
    message = short_paths(message, path)
    if traceback_line(exc, path) is not None:
        log = learner_traceback(exc, path)
    else:  # the JIT's own frames would only distract: its message says it all
        log = f"{type(exc).__name__}: {_ANSI.sub('', text).strip()}"
    return DeferredCompileError(failed_stage(message, line=line, log=log, compiler=compiler))


def numba_error(
    exc: BaseException, path: Path, compiler: str | None, note: str | None = None
) -> DeferredCompileError:
    """A Numba typing or lowering failure, with its pipeline chatter trimmed.

    The message names the innermost offending line first; `exc.loc`, where typing
    stopped, is the fallback (for a call into a faulty helper it is the call).
    """
    line = line_in_text(str(exc), path)
    loc: Any = getattr(exc, "loc", None)  # where typing stopped: the call, for nested errors
    if line is None and _is_loc(loc) and str(loc.filename) == str(path):
        line = loc.line
    if line is None:
        line = line_from_compiler_frames(exc, path)
    kept = [
        ln
        for ln in _ANSI.sub("", str(exc)).splitlines()
        if not ln.startswith(("Failed in ", "During: "))
    ]
    message = f"{type(exc).__name__}: {clean_message(chr(10).join(kept))}"
    return deferred_error(exc, path, compiler, message=message, line=line, note=note)


KindCheck = Callable[[str, Any, str], "CompileStage | None"]


def load_kernel(
    source: str, kernel_name: str, workdir: Path, compiler: str, check_kind: KindCheck
) -> tuple[LoadedSource, Any] | CompileStage:
    """Load the learner's module, find `kernel_name` in it and check what kind of object it is.

    Every Python backend starts its compile() this way; a failed stage is returned as is.
    """
    loaded, failure = load_source(source, workdir, compiler)
    if failure is not None or loaded is None:
        return failure or failed_stage("could not load the source")
    obj, failure = lookup(loaded.module, kernel_name, compiler)
    if failure is None:
        failure = check_kind(kernel_name, obj, compiler)
    if failure is not None:
        return failure
    return loaded, obj


def version(dist: str) -> str | None:
    """An installed distribution's version, or None."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def learner_trace(exc: BaseException, limit: int = 6) -> str:
    """The exception and the frames that belong to the learner's file, not the harness."""
    frames = [
        f"  line {f.lineno}: {f.line}"
        for f in traceback.extract_tb(exc.__traceback__)
        if SOURCE_STEM in (f.filename or "") or (f.filename or "").endswith("kernel.cu")
    ]
    head = f"{type(exc).__name__}: {exc}".strip()
    return "\n".join([head, *frames[-limit:]])
