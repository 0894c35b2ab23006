"""disque_server: a Disque 1.0-rc1 compatible job queue node, in Python.

Its modules form a one-way stack, bottom to top: ``layers.LAYERS`` holds the
order (and what each layer is for); a module imports only those below it (and
those of its own package); what a module below server.py calls above it is a
method of ``hooks.Hooks``, which ``server.NodeHooks`` carries on to the layer
that acts on it (tests/unit/test_import_order.py checks the imports against
``LAYERS``, tests/unit/test_layers.py the calls made at run time; docs/layers.md
is the map, written from ``LAYERS`` by ``python -m docgen``).
"""

import platform

DISQUE_VERSION = "1.0-rc1"
__version__ = "0.1.0"

# Which build runs: mypyc compiles every module of the node (setup.py) to a C
# extension, whose __file__ is the extension's; the pure-Python build's is a .py.
BUILD = "pure" if __file__.endswith((".py", ".pyc")) else "mypyc"
BUILD_ID = f"{platform.python_implementation().lower()}-{platform.python_version()}-{BUILD}"
