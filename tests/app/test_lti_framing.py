"""Framing of an LTI session's pages: after a launch from a registered LMS (the real local
platform of tests/app/lti_platform.py), the pages of that session may be framed by the LMS's
origins only (CSP frame-ancestors, no X-Frame-Options), and over https its session cookie is
SameSite=None, Secure and Partitioned; every other session and page keeps frame-ancestors
'none' and X-Frame-Options DENY."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest
from fastapi.testclient import TestClient

from kplay.app.guards import content_security_policy
from kplay.app.main import create_app
from kplay.config import Settings
from tests.app.lti_platform import CLAIM, Lms
from tests.app.test_lti import CHAPTER, launch, lms  # noqa: F401 - the registered LMS fixture

SCHOOL = "https://school.lms.example"
PAGES = (CHAPTER, "/", "/progress", "/problems")


def ancestors(reply: httpx.Response) -> str:
    policy = reply.headers["content-security-policy"]
    found = [p.strip() for p in policy.split(";") if p.strip().startswith("frame-ancestors")]
    assert len(found) == 1, policy
    return found[0].removeprefix("frame-ancestors").strip()


def session_cookie(reply: httpx.Response) -> str:
    found = [c for c in reply.headers.get_list("set-cookie") if c.startswith("kplay_session=")]
    assert found, reply.headers
    return found[-1].lower()


@pytest.fixture
def https_client(make_settings: Callable[..., Settings]) -> Iterator[TestClient]:
    with TestClient(create_app(make_settings()), base_url="https://testserver") as c:
        yield c


def test_pages_outside_an_lti_session_forbid_framing(client: TestClient) -> None:
    for path in PAGES:
        reply = client.get(path)
        assert reply.status_code == 200, path
        assert ancestors(reply) == "'none'" and reply.headers["x-frame-options"] == "DENY"


def test_an_lti_session_may_be_framed_by_its_lms_only(lms: Lms, client: TestClient) -> None:  # noqa: F811
    lms.user = {CLAIM + "launch_presentation": {"return_url": f"{SCHOOL}/courses/7/modules"}}
    landed = launch(client, lms)
    assert landed.status_code == 303, landed.text
    # Over plain http the session cookie cannot be SameSite=None (that needs Secure).
    assert "samesite=lax" in session_cookie(landed) and "partitioned" not in session_cookie(landed)
    expected = f"{lms.issuer} {SCHOOL}"
    for path in (*PAGES, "/api/v1/account"):
        reply = client.get(path)
        assert reply.status_code == 200, path
        assert ancestors(reply) == expected, path
        assert "x-frame-options" not in reply.headers, path
    # Another browser on the same server is no LTI session: no one frames its pages.
    with TestClient(client.app) as other:  # type: ignore[arg-type]
        reply = other.get(CHAPTER)
        assert ancestors(reply) == "'none'" and reply.headers["x-frame-options"] == "DENY"
    # A session cookie cannot be made to name another origin: a changed one is not signed.
    forged = client.cookies["kplay_session"].replace("a", "b", 1)
    with TestClient(client.app, cookies={"kplay_session": forged}) as other:  # type: ignore[arg-type]
        assert ancestors(other.get(CHAPTER)) == "'none'"


def test_over_https_the_lti_session_cookie_comes_back_inside_the_frame(
    lms: Lms,  # noqa: F811
    https_client: TestClient,
) -> None:
    lms.launch_url = "https://testserver/lti/launch"
    to_lms = https_client.get(
        "/lti/login",
        params={"iss": lms.issuer, "login_hint": "hint-7", "target_link_uri": CHAPTER,
                "client_id": lms.client_id},
        follow_redirects=False,
    )  # fmt: skip
    assert to_lms.status_code == 302, to_lms.text
    state = [c for c in to_lms.headers.get_list("set-cookie") if "lti" in c.split("=")[0]]
    assert state and all("samesite=none" in c.lower() and "partitioned" in c.lower() for c in state)
    from tests.app.lti_platform import form_of

    action, fields = form_of(httpx.get(to_lms.headers["location"], timeout=10).text)
    assert action == "https://testserver/lti/launch"
    landed = https_client.post("/lti/launch", data=fields, follow_redirects=False)
    assert landed.status_code == 303, landed.text
    cookie = session_cookie(landed)
    assert "samesite=none" in cookie and "secure" in cookie and "partitioned" in cookie
    assert ancestors(https_client.get(CHAPTER)) == lms.issuer


def test_a_policy_takes_origins_only() -> None:
    policy = content_security_policy("n0nce", ("https://lms.example", "https://x; script-src *"))
    assert "frame-ancestors https://lms.example;" in policy + ";" and "script-src *" not in policy
    assert "frame-ancestors 'none'" in content_security_policy("n0nce", ("javascript:alert(1)",))
