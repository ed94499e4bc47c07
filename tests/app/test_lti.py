"""LTI 1.3 against a real LMS served on a local port (tests/app/lti_platform.py): the platform
registered with `kplay admin add-lti-platform`, the tool's key at /lti/jwks, the login and
launch through pylti1p3 landing signed in on the chapter, each way a launch is refused (a
forged signature, an unknown issuer, a replayed or foreign nonce, an unknown deployment), and
a graded hand-in's score posted to the LMS's line item."""

from __future__ import annotations

import html
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from kplay.app.db.models import User
from kplay.app.db.ssomodels import LtiGradeLink, LtiToolKey
from kplay.app.services.accounts import Accounts, viewer_of
from kplay.app.services.assignments import Assignments
from kplay.app.services.cohorts import Cohorts
from kplay.app.services.runs import RunRequest
from kplay.cli import main
from tests.app.lti_platform import INSTRUCTOR, Lms, _key, form_of, running_lms
from tests.app.test_accounts import GOOD, PASSWORD

CHAPTER = "/book/p1/first-kernel-cpu"
EXERCISE = GOOD["cell"]


@pytest.fixture
def lms(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lms]:
    """A running LMS, registered in the app's database through the admin command."""
    monkeypatch.setenv("KPLAY_DATABASE_URL", sqlite_url)
    with running_lms() as platform:
        argv = ["admin", "add-lti-platform", "--issuer", platform.issuer]
        argv += ["--client-id", platform.client_id, "--deployment-id", platform.deployment_id]
        argv += ["--auth-login-url", f"{platform.issuer}/auth"]
        argv += ["--auth-token-url", f"{platform.issuer}/token"]
        argv += ["--key-set-url", f"{platform.issuer}/jwks"]
        assert main(argv) == 0
        platform.custom = {"chapter": "first-kernel-cpu", "exercise": EXERCISE}
        yield platform


def launch(client: TestClient, lms: Lms, login_by_post: bool = False) -> httpx.Response:
    """The LMS's third-party login, the browser's trip to its auth URL, and the form post."""
    params = {"iss": lms.issuer, "login_hint": "hint-7", "target_link_uri": CHAPTER}
    params["client_id"] = lms.client_id
    if login_by_post:
        to_lms = client.post("/lti/login", data=params, follow_redirects=False)
    else:
        to_lms = client.get("/lti/login?" + urlencode(params), follow_redirects=False)
    assert to_lms.status_code == 302, html.unescape(to_lms.text)
    page = httpx.get(to_lms.headers["location"], timeout=10)
    assert page.status_code == 200, page.text
    action, fields = form_of(page.text)
    assert action == "http://testserver/lti/launch"
    return client.post("/lti/launch", data=fields, follow_redirects=False)


def said(reply: httpx.Response) -> str:
    return html.unescape(reply.text)


def me(client: TestClient) -> dict[str, object]:
    return dict(client.get("/api/v1/account").json())


def test_the_tool_publishes_its_key_and_keeps_the_private_half(
    lms: Lms, client: TestClient
) -> None:
    keys = client.get("/lti/jwks").json()["keys"]
    assert len(keys) == 1 and keys[0]["kty"] == "RSA" and keys[0]["alg"] == "RS256"
    assert "d" not in keys[0] and "p" not in keys[0]  # public numbers only
    db = client.app.state.services.db  # type: ignore[attr-defined]
    with db.session() as s:
        (stored,) = s.scalars(select(LtiToolKey))
    assert stored.kid == keys[0]["kid"] and "PRIVATE KEY" in stored.private_pem


def test_a_launch_signs_in_and_lands_on_the_chapter(lms: Lms, client: TestClient) -> None:
    reply = launch(client, lms)
    assert reply.status_code == 303, said(reply)
    assert reply.headers["location"] == CHAPTER
    assert me(client) == {
        "signed_in": True,
        "email": "grace@school.example",
        "display_name": "Grace H",
        "role": "learner",
    }
    assert client.get(CHAPTER).status_code == 200
    db = client.app.state.services.db  # type: ignore[attr-defined]
    with db.session() as s:
        link = s.scalar(select(LtiGradeLink))
    assert link is not None and (link.exercise, link.lineitem) == (EXERCISE, lms.lineitem)
    # The same nonce never signs in twice: posting the launch again is refused.
    again = client.post("/lti/launch", data=_last_form(client, lms), follow_redirects=False)
    assert again.status_code == 403 and "nonce" in said(again)


def _last_form(client: TestClient, lms: Lms) -> dict[str, str]:
    """A fresh login's form, whose nonce is then spent by one launch."""
    params = {"iss": lms.issuer, "login_hint": "hint-7", "client_id": lms.client_id}
    to_lms = client.get("/lti/login?" + urlencode(params), follow_redirects=False)
    _, fields = form_of(httpx.get(to_lms.headers["location"], timeout=10).text)
    assert client.post("/lti/launch", data=fields, follow_redirects=False).status_code == 303
    return fields


