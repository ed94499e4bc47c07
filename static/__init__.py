"""Package data of Kernel Playground: the static folder."""
