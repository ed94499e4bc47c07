"""Where the package's data lives: templates, static files, the book, the measured results.

Every folder is a package of its own (`kplay.templates`, `kplay.static`, `kplay.book`,
`kplay.results`), found through `importlib.resources`, so an installed wheel and an editable
checkout read them the same way.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from pathlib import Path

DATA_PACKAGES = ("templates", "static", "book", "results")


@cache
def data_dir(name: str) -> Path:
    """The folder of one data package, as a real path (Jinja and StaticFiles need one)."""
    if name not in DATA_PACKAGES:
        raise ValueError(f"unknown data package {name!r}; one of {', '.join(DATA_PACKAGES)}")
    folder = files(f"kplay.{name}")
    path = Path(str(folder))
    if not path.is_dir():
        raise RuntimeError(f"kplay.{name} is not installed as a folder on disk ({folder!r})")
    return path