def test_an_instructor_launch_by_target_link_makes_an_instructor(
    lms: Lms, client: TestClient
) -> None:
    lms.custom, lms.roles = {}, [INSTRUCTOR]
    reply = launch(client, lms, login_by_post=True)
    assert reply.status_code == 303 and reply.headers["location"] == CHAPTER, said(reply)
    assert me(client)["role"] == "instructor"


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ("signature", "signature does not verify with the keys of"),
        ("issuer", "no LTI platform is registered with issuer 'https://other-lms.example'"),
        ("nonce", "nonce was not issued by this tool's login"),
        ("deployment", "deployment 'dep-unknown' of"),
    ],
)
def test_a_bad_launch_is_refused_with_its_reason(
    lms: Lms, client: TestClient, change: str, words: str
) -> None:
    if change == "signature":
        lms.sign_with = _key()  # the same key id, another key
    elif change == "issuer":
        lms.tamper = {"iss": "https://other-lms.example"}
    elif change == "nonce":
        lms.tamper = {"nonce": "a-nonce-this-tool-never-issued"}
    else:
        lms.tamper = {"https://purl.imsglobal.org/spec/lti/claim/deployment_id": "dep-unknown"}
    reply = launch(client, lms)
    assert reply.status_code == 403
    assert "this LTI launch is refused" in said(reply) and words in said(reply)
    assert me(client)["signed_in"] is False


def test_a_launch_from_another_browser_and_a_bad_login_are_refused(
    lms: Lms, client: TestClient
) -> None:
    params = {"iss": lms.issuer, "login_hint": "hint-7", "client_id": lms.client_id}
    to_lms = client.get("/lti/login?" + urlencode(params), follow_redirects=False)
    _, fields = form_of(httpx.get(to_lms.headers["location"], timeout=10).text)
    with TestClient(client.app) as stranger:
        reply = stranger.post("/lti/launch", data=fields, follow_redirects=False)
    assert reply.status_code == 403 and "state does not match" in said(reply)
    unknown = client.get("/lti/login?" + urlencode({**params, "iss": "https://x.example"}))
    assert unknown.status_code == 400
    assert "no LTI platform is registered with issuer 'https://x.example'" in said(unknown)
    no_hint = client.get("/lti/login?" + urlencode({"iss": lms.issuer}))
    assert no_hint.status_code == 400 and "login_hint" in said(no_hint)
    missing = client.get("/lti/login")
    assert missing.status_code == 400 and "names no issuer" in said(missing)


def test_a_graded_hand_in_posts_its_score_to_the_lms(lms: Lms, client: TestClient) -> None:
    lms.tool_jwks = client.get("/lti/jwks").json()
    assert launch(client, lms).status_code == 303
    app = client.app
    db = app.state.services.db  # type: ignore[attr-defined]
    runs = app.state.services.runs  # type: ignore[attr-defined]
    with db.session() as s:
        grace = s.scalar(select(User).where(User.email == "grace@school.example"))
    assert grace is not None
    teacher = viewer_of(Accounts(db).create("t@example.org", PASSWORD, "T", "instructor"))
    cohort = Cohorts(db).create(teacher, "LMS course")
    learner = viewer_of(grace)
    Cohorts(db).join(learner, cohort.join_code or "")
    work = Assignments(runs)
    deadline = datetime.now(UTC) + timedelta(days=1)
    aid = work.create(teacher, cohort.id, "Week 1", [EXERCISE], deadline).id
    run = runs.create(
        RunRequest(GOOD["problem"], GOOD["backend"], GOOD["source"], cell=EXERCISE), str(learner)
    )
    done = work.submit(learner, aid, EXERCISE, run.id)
    assert done.state == "graded" and done.score is not None
    deadline_s = time.monotonic() + 20  # the score goes out on a thread: wait for its record
    while _posted(db) is None and time.monotonic() < deadline_s:
        time.sleep(0.05)
    assert lms.refusals == []
    (score,) = lms.scores
    assert score["userId"] == "lms-user-7" and score["scoreMaximum"] == 100
    assert score["scoreGiven"] == pytest.approx(min(done.score, 100.0))
    assert score["activityProgress"] == "Completed" and score["gradingProgress"] == "FullyGraded"
    assert _posted(db) == score["scoreGiven"]


def _posted(db: object) -> float | None:
    with db.session() as s:  # type: ignore[attr-defined]
        return s.scalar(select(LtiGradeLink.last_posted))  # type: ignore[no-any-return]


def test_add_lti_platform_refuses_bad_input(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KPLAY_DATABASE_URL", sqlite_url)
    base = ["admin", "add-lti-platform", "--issuer", "https://lms.example", "--client-id", "c"]
    base += ["--auth-login-url", "https://lms.example/auth", "--deployment-id", "d1"]
    base += ["--auth-token-url", "https://lms.example/token"]
    assert main([*base, "--key-set-url", "lms.example/jwks"]) == 2
    assert "--key-set-url must be an absolute https:// URL" in capsys.readouterr().err
    assert main([*base, "--key-set-url", "https://lms.example/jwks"]) == 0
    assert main([*base, "--key-set-url", "https://lms.example/jwks", "--deployment-id", "d2"]) == 0
    assert main(["admin", "list-sso"]) == 0
    assert "lti https://lms.example (client c; deployments d1, d2)" in capsys.readouterr().out


def test_a_launch_never_signs_in_to_an_account_made_otherwise(lms: Lms, client: TestClient) -> None:
    db = client.app.state.services.db  # type: ignore[attr-defined]
    mine = Accounts(db).create("grace@school.example", PASSWORD, "Grace", "admin")
    lms.roles = [INSTRUCTOR]
    assert launch(client, lms).status_code == 303
    who = me(client)
    assert who["signed_in"] is True and who["role"] == "instructor"
    assert str(who["email"]).startswith("lti-") and str(who["email"]).endswith("@lti.invalid")
    again = Accounts(db).get(mine.id)
    assert again is not None and again.role == "admin"
