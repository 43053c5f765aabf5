"""The single parser of the reader's and the writer's options (README.md, 'Reader options' and 'Writer options').

Keys are case-insensitive (Spark hands them over lowercased); values are strings. Every problem raises
`OptionError` naming the option, the bad value and what is accepted, so a query fails on the driver
before any task runs. Parsing reads `tlsCaFile`, so it runs on the driver; the frozen results are
picklable and carry everything executors need.
"""

from __future__ import annotations

import difflib
import itertools
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from rocketmq_protocol.names import GROUP_MAX_LENGTH, NAME_CHARACTERS, NAME_PATTERN, TOPIC_MAX_LENGTH, is_name

from .allocation import AVERAGELY, AVERAGELY_BY_CIRCLE
from .config import FILTER_SQL, FILTER_TAG, PULL_AUTO, PULL_PROTOCOLS, ClientConfig, FilterSpec
from .errors import OptionError
from .offsets import EARLIEST, LATEST, OffsetsError, from_json
from .queues import MessageQueue

log = logging.getLogger(__name__)

__all__ = [
    "OffsetSpec",
    "OptionError",
    "ReaderOptions",
    "WriterOptions",
    "parse_duration_ms",
    "parse_reader_options",
    "parse_writer_options",
]

# Canonical spellings; lookups are by lowercased key.
COMMON_OPTIONS = ("nameServer", "endpoints", "accessKey", "secretKey", "namespace", "tls", "tlsCaFile")
READER_OPTIONS = (
    "topic",
    "consumerGroup",
    "startingOffsets",
    "startingTimestamp",
    "endingOffsets",
    "endingTimestamp",
    "filterExpression",
    "filterType",
    "maxMessagesPerTrigger",
    "minMessagesPerTrigger",
    "maxTriggerDelay",
    "numPartitions",
    "maxMessagesPerPartition",
    "allocateStrategy",
    "commitOffsetsToGroup",
    "failOnDataLoss",
    "pullBatchSize",
    "pullTimeoutMs",
    "pullProtocol",
)
WRITER_OPTIONS = (
    "topic",
    "producerGroup",
    "sendLatencyFaultEnable",
    "retryTimesWhenSendFailed",
    "sendMsgTimeoutMs",
    "maxMessageSize",
    "batchSize",
    "batchBytes",
    "maxInFlightRequests",
    "latencyMax",
    "notAvailableDuration",
)
# Keys Spark itself may put among a source's or sink's options; accepted and ignored.
SPARK_INTERNAL_OPTIONS = ("path", "paths", "checkpointLocation")
STREAM_ONLY_READER_OPTIONS = (
    "maxMessagesPerTrigger",
    "minMessagesPerTrigger",
    "maxTriggerDelay",
    "commitOffsetsToGroup",
)

# Settled by benchmarks/run.py: against 8,192, a batch read of 1M over gRPC ran 5-10% faster with a third
# less emulator CPU (fewer, larger pulls); Spark still gets 8,192-row batches (schema.ARROW_BATCH_ROWS).
DEFAULT_PULL_BATCH_SIZE = 32768
MAX_PULL_BATCH_SIZE = 65536
DEFAULT_PULL_TIMEOUT_MS = 30_000
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000

DEFAULT_PRODUCER_GROUP = "spark-rocketmq-producer"
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024
# benchmarks.write_bound, interleaved: 8192 wrote 1M rows 16% faster than 4096 (the emulator's CPU per message
# 0.62 against 0.79 µs: its per-request costs), 4096 a third less CPU per message than 1024, both sides.
DEFAULT_BATCH_SIZE = 8192
DEFAULT_BATCH_BYTES = 4 * 1024 * 1024
DEFAULT_MAX_IN_FLIGHT = 8  # benchmarks/run.py: ~+20% raw send over 4 (median of 5 interleaved pairs)
DEFAULT_LATENCY_MAX = (50, 100, 550, 1000, 2000, 3000, 15000)
DEFAULT_NOT_AVAILABLE_DURATION = (0, 0, 30000, 60000, 120000, 180000, 600000)

