"""`kplay admin create-user`, `kplay login` and `kplay whoami` against a real server (uvicorn
on a free port, the app on a temporary SQLite database that the CLI writes too)."""

from __future__ import annotations

import io
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import uvicorn

from kplay.accountcli import credentials_path, stored_token
from kplay.app.db.session import Database
from kplay.app.main import create_app
from kplay.app.services.accounts import Accounts
from kplay.cli import main
from kplay.config import Settings
from tests.app.fakes import FakeExecutor

PASSWORD = "a long enough password"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sqlite_url: str) -> Path:
    """The CLI's config folder and database, both under the test's own folder."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("KPLAY_DATABASE_URL", sqlite_url)
    return tmp_path / "config"


@pytest.fixture
def server(make_settings: Callable[..., Settings], home: Path) -> Iterator[str]:
    port = _free_port()
    app = create_app(make_settings(), FakeExecutor())
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    running = uvicorn.Server(config)
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not running.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        running.should_exit = True
        thread.join(timeout=30)


def _stdin(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(text))


def test_create_user_writes_the_account(
    home: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _stdin(monkeypatch, PASSWORD + "\n")
    assert (
        main(
            ["admin", "create-user", "Prof@Example.org", "--role", "instructor", "--password-stdin"]
        )
        == 0
    )
    assert "made instructor Prof@Example.org" in capsys.readouterr().out
    db = Database(sqlite_url)
    user = Accounts(db).authenticate("prof@example.org", PASSWORD)
    db.dispose()
    assert user is not None and user.role == "instructor" and user.display_name == "Prof"
    _stdin(monkeypatch, PASSWORD + "\n")
    assert main(["admin", "create-user", "prof@example.org", "--password-stdin"]) == 2
    assert "already exists" in capsys.readouterr().err
    _stdin(monkeypatch, "short\n")
    assert main(["admin", "create-user", "x@example.org", "--password-stdin"]) == 2
    assert "password: the password is too short" in capsys.readouterr().err


def test_create_user_refuses_an_unknown_role(home: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["admin", "create-user", "x@example.org", "--role", "owner", "--password-stdin"])
    assert exc.value.code == 2


def test_login_keeps_a_private_token_that_acts_as_the_account(
    server: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _stdin(monkeypatch, PASSWORD + "\n")
    assert (
        main(["admin", "create-user", "ada@example.org", "--role", "admin", "--password-stdin"])
        == 0
    )
    _stdin(monkeypatch, "wrong password\n")
    args = ["login", "--server", server, "--email", "ada@example.org", "--password-stdin"]
    assert main(args) == 1
    assert "the e-mail address or the password is wrong" in capsys.readouterr().err
    assert not credentials_path().exists()
    _stdin(monkeypatch, PASSWORD + "\n")
    assert main(args) == 0
    assert "as ada@example.org (admin)" in capsys.readouterr().out
    path = credentials_path()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    token = stored_token(server + "/")
    assert token is not None and token.startswith("kp_") and PASSWORD not in path.read_text()
    assert main(["whoami", "--server", server]) == 0
    assert capsys.readouterr().out.strip() == f"ada@example.org (admin) on {server}"
    # A token given by hand is checked before it is kept.
    assert main(["login", "--server", server, "--token", "kp_not-a-token"]) == 1
    assert "does not accept this token" in capsys.readouterr().err
    assert stored_token(server) == token
    assert main(["login", "--server", server, "--token", token]) == 0


def test_whoami_without_a_login_says_what_to_do(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["whoami", "--server", "http://127.0.0.1:9"]) == 2
    assert "kplay login --server http://127.0.0.1:9" in capsys.readouterr().err


def test_login_to_a_server_that_does_not_answer(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["login", "--server", f"http://127.0.0.1:{_free_port()}", "--token", "kp_x"]) == 1
    assert "cannot reach" in capsys.readouterr().err
