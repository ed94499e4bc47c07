"""Every route of the app, found by walking the app's own routing table (not a list someone keeps),
requested as an anonymous reader, learner A, learner B of another cohort, A's instructor and an
admin: no answer (body or headers) carries a marker its reader must not see, and none is a 500.

A route with a path parameter is requested with values from the classroom of
routesweep_world.py; a new route whose parameter has no value here fails the sweep, naming
the route, until the sweep is taught how to fill it. The routes that change something and act
on someone's object (a run, a cohort, an assignment, a prediction, a token) are sent as
learner B and anonymously, and must be refused without any row of the database changing."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from kplay.app.main import create_app
from kplay.config import Settings
from tests.app.conftest import TEST_SECRET_KEY
from tests.app.fakes import FakeExecutor
from tests.app.routesweep_world import (
    CASES,
    MARKERS,
    PREDICT,
    TRIAD,
    WHO,
    World,
    all_routes,
    build,
)
from tests.app.test_accounts import GOOD, csrf_of

# Routes the sweep does not request, each with why.
SKIP = {
    "/static": "files of the package, the same for everyone (a mount, no handler of ours)",
}
# /api/v1/runs/{run_id}/events is an event stream: it is swept, as every run of the world
# has finished (routesweep_world.build checks), so each stream ends after its last event.
# Routes that change something but act on no one else's object (the caller's own runs,
# predictions and answers, joining by a code one was given, signing in): not swept as refusals.
OWN_ACTIONS = {
    "/cells/{cell_id}/runs": "a new run of the caller's own",
    "/cells/{cell_id}/predicted-runs": "a new run of the caller's own",
    "/cells/{cell_id}/answers": "the caller's own answers",
    "/api/v1/cells/{cell_id}/predictions": "a new prediction of the caller's own",
    "/api/v1/cells/{cell_id}/answers": "the caller's own answers",
    "/join/{code}": "whoever has the code may join: that is what a code is for",
    "/lti/login": "a platform's sign-in step, with no account behind it yet",
}
# The objects a route's path parameter may name: someone's, or public.
OWNED = {"run_id", "cohort_id", "assignment_id", "prediction_id", "token_id", "exercise"}


def _values(w: World) -> dict[str, list[str]]:
    r = w.runs
    return {
        "run_id": [r["a"], r["a_graded"], r["b"], r["b_board"], r["c"]],
        "cell_id": [GOOD["cell"], PREDICT],
        "slug": ["vector_add"],
        "cohort_id": [str(w.cohort), str(w.other_cohort)],
        "assignment_id": [str(w.assignment)],
        "user_id": [str(w.users[u]) for u in ("a", "b", "c")],
        "prediction_id": [str(w.prediction)],
        "token": [w.share_token],
        "code": [w.code],
        "exercise": [GOOD["cell"]],
        "fmt": ["epub"],
        "path": ["kernels/check.py"],
        "name": ["example"],
        "token_id": [str(w.token_id)],
    }


# Per route, values that differ from the parameter's usual ones.
OVERRIDES = {
    "/book/{part}/{slug}": {"part": ["p1"], "slug": ["first-kernel-cpu"]},
    "/book/{slug}": {"slug": ["first-kernel-cpu"]},
}
# Per route, query strings to add ({name} from the world); the bare path is requested too.
QUERIES = {
    "/leaderboards/{slug}": ["?cohort={cohort}", "?cohort={other_cohort}"],
    "/api/v1/leaderboards/{slug}": ["?cohort={cohort}", "?cohort={other_cohort}"],
    "/cells/{cell_id}/compare": ["?run={a}&run={a_shared}", "?run={b}&run={b_board}"],
    "/search": ["?q=vector"],
    "/api/v1/search": ["?q=vector"],
    "/cohorts/{cohort_id}/dashboard/updates": ["?since=0&members=0123456789abcdef"],
}


def _query_values(w: World) -> dict[str, Any]:
    return {"cohort": w.cohort, "other_cohort": w.other_cohort, **w.runs}


def addresses(w: World, route: Any, only: dict[str, list[str]] | None = None) -> list[str]:
    """Every address to request for `route`: each combination of its parameters' values
    (those of `only` in place of the usual ones)."""
    path = route.path
    names = re.findall(r"{(\w+)(?::\w+)?}", path)
    values = {**_values(w), **OVERRIDES.get(path, {}), **(only or {})}
    missing = [n for n in names if n not in values]
    assert not missing, f"the sweep has no value for {missing} of route {path}: give it one"
    found = []
    for combo in itertools.product(*(values[n] for n in names)):
        shown = path
        for name, value in zip(names, combo, strict=True):
            shown = re.sub(r"{" + name + r"(?::\w+)?}", value, shown)
        found.append(shown)
        for query in QUERIES.get(path, []):
            found.append(shown + query.format(**_query_values(w)))
    return found


def swept(w: World, methods: set[str]) -> list[tuple[str, str, Any]]:
    routes = []
    for route in all_routes(w.app.routes):
        path = getattr(route, "path", "")
        if path in SKIP:
            continue
        for method in sorted((getattr(route, "methods", None) or set()) & methods):
            routes.append((method, path, route))
    return routes


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    url = f"sqlite:///{tmp_path_factory.mktemp('sweep') / 'kplay.sqlite3'}"
    app = create_app(Settings(database_url=url, secret_key=TEST_SECRET_KEY), FakeExecutor())
    with TestClient(app):
        w = build(app)
        try:
            yield w
        finally:
            for client in w.clients.values():
                client.close()


def leaks(who: str, address: str, reply: Any) -> list[str]:
    """The markers in `reply` that `who` must not read (one the address itself names is
    only the request echoed)."""
    seen = reply.text + "\n".join(f"{k}: {v}" for k, v in reply.headers.items())
    return [
        mark
        for mark, readers in MARKERS.items()
        if who not in readers and mark in seen and mark not in address
    ]


def test_every_route_is_swept_and_nothing_leaks(world: World) -> None:
    routes = swept(world, {"GET", "HEAD"})
    assert len(routes) > 40, "the walk found too few routes: did the routing change?"
    problems, read = [], set()
    for method, _path, route in routes:
        for address in addresses(world, route):
            for who in WHO:
                reply = world.clients[who].request(method, address, follow_redirects=False)
                if reply.status_code >= 500:
                    problems.append(f"{who} {method} {address}: {reply.status_code}")
                found = leaks(who, address, reply)
                if found:
                    problems.append(f"{who} {method} {address} ({reply.status_code}): {found}")
                read |= {(who, m) for m in MARKERS if m in reply.text}
    assert not problems, "\n".join(problems)
    # The markers do reach answers: each is read by someone allowed to, so their absence
    # elsewhere means something.
    unread = [
        m for m, readers in MARKERS.items() if readers and not {(w, m) for w in readers} & read
    ]
    assert not unread, f"no allowed reader saw {unread}: the world no longer shows them"


def test_learners_and_readers_get_no_teaching_views(world: World) -> None:
    """The instructor's views of a cohort (dashboard, a learner's page, the gradebook, the
    hidden cases) answer its learners and everyone else as a cohort that is not there."""
    teaching = [
        f"/cohorts/{world.cohort}/dashboard",
        f"/cohorts/{world.cohort}/gradebook.csv",
        f"/cohorts/{world.cohort}/learners/{world.users['a']}",
        f"/api/v1/assignments/{world.assignment}/hidden-cases",
    ]
    for who, path in itertools.product(("anonymous", "a", "b"), teaching):
        reply = world.clients[who].get(path, follow_redirects=False)
        assert reply.status_code in (303, 401, 403, 404), (who, path, reply.status_code)
    for path in teaching:
        assert world.clients["instructor"].get(path).status_code == 200, path


def _body(path: str, w: World) -> dict[str, Any]:
    """A request body good enough to reach the route's permission check."""
    if "hidden-cases" in path:
        return {"cases": CASES.replace("1009", "1011")}
    if "assignments" in path and "cohort" in path:
        return {"title": "Sneaky", "exercises": [GOOD["cell"]], "deadline": "2040-01-01"}
    if "submissions" in path:
        return {"exercise": GOOD["cell"], "run": w.runs["a"]}
    if path.endswith("/submit"):
        return {"exercise": GOOD["cell"], "run_id": w.runs["a"]}
    if "predictions" in path and path.endswith("/run"):
        return {"backend": "numba-cpu", "source": TRIAD}
    if "predictions" in path:
        return {"value": "99"}
    return {}


