"""connector.writer stays light to import: Spark's planning and commit processes import it to build, unpickle
and commit the writer, and only a task's `write()` needs the producer, its client and the row checks."""

from __future__ import annotations

import subprocess
import sys

_PROBE = """
import pickle, sys
import connector.writer
from connector.send_stats import SendStats
message = connector.writer.RocketMQCommitMessage(0, 3, 0.1, SendStats(messages=3))
pickle.loads(pickle.dumps(message))
print(" ".join(m for m in ("pyarrow", "pyarrow.compute", "numpy", "grpc", "connector.producer") if m in sys.modules))
"""


def test_importing_the_writer_and_unpickling_a_commit_message_imports_nothing_heavy() -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == []
