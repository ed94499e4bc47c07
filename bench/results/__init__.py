"""Package data of Kernel Playground: measured results the book quotes (JSON, by benchmark)."""
