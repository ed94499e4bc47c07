"""Defaults of kplay.config that are computed when the settings are read: where the
embedded database and the session key live, and how the docs show such a default."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from platformdirs import user_data_dir

APP_DIR_NAME = "kernel-playground"


def default_database_url() -> str:
    # The folder is created when the engine is made, not here: reading settings has no effects.
    path = Path(user_data_dir(APP_DIR_NAME)) / "kplay.sqlite3"
    return f"sqlite:///{path}"


def default_secret_key_path() -> Path:
    """Where the web app keeps the session key it made itself (KPLAY_SECRET_KEY unset)."""
    return Path(user_data_dir(APP_DIR_NAME)) / "secret_key"


def _shown(text: str) -> dict[str, Any]:
    """How the docs show a default that is computed when the settings are read."""
    return {"shown_default": text}
