"""doctune's search driver, in a package that shares its name with the standard library.

Running from the project root puts this package ahead of the stdlib ``platform`` module for the
whole process, and torch, ray and transformers call ``platform.system()`` and friends. So the
package first executes the stdlib module's own code in its namespace (found through the stdlib
directories only, never ``sys.path``), then restores its own identity. Every stdlib name,
public or private, behaves exactly as in the stdlib module; ``platform.search`` and the other
submodules stay importable.

Only the driver lives here. Code that runs inside Ray workers is in ``trainers`` and
``evaluators``: workers may import the stdlib ``platform`` before the project root reaches
their ``sys.path``.
"""

from __future__ import annotations

import importlib.machinery as _machinery
import sysconfig as _sysconfig


def _load_stdlib_platform(namespace: dict) -> None:
    stdlib_dirs = [_sysconfig.get_path("stdlib"), _sysconfig.get_path("platstdlib")]
    spec = _machinery.PathFinder.find_spec("platform", stdlib_dirs)
    if spec is None or spec.loader is None:
        raise ImportError("the standard-library 'platform' module was not found")
    identity = {
        key: namespace[key]
        for key in ("__name__", "__doc__", "__file__", "__path__", "__spec__", "__loader__", "__package__")
        if key in namespace
    }
    code = spec.loader.get_code("platform")
    exec(code, namespace)
    namespace.update(identity)
    namespace["_stdlib_origin"] = spec.origin


_load_stdlib_platform(globals())
del _load_stdlib_platform
