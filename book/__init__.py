"""Package data of Kernel Playground: the book folder."""
