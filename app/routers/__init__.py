"""One router per area: pages (the book), runs_html (cell fragments), api (JSON, /api/v1)."""
