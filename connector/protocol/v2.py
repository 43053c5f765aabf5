"""The generated `apache.rocketmq.v2` modules of rocketmq-python-client, imported without running the
`rocketmq` package's `__init__`.

That `__init__` loads the whole official client (producers, consumers, OpenTelemetry exporters): a fifth
of a second on an idle machine, a second under load, paid by every fresh Python process that imports the
connector (Spark's streaming source runner at each query start, new Python workers). The connector needs
only the generated messages and stubs, so the package is registered bare, with its `__init__` deferred
until something reads an attribute it defines (`from rocketmq import Producer` still works, in any order).
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from typing import Any

__all__ = ["definition_pb2", "service_pb2", "service_pb2_grpc"]

_PACKAGE = "rocketmq"


def _register_bare_package() -> None:
    """Puts the `rocketmq` package in sys.modules with its submodule path but its `__init__` not yet run."""
    if _PACKAGE in sys.modules:
        return
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        raise ImportError("rocketmq-python-client is not installed (module 'rocketmq' not found)")
    module = importlib.util.module_from_spec(spec)
    lock = threading.RLock()
    state = {"initialized": False}

    def __getattr__(name: str) -> Any:
        with lock:
            if not state["initialized"] and not name.startswith("__"):
                state["initialized"] = True
                spec.loader.exec_module(module)  # type: ignore[union-attr]
                if name in module.__dict__:
                    return module.__dict__[name]
        raise AttributeError(f"module {_PACKAGE!r} has no attribute {name!r}")

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    sys.modules[_PACKAGE] = module


_register_bare_package()

from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc  # noqa: E402
