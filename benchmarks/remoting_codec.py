"""Throughput of the remoting message codecs (rocketmq_protocol.remoting.message_codec), one process.

    python -m benchmarks.remoting_codec [--messages 1000000] [--repeat 3]

Messages have a 100-byte body, a tag, two keys, a UNIQ_KEY and two user properties, like a Java
producer's. Prints msgs/s (best of `--repeat`, wall clock and process CPU time) for: decode of pull
bodies (up to 16 MiB each, one at a time, as a client receives them) into Arrow columns (every column,
and the table a read task makes of them: `connector.clients.remoting.stored_to_table`), encode of stored
messages from columns (what the emulator serves), and the SEND_BATCH_MESSAGE encode from columns (the
writer's path) with and without building the property strings.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa

from connector.clients.remoting import stored_to_table
from rocketmq_protocol.remoting.message_codec import decode_stored, encode_batch, encode_stored
from rocketmq_protocol.remoting.message_id import UniqIdGenerator
from rocketmq_protocol.remoting.properties import build_properties_column

BODY_BYTES = 100
PULL_BODY_LIMIT = 16 * 1024 * 1024 - 1024


def make_columns(n: int) -> dict[str, pa.Array]:
    rng = np.random.default_rng(7)
    bodies = rng.integers(0, 256, size=(n, BODY_BYTES), dtype=np.uint8)
    body = pa.Array.from_buffers(
        pa.binary(), n, [None, pa.py_buffer(np.arange(0, BODY_BYTES * (n + 1), BODY_BYTES, dtype=np.int32)),
                         pa.py_buffer(bodies)],
    )  # fmt: skip
    ids = UniqIdGenerator(ip=b"\x0a\x00\x00\x05", pid=4242).many(n)
    order = pa.array(np.arange(n).astype(str))
    user = pa.MapArray.from_arrays(
        pa.array(np.arange(0, 2 * n + 1, 2, dtype=np.int32)),
        pa.array(np.tile(np.array(["color", "order"], dtype=object), n), pa.string()),
        pa.array(
            np.column_stack([np.full(n, "red", dtype=object), order.to_numpy(zero_copy_only=False)]).ravel(),
            pa.string(),
        ),
    )
    keys = pa.ListArray.from_arrays(
        pa.array(np.arange(0, 2 * n + 1, 2, dtype=np.int32)),
        pa.array(
            np.column_stack([np.full(n, "k1", dtype=object), np.full(n, "k2", dtype=object)]).ravel(),
            pa.string(),
        ),
    )
    tags = pa.repeat(pa.scalar("TagA", pa.string()), n)
    return {"body": body, "uniq": ids, "user": user, "keys": keys, "tags": tags}


def build_props(cols: dict[str, pa.Array], n: int) -> pa.Array:
    return build_properties_column(
        n, uniq_keys=cols["uniq"], tags=cols["tags"], keys=cols["keys"], user=cols["user"],
        constant={"WAIT": "true"},
    )  # fmt: skip


def encode_pull_bodies(cols: dict[str, pa.Array], props: pa.Array, n: int) -> list[bytes]:
    per = PULL_BODY_LIMIT // (200 + BODY_BYTES + 100)
    out = []
    for lo in range(0, n, per):
        hi = min(n, lo + per)
        out.append(_encode(cols, props, lo, hi))
    return out


def _encode(cols: dict[str, pa.Array], props: pa.Array, lo: int, hi: int) -> bytes:
    k = hi - lo
    return encode_stored(
        topic="BenchTopic",
        queue_id=1,
        queue_offset=np.arange(lo, hi, dtype=np.int64),
        commitlog_offset=np.arange(lo, hi, dtype=np.int64) * 300,
        body=cols["body"].slice(lo, k),
        properties=props.slice(lo, k),
        born_timestamp=np.full(k, 1_700_000_000_000, dtype=np.int64),
        store_timestamp=np.full(k, 1_700_000_000_005, dtype=np.int64),
        born_host="10.0.0.5:54321",
        store_host="10.0.0.9:10911",
        body_crc=np.zeros(k, dtype=np.int32),
    )


def best(fn, repeat: int) -> tuple[float, float]:
    """Best wall-clock and best CPU seconds of `repeat` runs (CPU time is the fairer figure on a shared box)."""
    walls, cpus = [], []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        fn()
        cpus.append(time.process_time() - c)
        walls.append(time.perf_counter() - w)
    return min(walls), min(cpus)


def decode_each(bodies: list[bytes]) -> None:
    for body in bodies:  # one pull response at a time, as a client receives them
        decode_stored(body)


def run(n: int, repeat: int) -> dict[str, tuple[float, float]]:
    cols = make_columns(n)
    props = build_props(cols, n)
    bodies = encode_pull_bodies(cols, props, n)
    check = decode_stored(bodies[0])
    assert check.num_rows > 0 and check.column("tags")[0].as_py() == "TagA"
    runs = {
        "decode pull bodies -> Arrow": lambda: decode_each(bodies),
        "decode pull bodies -> reader table": lambda: [stored_to_table([body]) for body in bodies],
        "encode stored from columns": lambda: encode_pull_bodies(cols, props, n),
        "batch encode (incl. properties)": lambda: encode_batch(cols["body"], build_props(cols, n)),
        "batch encode (properties given)": lambda: encode_batch(cols["body"], props),
    }
    results = {}
    for name, fn in runs.items():
        wall, cpu = best(fn, repeat)
        results[name] = (n / wall, n / cpu)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'':34s} {'wall msgs/s':>14s} {'CPU msgs/s':>14s}")
    for name, (wall, cpu) in run(args.messages, args.repeat).items():
        print(f"{name:34s} {wall:>14,.0f} {cpu:>14,.0f}")


if __name__ == "__main__":
    main()