_INT = re.compile(r"^[0-9]{1,19}$")  # at most 19 digits: int64, and far below int()'s digit limit
_DURATION = re.compile(r"^([0-9]{1,19})\s*([a-z]*)$")
_DURATION_UNITS_MS = {
    "": 1,
    "ms": 1,
    "s": 1000,
    "sec": 1000,
    "secs": 1000,
    "second": 1000,
    "seconds": 1000,
    "m": 60_000,
    "min": 60_000,
    "mins": 60_000,
    "minute": 60_000,
    "minutes": 60_000,
    "h": 3_600_000,
    "hour": 3_600_000,
    "hours": 3_600_000,
    "d": 86_400_000,
    "day": 86_400_000,
    "days": 86_400_000,
}
_INT64_MAX = 2**63 - 1
_INT32_MAX = 2**31 - 1


# ------------------------------------------------------------------------------------------ results
@dataclass(frozen=True)
class OffsetSpec:
    """A start or end position: `earliest`, `latest`, `group`, `timestamp` or `specific`.

    `specific` holds `(MessageQueue, offset)` pairs in queue order (offset >= 0, or -2 earliest / -1 latest);
    a tuple rather than a dict so the spec stays hashable.
    """

    kind: str
    offsets: tuple[tuple[MessageQueue, int], ...] = ()
    timestamp_ms: int | None = None

    EARLIEST = "earliest"
    LATEST = "latest"
    GROUP = "group"
    TIMESTAMP = "timestamp"
    PER_QUEUE = "specific"

    def offset_map(self) -> dict[MessageQueue, int]:
        return dict(self.offsets)


@dataclass(frozen=True, kw_only=True)
class TransportOptions:
    """The connection options the reader and the writer share (`_transport`): nameServer or endpoints,
    credentials, namespace, TLS."""

    endpoints: str
    name_server: str = ""
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    namespace: str = ""
    tls: bool = False
    tls_ca_file: str | None = None
    tls_ca_pem: bytes | None = field(default=None, repr=False)

    @property
    def client_config(self) -> ClientConfig:
        return ClientConfig(
            self.endpoints,
            self.access_key,
            self.secret_key,
            self.namespace,
            self.tls,
            self.tls_ca_pem,
            name_server=self.name_server,
        )


@dataclass(frozen=True)
class ReaderOptions(TransportOptions):
    """Validated reader options (README.md, 'Reader options'); `ending` is always `latest` for a stream."""

    streaming: bool
    topics: tuple[str, ...]
    consumer_group: str
    starting: OffsetSpec
    ending: OffsetSpec
    filter: FilterSpec
    max_messages_per_trigger: int | None
    min_messages_per_trigger: int | None
    max_trigger_delay_ms: int
    num_partitions: int | None
    max_messages_per_partition: int | None
    allocate_strategy: str
    commit_offsets_to_group: bool
    fail_on_data_loss: bool
    pull_batch_size: int
    pull_timeout_ms: int
    pull_protocol: str

    @property
    def client_config(self) -> ClientConfig:
        return replace(super().client_config, pull_protocol=self.pull_protocol)


@dataclass(frozen=True)
class WriterOptions(TransportOptions):
    """Validated writer options (README.md, 'Writer options'); `topic` is None when the `topic` column names each row's topic."""

    topic: str | None
    producer_group: str
    send_latency_fault_enable: bool
    retry_times_when_send_failed: int
    send_msg_timeout_ms: int
    max_message_size: int
    batch_size: int
    batch_bytes: int
    max_in_flight_requests: int
    latency_max: tuple[int, ...]
    not_available_duration: tuple[int, ...]


# ------------------------------------------------------------------------------------------ raw access
def _invalid(name: str, value: Any, accepted: str) -> OptionError:
    shown = "<hidden>" if name == "secretKey" else value
    return OptionError(f"option '{name}'={shown!r} is invalid: expected {accepted}")


