"""The generated `apache.rocketmq.v2` modules of the pinned rocketmq-python-client, loaded as our own modules.

The official package's `__init__` loads the whole client (producers, consumers, OpenTelemetry exporters),
which costs every fresh Python process a fifth of a second or more, and its generated `service_pb2` imports
`rocketmq.grpc_protocol`, which runs that `__init__`. So the three generated files are executed here as
`rocketmq_protocol.grpc_v2.{definition_pb2,service_pb2,service_pb2_grpc}`, with that one import pointed at
our copy. Nothing is put under another package's name: a user's own `import rocketmq` is untouched, and
since both register the same descriptors in protobuf's default pool, messages of either are the same classes.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

__all__ = ["definition_pb2", "service_pb2", "service_pb2_grpc"]

_OFFICIAL = "rocketmq.grpc_protocol"


def _generated_dir() -> Path:
    spec = importlib.util.find_spec("rocketmq")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("rocketmq-python-client is not installed (module 'rocketmq' not found)")
    return Path(next(iter(spec.submodule_search_locations))) / "grpc_protocol"


def _load(name: str, generated: Path) -> types.ModuleType:
    """Executes the official generated module `name` as `rocketmq_protocol.grpc_v2.<name>`."""
    qualified = f"{__name__}.{name}"
    loaded = sys.modules.get(qualified)
    if loaded is not None:
        return loaded
    path = generated / f"{name}.py"
    source = path.read_text(encoding="utf-8").replace(f"from {_OFFICIAL} import", f"from {__name__} import")
    module = types.ModuleType(qualified)
    module.__file__ = str(path)
    module.__package__ = __name__
    sys.modules[qualified] = module
    try:
        exec(compile(source, str(path), "exec"), module.__dict__)
    except BaseException:
        del sys.modules[qualified]
        raise
    setattr(sys.modules[__name__], name, module)
    return module


_dir = _generated_dir()
definition_pb2 = _load("definition_pb2", _dir)
service_pb2 = _load("service_pb2", _dir)
service_pb2_grpc = _load("service_pb2_grpc", _dir)
del _dir
