"""The book's metadata: a chapter's YAML front matter and a part's `part.toml`.

Both are read by real parsers (PyYAML's safe loader, `tomllib`) and checked field by field
against the models below; every error names the file and, where it can, the line.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

# A part is a folder `p<N>` of the book holding `part.toml` and its chapters.
PART_DIR = re.compile(r"^p([1-9][0-9]*)$")
PART_FILE = "part.toml"
SLUG = r"^[a-z0-9][a-z0-9-]{0,79}$"


class BookError(ValueError):
    """A chapter that cannot be served; the message names the file and line."""

    def __init__(self, path: Path, line: int | None, message: str) -> None:
        self.path = path
        self.line = line
        super().__init__(f"{path}{f':{line}' if line else ''}: {message}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class FrontMatter(_Strict):
    """The fields a chapter's front matter may give (documented in docs/chapters.md)."""

    title: str = Field(min_length=1)
    slug: str | None = Field(default=None, pattern=SLUG)
    number: str | None = None
    summary: str = ""
    # The part comes from the chapter's folder; these may repeat it, and must agree.
    part: int | None = None
    part_title: str | None = None

    _lines: dict[str, int] = PrivateAttr(default_factory=dict)

    def line(self, key: str) -> int:
        """The file line of a field (the front matter's first line if it is absent)."""
        return self._lines.get(key, min(self._lines.values(), default=1))

    @field_validator("number", mode="before")
    @classmethod
    def _number(cls, v: Any) -> Any:
        # `number: 3` reads as an int in YAML; the number is shown, so keep it as text.
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


class PartSpec(_Strict):
    """A part's `part.toml`: the one place its title is written."""

    title: str = Field(min_length=1)


def _first_error(exc: ValidationError) -> tuple[str, str]:
    err = exc.errors()[0]
    key = str(err["loc"][0]) if err["loc"] else ""
    if err["type"] == "extra_forbidden":
        return key, f"unknown field {key!r}; use {', '.join(FrontMatter.model_fields)}"
    return key, f"field {key}: {err['msg']}"


def parse_front(text: str, path: Path, first_line: int) -> FrontMatter:
    """Front matter text (between the `---` lines, starting at file line `first_line`)."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = first_line + mark.line if mark is not None else first_line - 1
        problem = getattr(exc, "problem", None) or str(exc)
        raise BookError(path, line, f"front matter is not valid YAML: {problem}") from None
    if not isinstance(node, yaml.MappingNode) or not isinstance(data, dict):
        raise BookError(path, first_line - 1, "front matter must be 'key: value' lines")
    lines: dict[str, int] = {}
    for key_node, _value in node.value:
        key = str(key_node.value)
        line = first_line + key_node.start_mark.line
        if key in lines:
            raise BookError(path, line, f"front matter: {key!r} given twice (line {lines[key]})")
        lines[key] = line
    try:
        front = FrontMatter.model_validate(data)
    except ValidationError as exc:
        key, message = _first_error(exc)
        raise BookError(path, lines.get(key, first_line - 1), f"front matter: {message}") from None
    front._lines = lines
    return front


def part_number(folder: Path) -> int | None:
    """The number of a part folder (`p2` -> 2), or None for a folder that is not a part."""
    match = PART_DIR.match(folder.name)
    return int(match.group(1)) if match else None


def load_part(folder: Path) -> PartSpec:
    path = folder / PART_FILE
    if not path.is_file():
        raise BookError(path, None, f"missing {PART_FILE}: every part folder gives its title")
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise BookError(path, None, f"not valid TOML: {exc}") from None
    try:
        return PartSpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "title"
        message = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
        raise BookError(path, None, f"field {key}: {message}") from None