class _Options:
    """Case-insensitive view of the user's options, reporting unknown and duplicate keys."""

    def __init__(self, options: Mapping[str, Any], known: tuple[str, ...], other: tuple[str, ...], role: str):
        self.canonical = {k.lower(): k for k in known}
        self.values: dict[str, str] = {}
        spark = {k.lower() for k in SPARK_INTERNAL_OPTIONS}
        other_lower = {k.lower(): k for k in other}
        for raw_key, value in options.items():
            if not isinstance(raw_key, str):
                raise OptionError(f"option name {raw_key!r} is not a string")
            key = raw_key.lower()
            if key in spark:
                continue
            if key not in self.canonical:
                raise OptionError(self._unknown_message(raw_key, other_lower, role))
            if value is None:
                raise OptionError(f"option '{self.canonical[key]}' has no value (None)")
            if not isinstance(value, str):
                value = str(value)
            if key in self.values and self.values[key] != value:
                raise OptionError(
                    f"option '{self.canonical[key]}' is given twice with different values "
                    "(option names are case-insensitive)"
                )
            self.values[key] = value

    def _unknown_message(self, raw_key: str, other_lower: dict[str, str], role: str) -> str:
        key = raw_key.lower()
        if key in other_lower:
            return (
                f"option '{raw_key}' is not valid for the {role}: "
                f"'{other_lower[key]}' is an option of the {'writer' if role == 'reader' else 'reader'}"
            )
        close = difflib.get_close_matches(key, list(self.canonical), n=1, cutoff=0.6)
        hint = f"; did you mean '{self.canonical[close[0]]}'?" if close else ""
        accepted = ", ".join(sorted(self.canonical.values(), key=str.lower))
        return f"unknown option '{raw_key}' for the rocketmq {role}{hint} (accepted options: {accepted})"

    def get(self, name: str) -> str | None:
        return self.values.get(name.lower())

    def has(self, name: str) -> bool:
        return name.lower() in self.values

    def parse(self, name: str, fn: Callable[[str, str], Any], default: Any = None) -> Any:
        raw = self.get(name)
        return default if raw is None else fn(name, raw)


# ------------------------------------------------------------------------------------------ value parsers
def _int(name: str, raw: str, minimum: int, accepted: str, maximum: int = _INT64_MAX) -> int:
    text = raw.strip()
    if text.startswith("+"):
        text = text[1:]
    if not _INT.fullmatch(text):
        raise _invalid(name, raw, accepted)
    value = int(text)
    if not minimum <= value <= maximum:
        raise _invalid(name, raw, accepted)
    return value


def _positive(name: str, raw: str) -> int:
    return _int(name, raw, 1, "a positive integer")


def _non_negative(name: str, raw: str) -> int:
    return _int(name, raw, 0, "an integer >= 0")


def _positive_int32(name: str, raw: str) -> int:
    return _int(name, raw, 1, f"an integer from 1 to {_INT32_MAX}", _INT32_MAX)


def _bool(name: str, raw: str) -> bool:
    text = raw.strip().lower()
    if text == "true":
        return True
    if text == "false":
        return False
    raise _invalid(name, raw, "'true' or 'false'")


def _choice(name: str, raw: str, choices: tuple[str, ...]) -> str:
    lowered = {c.lower(): c for c in choices}
    text = raw.strip().lower()
    if text not in lowered:
        raise _invalid(name, raw, "one of " + ", ".join(f"'{c}'" for c in choices))
    return lowered[text]


def parse_duration_ms(name: str, raw: str) -> int:
    """Spark-style duration → milliseconds: `500ms`, `30s`, `15m`, `1h`, `1d`, or a plain number of ms."""
    m = _DURATION.fullmatch(raw.strip().lower())
    accepted = "a duration such as '500ms', '30s', '15m', '1h' or a number of milliseconds"
    if not m or m.group(2) not in _DURATION_UNITS_MS:
        raise _invalid(name, raw, accepted)
    value = int(m.group(1)) * _DURATION_UNITS_MS[m.group(2)]
    if value > _INT64_MAX:
        raise _invalid(name, raw, accepted)
    return value


