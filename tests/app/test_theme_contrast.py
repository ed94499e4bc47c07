"""Both themes of static/css/book.css meet WCAG contrast for text (4.5:1) on every surface."""

from __future__ import annotations

import re

import pytest

from kplay.resources import data_dir

CSS = (data_dir("static") / "css" / "book.css").read_text()
SURFACES = ("--bg", "--bg-soft", "--code-bg")
TEXTS = (
    "--fg",
    "--fg-muted",
    "--accent",
    "--ok",
    "--bad",
    "--warn",
    "--syn-keyword",
    "--syn-string",
    "--syn-number",
    "--syn-comment",
    "--syn-name",
    "--syn-type",
)
REQUIRED = (
    "--bg",
    "--bg-soft",
    "--fg",
    "--fg-muted",
    "--accent",
    "--border",
    "--code-bg",
    "--ok",
    "--bad",
    "--warn",
    "--font-body",
    "--font-mono",
)


def theme(name: str) -> dict[str, str]:
    selector = r':root\[data-theme="' + name + r'"\]\s*\{(.*?)\}'
    block = re.search(selector, CSS, re.S)
    assert block is not None, f"no {name} theme block"
    values = dict(re.findall(r"(--[\w-]+):\s*([^;]+);", block.group(1)))
    if name == "dark":  # the dark block overrides colours; fonts come from the light one
        values = {**theme("light"), **values}
    return values


def luminance(hex_colour: str) -> float:
    h = hex_colour.strip().lstrip("#")
    channels = [int(h[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


@pytest.mark.parametrize("name", ["light", "dark"])
def test_theme_defines_every_contract_variable(name: str) -> None:
    values = theme(name)
    assert set(REQUIRED) <= set(values)


@pytest.mark.parametrize("name", ["light", "dark"])
@pytest.mark.parametrize("text", TEXTS)
def test_text_colours_are_readable_on_every_surface(name: str, text: str) -> None:
    values = theme(name)
    for surface in SURFACES:
        ratio = contrast(values[text], values[surface])
        assert ratio >= 4.5, f"{name}: {text} on {surface} is {ratio:.2f}:1"


@pytest.mark.parametrize("name", ["light", "dark"])
def test_run_button_text_is_readable(name: str) -> None:
    label = "#ffffff" if name == "light" else "#0d1420"
    ratio = contrast(label, theme(name)["--accent"])
    assert ratio >= 4.5, f"{name}: Run button {ratio:.2f}:1"
