"""The key that signs session cookies: from KPLAY_SECRET_KEY, else made once and kept in a
0600 file so sessions outlive restarts; never logged, never in an evaluation child's
environment."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from kplay.app.main import create_app
from kplay.app.readers import COOKIE
from kplay.app.sessionkey import SecretKeyError, load_or_create, session_secret
from kplay.config import Settings, WebSettings
from kplay.workers.limits import Limits, child_env
from tests.app.fakes import FakeExecutor

GOOD = {
    "problem": "vector_add",
    "backend": "numba-cpu",
    "source": "import numba\n\n@numba.njit\ndef vector_add(a, b, out, n):\n    pass\n",
}


def test_a_key_is_made_once_with_mode_0600(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "secret_key"
    first = load_or_create(path)
    assert len(first) >= 64 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create(path) == first  # kept, not made again
    assert [p.name for p in path.parent.iterdir()] == ["secret_key"]  # no temporary left


def test_a_key_file_others_could_read_is_tightened(tmp_path: Path) -> None:
    path = tmp_path / "secret_key"
    path.write_text("k" * 64)
    os.chmod(path, 0o644)
    assert load_or_create(path) == "k" * 64
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_short_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "secret_key"
    path.write_text("short\n")
    with pytest.raises(SecretKeyError, match="delete it"):
        load_or_create(path)
    with pytest.raises(SecretKeyError, match="at least 32"):
        session_secret(Settings(database_url="sqlite://", secret_key=SecretStr("short")))


def test_the_setting_wins_over_the_file(tmp_path: Path) -> None:
    settings = Settings(database_url="sqlite://", secret_key=SecretStr("s" * 40))
    assert session_secret(settings, tmp_path / "secret_key") == "s" * 40
    assert not (tmp_path / "secret_key").exists()
    assert "s" * 40 not in repr(settings) and "s" * 40 not in str(settings.secret_key)


def test_sessions_survive_a_restart_with_the_made_key(
    make_settings: Callable[..., Settings],
    private_key_file: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = make_settings(secret_key=None)
    caplog.set_level(logging.DEBUG)
    with TestClient(create_app(settings, FakeExecutor())) as client:
        run_id = client.post("/api/v1/runs", json=GOOD).json()["id"]
        session = dict(client.cookies)
    key = private_key_file.read_text().strip()
    assert stat.S_IMODE(private_key_file.stat().st_mode) == 0o600
    with TestClient(create_app(settings, FakeExecutor()), cookies=session) as client:
        assert client.get(f"/api/v1/runs/{run_id}").status_code == 200
    assert key not in caplog.text  # made and used, never logged
    assert key not in os.environ.values()


def test_another_key_ends_every_session(make_settings: Callable[..., Settings]) -> None:
    with TestClient(create_app(make_settings(), FakeExecutor())) as client:
        run_id = client.post("/api/v1/runs", json=GOOD).json()["id"]
        session = dict(client.cookies)
    other = make_settings(secret_key=SecretStr("another-key-" + "z" * 32))
    with TestClient(create_app(other, FakeExecutor()), cookies=session) as client:
        reply = client.get(f"/api/v1/runs/{run_id}")
        # The old cookie no longer verifies: a new reader, who gets a cookie of its own.
        assert reply.status_code == 404
        assert reply.headers["set-cookie"].startswith(f"{COOKIE}=")
        assert session[COOKIE] not in reply.headers["set-cookie"]


def test_the_key_never_reaches_an_evaluation_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "web-only-" + "q" * 40
    monkeypatch.setenv(WebSettings.env_name("secret_key"), secret)
    for parent in (None, dict(os.environ)):  # the real environment, and a copy of it
        env = child_env(Limits(), tmp_path / "home", tmp_path / "cache", parent)
        assert WebSettings.env_name("secret_key") not in env
        assert secret not in env.values()


def test_kplay_config_masks_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from kplay.configview import effective_rows

    monkeypatch.setenv(WebSettings.env_name("secret_key"), "shown-nowhere-" + "w" * 32)
    [row] = [r for r in effective_rows() if r.field == "secret_key"]
    assert row.source == "environment" and "shown-nowhere" not in row.value