def _endpoints(name: str, raw: str) -> str:
    """`host:port[;host:port]` (an `http://`/`https://` prefix is dropped) → the normalized string."""
    example = "10.0.0.5:9876;10.0.0.6:9876" if name == "nameServer" else "127.0.0.1:8081;127.0.0.1:8082"
    accepted = f"'host:port' or several separated by ';' (e.g. '{example}')"
    out = []
    for part in raw.split(";"):
        ep = part.strip()
        if not ep:
            continue
        for prefix in ("http://", "https://"):
            if ep.lower().startswith(prefix):
                ep = ep[len(prefix) :]
        ep = ep.rstrip("/")
        host, sep, port = ep.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host_ok = len(host) > 2 and ":" in host
        else:
            host_ok = bool(host) and ":" not in host
        if not sep or not host_ok or any(c.isspace() for c in host) or not _INT.fullmatch(port):
            raise _invalid(name, raw, accepted)
        if not 1 <= int(port) <= 65535:
            raise _invalid(name, raw, accepted + " with a port from 1 to 65535")
        out.append(f"{host}:{int(port)}")
    if not out:
        raise _invalid(name, raw, accepted)
    return ";".join(out)


def _resource_name(name: str, raw: str, what: str, max_len: int) -> str:
    text = raw.strip()
    if not is_name(text, max_len):
        raise _invalid(name, raw, f"a {what} name of 1 to {max_len} characters from {NAME_CHARACTERS}")
    return text


def _topics(name: str, raw: str) -> tuple[str, ...]:
    parts = [p.strip() for p in raw.split(",")]
    if not raw.strip() or any(not p for p in parts):
        raise _invalid(name, raw, "a topic name or a comma-separated list of topic names, none empty")
    out: list[str] = []
    for p in parts:
        t = _resource_name(name, p, "topic", TOPIC_MAX_LENGTH)
        if t not in out:
            out.append(t)
    return tuple(out)


def _int_list(name: str, raw: str) -> tuple[int, ...]:
    accepted = "a comma-separated list of integers >= 0 in non-decreasing order, e.g. '50,100,550'"
    parts = [p.strip() for p in raw.split(",")]
    if not all(_INT.fullmatch(p) for p in parts):
        raise _invalid(name, raw, accepted)
    values = tuple(int(p) for p in parts)
    if any(b < a for a, b in itertools.pairwise(values)) or max(values) > _INT64_MAX:
        raise _invalid(name, raw, accepted)
    return values


