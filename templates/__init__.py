"""Package data of Kernel Playground: the templates folder."""
