"""The FastAPI factory and `serve`. The lifespan owns the database and the executor."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from kplay.app.book import Book, BookError
from kplay.app.db.migrate import upgrade
from kplay.app.db.session import Database
from kplay.app.deps import Services
from kplay.app.executors import Reconciling, make_executor
from kplay.app.guards import PublicStaticFiles
from kplay.app.localmode import LocalMode
from kplay.app.render import STATIC_DIR, error_page, make_templates
from kplay.app.routers import accounts as account_routes
from kplay.app.routers import (
    api,
    compiler,
    dashboard,
    downloads,
    fleet,
    live,
    pages,
    runs_html,
    search,
    source,
)
from kplay.app.routers import catalog as problem_pages
from kplay.app.routers import cohorts as cohort_pages
from kplay.app.routers import cohorts_api as cohort_api
from kplay.app.routers import exercisekinds as exercise_routes
from kplay.app.routers import progress as progress_routes
from kplay.app.routers import shared as share_routes
from kplay.app.routers import sso as sso_routes
from kplay.app.services.live import LiveSink
from kplay.app.services.reconcile import Reconciler
from kplay.app.services.records import DatabaseSink, reconcile_interrupted
from kplay.app.services.runs import RunService
from kplay.app.web import install_guards
from kplay.config import Settings
from kplay.kernels.catalog import load_catalog
from kplay.workers.executor import Executor

log = logging.getLogger(__name__)

STOP_GRACE_S = 3


def _validation_message(exc: RequestValidationError) -> str:
    """Pydantic's error list as one sentence a person can act on."""
    parts = []
    for err in exc.errors():
        loc = [str(x) for x in err.get("loc", ()) if x != "body"]
        where = ".".join(loc)
        if err.get("type") == "json_invalid":
            return f"malformed JSON body: {err.get('ctx', {}).get('error', err.get('msg'))}"
        parts.append(f"{where}: {err.get('msg')}" if where else str(err.get("msg")))
    return "; ".join(parts) or "invalid request"


def _install_timing(app: FastAPI) -> None:
    # Server-Timing lets a browser's network panel (or a benchmark) see server time alone.
    @app.middleware("http")
    async def server_timing(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        started = time.perf_counter()
        response = await call_next(request)
        elapsed_ms = (time.perf_counter() - started) * 1000
        response.headers["Server-Timing"] = f"app;dur={elapsed_ms:.2f}"
        return response


def _install_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def validation(request: Request, exc: RequestValidationError) -> Response:
        message = _validation_message(exc)
        status = 400 if message.startswith("malformed JSON") else 422
        return JSONResponse({"detail": message}, status_code=status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if request.url.path.startswith(("/api/", "/static/")) or exc.status_code < 400:
            return JSONResponse(
                {"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers
            )
        return error_page(request, request.app.state.services, exc.status_code, str(exc.detail))

    @app.exception_handler(BookError)
    async def book_error(request: Request, exc: BookError) -> Response:
        log.error("book error: %s", exc)
        return error_page(request, request.app.state.services, 500, str(exc))


def create_app(
    settings: Settings | None = None,
    executor: Executor | None = None,
    announce: Callable[[str], None] | None = None,
) -> FastAPI:
    """The app; `announce` also gets the line that says whether children are sandboxed."""
    settings = settings or Settings()
    catalog = load_catalog()
    book = Book(settings.book_dir, catalog, settings.results_dir)
    book.index()  # a broken chapter stops the start, with its file and line
    services = Services(settings=settings, book=book, catalog=catalog, templates=make_templates())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        db = Database(settings.database_url)
        upgrade(db.engine)
        ex = executor if executor is not None else make_executor(settings)
        # Runs on workers elsewhere are asked after; runs of a local pool died with it.
        reconciler = (
            Reconciler(db, ex, settings.reconcile_interval_s, settings.reconcile_quiet_s)
            if isinstance(ex, Reconciling)
            else None
        )
        if reconciler is None:
            reconcile_interrupted(db)
        # The database first, then the pages following each run (app.services.live).
        ex.start(LiveSink(DatabaseSink(db), services.live))
        app.state.local_mode = mode = LocalMode(ex)
        _announce_sandbox(mode, announce)
        if reconciler is not None:
            reconciler.start()
        services.db, services.executor = db, ex
        services.runs = RunService(db, ex, catalog, book, settings)
        try:
            yield
        finally:
            services.live.close()
            if reconciler is not None:
                reconciler.stop()
            ex.stop()
            if reconciler is None:
                # In-process jobs died with the pool: say so now rather than at the next start.
                reconcile_interrupted(db)
            db.dispose()

    app = FastAPI(
        title="Kernel Playground",
        summary="Edit, check, time and place kernels on the roofline.",
        version="0.1.0",
        lifespan=lifespan,
        # The stock pages load Swagger UI from a CDN; /docs is served by the pages router.
        docs_url=None,
        redoc_url=None,
    )
    app.state.services = services
    app.mount("/static", PublicStaticFiles(directory=STATIC_DIR), name="static")
    app.include_router(pages.router)
    app.include_router(downloads.router)
    app.include_router(runs_html.router)
    app.include_router(api.router)
    app.include_router(live.router)
    app.include_router(fleet.router)
    app.include_router(search.router)
    app.include_router(compiler.router)
    app.include_router(source.router)
    app.include_router(problem_pages.router)
    app.include_router(share_routes.router)
    app.include_router(share_routes.api_router)
    app.include_router(account_routes.router)
    app.include_router(account_routes.api_router)
    app.include_router(progress_routes.router)
    app.include_router(progress_routes.api_router)
    app.include_router(cohort_pages.router)
    app.include_router(cohort_api.api_router)
    app.include_router(exercise_routes.router)
    app.include_router(exercise_routes.api_router)
    app.include_router(dashboard.router)
    sso_routes.install(app, services)  # /sso/* and /lti/*
    _install_handlers(app)
    install_guards(app, settings)
    _install_timing(app)
    return app


def _announce_sandbox(mode: LocalMode, announce: Callable[[str], None] | None) -> None:
    """Say at start whether learner code runs in the sandbox; loudly when it does not."""
    line = mode.announcement()
    if line is None:
        return
    if mode.active:
        log.warning("%s", line)
    else:
        log.info("%s", line)
    if announce is not None:
        announce(line)


def _print_line(line: str) -> None:
    print(f"kplay: {line}", flush=True)


def serve(settings: Settings | None = None) -> None:
    """Run the app with uvicorn (what `kplay serve` calls)."""
    import uvicorn

    settings = settings or Settings()
    logging.basicConfig(level=settings.log_level.upper())
    uvicorn.run(
        create_app(settings, announce=_print_line),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        # A stopping server waits for open responses, and a progress stream (app.routers.live)
        # stays open while its run is in flight: past this many seconds it is cut, and the
        # page falls back to polling until the server is back.
        timeout_graceful_shutdown=STOP_GRACE_S,
    )