def _read_ca(name: str, path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            pem = f.read()
    except OSError as e:
        raise _invalid(name, path, f"a readable PEM file of CA certificates ({e.strerror or e})") from None
    if b"-----BEGIN" not in pem:
        raise _invalid(name, path, "a PEM file of CA certificates (no '-----BEGIN' line found)")
    return pem


def _transport(opts: _Options) -> dict[str, Any]:
    """The options both the reader and the writer take: nameServer or endpoints, credentials, namespace, TLS."""
    name_server = opts.get("nameServer")
    endpoints = opts.get("endpoints")
    if (name_server is None) == (endpoints is None):
        given = "both were given" if name_server is not None else "neither was given"
        raise OptionError(
            "exactly one of options 'nameServer' and 'endpoints' is required "
            f"({given}): 'nameServer' is 'host:port[;host:port]' of RocketMQ name servers (the remoting "
            "protocol of every RocketMQ 4.x/5.x cluster, port 9876 by default), 'endpoints' is "
            "'host:port[;host:port]' of gRPC v2 endpoints (RocketMQ 5 proxies, port 8081, or the emulator)"
        )
    access_key = opts.get("accessKey")
    secret_key = opts.get("secretKey")
    if access_key is not None and not access_key.strip():
        raise _invalid("accessKey", access_key, "a non-blank access key")
    if (access_key is None) != (secret_key is None):
        given, missing = ("accessKey", "secretKey") if secret_key is None else ("secretKey", "accessKey")
        raise OptionError(f"option '{missing}' is required when '{given}' is given")
    namespace = opts.get("namespace") or ""
    if namespace and not NAME_PATTERN.fullmatch(namespace.strip()):
        raise _invalid("namespace", namespace, "a namespace of characters from [a-zA-Z0-9_|-]")
    ca_file = opts.get("tlsCaFile")
    tls = opts.parse("tls", _bool, default=ca_file is not None)
    if ca_file is not None and not tls:
        raise OptionError("option 'tlsCaFile' needs 'tls'='true' (it was given with 'tls'='false')")
    return {
        "name_server": _endpoints("nameServer", name_server) if name_server is not None else "",
        "endpoints": _endpoints("endpoints", endpoints) if endpoints is not None else "",
        "access_key": access_key,
        "secret_key": secret_key,
        "namespace": namespace.strip(),
        "tls": tls,
        "tls_ca_file": ca_file,
        "tls_ca_pem": _read_ca("tlsCaFile", ca_file) if ca_file is not None else None,
    }


# ------------------------------------------------------------------------------------------ reader
def _offsets_json(name: str, raw: str, topics: tuple[str, ...]) -> tuple[tuple[MessageQueue, int], ...]:
    try:
        offsets = from_json(raw, allow_sentinels=True)
    except OffsetsError as e:
        raise _invalid(
            name,
            raw,
            'JSON like {"topic":{"broker-a":{"0":12}}} with offsets >= 0, -2 (earliest) or -1 (latest)'
            f" ({e})",
        ) from None
    unknown = sorted({k.topic for k in offsets} - set(topics))
    if unknown:
        raise _invalid(
            name, raw, f"only topics of option 'topic' ({', '.join(topics)}); not {', '.join(unknown)}"
        )
    return tuple(offsets.items())


def _start_spec(opts: _Options, topics: tuple[str, ...], streaming: bool) -> OffsetSpec:
    ts = opts.parse("startingTimestamp", _non_negative)
    raw = opts.get("startingOffsets")
    if ts is not None:
        if raw is not None:
            log.info("option 'startingTimestamp' wins over 'startingOffsets'=%r", raw)
        return OffsetSpec(OffsetSpec.TIMESTAMP, timestamp_ms=ts)
    if raw is None:
        return OffsetSpec(OffsetSpec.LATEST if streaming else OffsetSpec.EARLIEST)
    word = raw.strip().lower()
    if word in (OffsetSpec.EARLIEST, OffsetSpec.LATEST, OffsetSpec.GROUP):
        if word == OffsetSpec.LATEST and not streaming:
            raise _invalid(
                "startingOffsets",
                raw,
                "'earliest', 'group' or JSON offsets ('latest' reads nothing in a batch query)",
            )
        return OffsetSpec(word)
    if not raw.strip().startswith("{"):
        raise _invalid(
            "startingOffsets",
            raw,
            'earliest, latest, group, or JSON like {"topic":{"broker-a":{"0":12}}} (-2 earliest, -1 latest)',
        )
    offsets = _offsets_json("startingOffsets", raw, topics)
    if not streaming:
        latest = [str(k) for k, v in offsets if v == LATEST]
        if latest:
            raise _invalid(
                "startingOffsets", raw, f"no -1 (latest) in a batch query (found for {', '.join(latest)})"
            )
    return OffsetSpec(OffsetSpec.PER_QUEUE, offsets=offsets)


def _end_spec(opts: _Options, topics: tuple[str, ...], streaming: bool) -> OffsetSpec:
    if streaming:
        for name in ("endingOffsets", "endingTimestamp"):
            if opts.has(name):
                raise OptionError(
                    f"option '{name}' is not valid in streaming queries: a stream has no end "
                    "(use it with spark.read, or Trigger.AvailableNow to stop at the offsets present at start)"
                )
        return OffsetSpec(OffsetSpec.LATEST)
    ts = opts.parse("endingTimestamp", _non_negative)
    raw = opts.get("endingOffsets")
    if ts is not None:
        if raw is not None:
            log.info("option 'endingTimestamp' wins over 'endingOffsets'=%r", raw)
        return OffsetSpec(OffsetSpec.TIMESTAMP, timestamp_ms=ts)
    if raw is None or raw.strip().lower() == OffsetSpec.LATEST:
        return OffsetSpec(OffsetSpec.LATEST)
    if not raw.strip().startswith("{"):
        raise _invalid(
            "endingOffsets", raw, 'latest, or JSON like {"topic":{"broker-a":{"0":100}}} (-1 latest)'
        )
    offsets = _offsets_json("endingOffsets", raw, topics)
    earliest = [str(k) for k, v in offsets if v == EARLIEST]
    if earliest:
        raise _invalid("endingOffsets", raw, f"no -2 (earliest) as an end (found for {', '.join(earliest)})")
    return OffsetSpec(OffsetSpec.PER_QUEUE, offsets=offsets)


def _check_range(start: OffsetSpec, end: OffsetSpec) -> None:
    """Starting positions after the ending ones, when both are known without asking a broker."""
    if start.kind == end.kind == OffsetSpec.TIMESTAMP:
        assert start.timestamp_ms is not None and end.timestamp_ms is not None
        if start.timestamp_ms > end.timestamp_ms:
            raise OptionError(
                f"option 'startingTimestamp'={start.timestamp_ms} is after "
                f"'endingTimestamp'={end.timestamp_ms}: expected a start <= the end"
            )
    if start.kind == end.kind == OffsetSpec.PER_QUEUE:
        ends = end.offset_map()
        for key, s in start.offsets:
            e = ends.get(key)
            if e is not None and s >= 0 and e >= 0 and s > e:
                raise OptionError(
                    f"option 'startingOffsets' starts queue {key} at {s}, after its 'endingOffsets' {e}: "
                    "expected a start <= the end"
                )


def _filter(opts: _Options) -> FilterSpec:
    kind = opts.parse("filterType", lambda n, r: _choice(n, r, (FILTER_TAG, FILTER_SQL, "sql92")), FILTER_TAG)
    kind = FILTER_SQL if kind == "sql92" else kind
    raw = opts.get("filterExpression")
    if kind == FILTER_SQL:
        if raw is None or not raw.strip():
            raise OptionError(
                "option 'filterExpression' is required with 'filterType'='sql': "
                "a SQL92 condition on message properties, e.g. \"a > 5 AND region = 'eu'\""
            )
        return FilterSpec(FILTER_SQL, raw.strip())
    if raw is None or raw.strip() in ("", "*"):
        return FilterSpec(FILTER_TAG, "*")
    tags = [t.strip() for t in raw.split("||")]
    tags = [t for t in tags if t]
    bad = [t for t in tags if "|" in t or any(ord(c) < 32 or ord(c) == 127 for c in t)]
    if bad or not tags:
        raise _invalid(
            "filterExpression", raw, "'*' or tags separated by '||' (e.g. 'TagA || TagB'); a tag has no '|'"
        )
    return FilterSpec(FILTER_TAG, " || ".join(tags))


def _default_group(topics: tuple[str, ...]) -> str:
    return f"spark-rocketmq-{topics[0]}"[:GROUP_MAX_LENGTH]


def parse_reader_options(options: Mapping[str, Any], streaming: bool) -> ReaderOptions:
    """Validates the options of `spark.read` (streaming=False) or `spark.readStream` (streaming=True)."""
    opts = _Options(options, COMMON_OPTIONS + READER_OPTIONS, WRITER_OPTIONS, "reader")
    transport = _transport(opts)
    raw_topic = opts.get("topic")
    if raw_topic is None:
        raise OptionError("option 'topic' is required: a topic name or a comma-separated list of topics")
    topics = _topics("topic", raw_topic)
    group = opts.parse(
        "consumerGroup", lambda n, r: _resource_name(n, r, "consumer group", GROUP_MAX_LENGTH)
    ) or _default_group(topics)
    starting = _start_spec(opts, topics, streaming)
    ending = _end_spec(opts, topics, streaming)
    _check_range(starting, ending)
    max_trigger = opts.parse("maxMessagesPerTrigger", _positive)
    min_trigger = opts.parse("minMessagesPerTrigger", _positive)
    delay = opts.parse("maxTriggerDelay", parse_duration_ms, DEFAULT_MAX_TRIGGER_DELAY_MS)
    if min_trigger is not None and max_trigger is not None and min_trigger > max_trigger:
        raise OptionError(
            f"option 'minMessagesPerTrigger'={min_trigger} is larger than 'maxMessagesPerTrigger'={max_trigger}: "
            "expected min <= max"
        )
    if not streaming:
        ignored = [n for n in STREAM_ONLY_READER_OPTIONS if opts.has(n)]
        if ignored:
            log.warning("stream-only options ignored in a batch query: %s", ", ".join(ignored))
    return ReaderOptions(
        streaming=streaming,
        topics=topics,
        consumer_group=group,
        starting=starting,
        ending=ending,
        filter=_filter(opts),
        max_messages_per_trigger=max_trigger,
        min_messages_per_trigger=min_trigger,
        max_trigger_delay_ms=delay,
        num_partitions=opts.parse("numPartitions", _positive_int32),
        max_messages_per_partition=opts.parse("maxMessagesPerPartition", _positive),
        allocate_strategy=opts.parse(
            "allocateStrategy", lambda n, r: _choice(n, r, (AVERAGELY, AVERAGELY_BY_CIRCLE)), AVERAGELY
        ),
        commit_offsets_to_group=opts.parse("commitOffsetsToGroup", _bool, True),
        fail_on_data_loss=opts.parse("failOnDataLoss", _bool, True),
        pull_batch_size=opts.parse(
            "pullBatchSize",
            lambda n, r: _int(n, r, 1, f"an integer from 1 to {MAX_PULL_BATCH_SIZE}", MAX_PULL_BATCH_SIZE),
            DEFAULT_PULL_BATCH_SIZE,
        ),
        pull_timeout_ms=opts.parse("pullTimeoutMs", _positive_int32, DEFAULT_PULL_TIMEOUT_MS),
        pull_protocol=opts.parse("pullProtocol", lambda n, r: _choice(n, r, PULL_PROTOCOLS), PULL_AUTO),
        **transport,
    )


# ------------------------------------------------------------------------------------------ writer
def parse_writer_options(options: Mapping[str, Any]) -> WriterOptions:
    """Validates the options of `df.write` / `df.writeStream` `.format("rocketmq")`."""
    opts = _Options(options, COMMON_OPTIONS + WRITER_OPTIONS, READER_OPTIONS, "writer")
    transport = _transport(opts)
    latency_max = opts.parse("latencyMax", _int_list, DEFAULT_LATENCY_MAX)
    not_available = opts.parse("notAvailableDuration", _int_list, DEFAULT_NOT_AVAILABLE_DURATION)
    if len(latency_max) != len(not_available):
        raise OptionError(
            f"options 'latencyMax' ({len(latency_max)} values: {','.join(map(str, latency_max))}) and "
            f"'notAvailableDuration' ({len(not_available)} values: {','.join(map(str, not_available))}) "
            "must have the same number of values"
        )
    return WriterOptions(
        topic=opts.parse("topic", lambda n, r: _resource_name(n, r, "topic", TOPIC_MAX_LENGTH)),
        producer_group=opts.parse(
            "producerGroup",
            lambda n, r: _resource_name(n, r, "producer group", GROUP_MAX_LENGTH),
            DEFAULT_PRODUCER_GROUP,
        ),
        send_latency_fault_enable=opts.parse("sendLatencyFaultEnable", _bool, False),
        retry_times_when_send_failed=opts.parse(
            "retryTimesWhenSendFailed", lambda n, r: _int(n, r, 0, "an integer from 0 to 1000", 1000), 2
        ),
        send_msg_timeout_ms=opts.parse("sendMsgTimeoutMs", _positive_int32, 3000),
        max_message_size=opts.parse("maxMessageSize", _positive_int32, DEFAULT_MAX_MESSAGE_SIZE),
        batch_size=opts.parse("batchSize", _positive_int32, DEFAULT_BATCH_SIZE),
        batch_bytes=opts.parse("batchBytes", _positive_int32, DEFAULT_BATCH_BYTES),
        max_in_flight_requests=opts.parse("maxInFlightRequests", _positive_int32, DEFAULT_MAX_IN_FLIGHT),
        latency_max=latency_max,
        not_available_duration=not_available,
        **transport,
    )
