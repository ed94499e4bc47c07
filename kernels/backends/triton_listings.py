"""Triton's own listings between the Python source and PTX: TTIR, TTGIR and LLVM IR."""

from __future__ import annotations

from typing import Any

from kplay.kernels.backends.toolkit_parse import truncate
from kplay.kernels.backends.toolkit_run import TEXT_LIMIT_BYTES

# In the order Triton lowers through them, with the names a reader knows them by.
IR_NAMES = {"ttir": "TTIR", "ttgir": "TTGIR", "llir": "LLVM IR"}


def ir_listings(asm: Any) -> dict[str, str]:
    """The IR texts of a compiled kernel's `asm`, each cut to the listing limit."""
    if not hasattr(asm, "get"):
        return {}
    found = {key: asm.get(key) for key in IR_NAMES}
    return {
        key: truncate(text, TEXT_LIMIT_BYTES, IR_NAMES[key])
        for key, text in found.items()
        if isinstance(text, str) and text
    }
