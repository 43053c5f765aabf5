"""A read task leaves pandas unimported: pyarrow imports it on the first `Array.to_numpy`, `pa.array` or
`pa.scalar` of Python values (~0.4 s of CPU), and a fresh Spark Python worker that reads Arrow batches
would otherwise never load it, so the read path builds its arrays from buffers
(rocketmq_protocol/arrow_values.py)."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa

from broker_emulator import Emulator
from connector.options import parse_writer_options
from connector.producer import Producer
from connector.sink_rows import RowChecker
from tests.support.targets import client_config

_PROBE = """
import sys
from connector.clients import get_client
from connector.config import ClientConfig, FilterSpec
from connector.queues import OffsetRange
from connector.read_task import RangePartition, read_partition

config = ClientConfig(**{config!r})
client = get_client(config)
rows = 0
for entry in client.route({topic!r}):
    end = client.max_offset(entry)
    part = RangePartition(config, "g", FilterSpec(), (OffsetRange(entry.queue, 0, end),), (entry,), 8192, 10000, True)
    rows += sum(b.num_rows for b in read_partition(part))
print(rows, "pandas" in sys.modules)
"""


def test_a_read_task_does_not_import_pandas(rocketmq_emulator: Emulator, topic: str, target: str) -> None:
    opts = parse_writer_options({"endpoints": rocketmq_emulator.endpoints, "topic": topic})
    producer, checker = Producer(opts), RowChecker({"body": "body"}, topic, opts.max_message_size)
    for rows in checker.check(pa.record_batch([pa.array([b"m%d" % i for i in range(40)])], ["body"]), 0):
        producer.send(rows)
    producer.flush()
    cfg = client_config(target)
    fields = {"endpoints": cfg.endpoints, "name_server": cfg.name_server}
    probe = _PROBE.format(config=fields, topic=topic)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["40", "False"]
