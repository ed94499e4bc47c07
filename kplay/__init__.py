"""Kernel Playground: the interactive edition of *Writing Kernels with AI*.

Layers, each importing only the ones before it: `kplay.kernels` (the engine),
`kplay.workers` (processes, limits, queues), `kplay.app` (the web app); `kplay.cli` is the
terminal front door over all three and `kplay.config` holds every setting.
"""

__version__ = "0.2.0"
