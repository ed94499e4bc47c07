"""The key that signs readers' session cookies.

`KPLAY_SECRET_KEY` when it is set. Otherwise the app makes a random key the first time it
starts and keeps it in a file only its user can read (mode 0600) in the user data folder, so
sessions outlive restarts. The key lives in this process's memory only: it is never put in
the environment, so an evaluation child (whose environment is an allow-list of the engine's
settings, see `kplay.workers.limits.child_env`) cannot inherit it, and it is never logged.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from pathlib import Path

from kplay.config import Settings, default_secret_key_path

log = logging.getLogger(__name__)

# 64 bytes of randomness, written as URL-safe text (86 characters).
KEY_BYTES = 64
# A key shorter than this (set by hand, or a truncated file) is refused.
MIN_KEY_CHARS = 32


class SecretKeyError(RuntimeError):
    """The key file cannot be used; the message names it and what to do."""


def session_secret(settings: Settings, path: Path | None = None) -> str:
    """The signing key: the setting, else the key file (made when missing)."""
    if settings.secret_key is not None:
        key = settings.secret_key.get_secret_value()
        if len(key) < MIN_KEY_CHARS:
            raise SecretKeyError(
                f"KPLAY_SECRET_KEY is {len(key)} characters long; use at least {MIN_KEY_CHARS} "
                "random characters (or unset it to have one made)"
            )
        return key
    return load_or_create(path or default_secret_key_path())


def load_or_create(path: Path) -> str:
    """The key kept in `path`; a new random one is written there first when there is none."""
    if not path.exists():
        _create(path)
    _tighten(path)
    key = path.read_text(encoding="ascii").strip()
    if len(key) < MIN_KEY_CHARS:
        raise SecretKeyError(
            f"the session key file {path} holds {len(key)} characters; delete it to have a new "
            "key made (every reader then starts a new session)"
        )
    return key


def _create(path: Path) -> None:
    """Write a new key so that no reader ever sees a partial file or a looser mode.

    The key goes to a private temporary file that is then linked to its name: if another
    process (a second web worker starting at the same moment) made the file first, the link
    fails and both use that one.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(secrets.token_urlsafe(KEY_BYTES) + "\n")
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(temp, path)
            log.info("made a new session key in %s", path)
        except FileExistsError:
            pass
    finally:
        temp.unlink(missing_ok=True)


def _tighten(path: Path) -> None:
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        os.chmod(path, 0o600)
        log.warning("%s was readable by others (mode %o); now 0600", path, mode)