def _others(w: World) -> dict[str, list[str]]:
    """The objects of A, C and A's instructor, which B and an anonymous reader must not
    change (B's own cohort and runs are theirs to use)."""
    r = w.runs
    return {"run_id": [r["a"], r["a_graded"], r["c"]], "cohort_id": [str(w.cohort)]}


def test_others_objects_refuse_changes(world: World) -> None:
    """Every changing route on someone's object, as learner B and anonymously: refused, and
    no row of the database changes."""
    before, problems, tried = world.snapshot(), [], 0
    for method, path, route in swept(world, {"POST", "PUT", "PATCH", "DELETE"}):
        names = set(re.findall(r"{(\w+)(?::\w+)?}", path))
        if not names or path in OWN_ACTIONS:
            continue  # no one's object named: the caller's own, or a new one
        assert names & OWNED, f"{method} {path}: say whose object {names} names (OWNED)"
        for address, who in itertools.product(
            addresses(world, route, _others(world)), ("anonymous", "b")
        ):
            client, body, tried = world.clients[who], _body(path, world), tried + 1
            if path.startswith("/api/"):
                reply = client.request(method, address, json=body)
            else:  # the pages' forms, sent as the page's own script sends them
                form = {k: str(v) for k, v in body.items()}
                form["csrf"] = csrf_of(client, "/login" if who == "anonymous" else "/account")
                headers = {"HX-Request": "true"}
                reply = client.request(
                    method, address, data=form, headers=headers, follow_redirects=False
                )
            refused = reply.status_code in (401, 403, 404, 409, 422)
            to_log_in = reply.status_code == 303 and "/login" in reply.headers["location"]
            if not (refused or (who == "anonymous" and to_log_in)):
                problems.append(f"{who} {method} {address}: {reply.status_code}")
            elif reply.status_code == 403 and "own pages" in reply.text:
                problems.append(f"{who} {method} {address}: refused before its owner check")
    assert not problems, "\n".join(problems)
    assert tried > 30, "the sweep sent too few changes: did the routing change?"
    after = world.snapshot()
    changed = [t for t in before if before[t] != after.get(t)]
    assert not changed, f"refused requests changed {changed}"
