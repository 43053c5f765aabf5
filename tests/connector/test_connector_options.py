"""connector.options: defaults, every option of README's option tables, clear errors (table-driven), fuzzing."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.allocation import AVERAGELY, AVERAGELY_BY_CIRCLE
from connector.config import ClientConfig, FilterSpec
from connector.options import (
    COMMON_OPTIONS,
    READER_OPTIONS,
    WRITER_OPTIONS,
    OffsetSpec,
    OptionError,
    ReaderOptions,
    WriterOptions,
    parse_duration_ms,
    parse_reader_options,
    parse_writer_options,
)
from connector.queues import MessageQueue

EP = "127.0.0.1:8081"
BASE = {"endpoints": EP, "topic": "orders"}
PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def reader(streaming: bool = True, **extra: str) -> ReaderOptions:
    return parse_reader_options({**BASE, **extra}, streaming=streaming)


def writer(**extra: str) -> WriterOptions:
    return parse_writer_options({"endpoints": EP, **extra})


# ------------------------------------------------------------------------------------------ defaults
def test_reader_defaults_stream_and_batch() -> None:
    o = reader()
    assert o.endpoints == EP and o.topics == ("orders",)
    assert o.consumer_group == "spark-rocketmq-orders"
    assert o.starting == OffsetSpec("latest") and o.ending == OffsetSpec("latest")
    assert o.filter == FilterSpec("tag", "*") and o.filter.matches_all
    assert (o.max_messages_per_trigger, o.min_messages_per_trigger) == (None, None)
    assert o.max_trigger_delay_ms == 15 * 60 * 1000
    assert (o.num_partitions, o.max_messages_per_partition) == (None, None)
    assert o.allocate_strategy == AVERAGELY
    assert o.commit_offsets_to_group and o.fail_on_data_loss
    assert (o.pull_batch_size, o.pull_timeout_ms, o.pull_protocol) == (32768, 30000, "auto")
    assert (o.access_key, o.secret_key, o.namespace, o.tls, o.tls_ca_file) == (None, None, "", False, None)
    assert o.client_config == ClientConfig(EP)
    b = reader(streaming=False)
    assert b.starting == OffsetSpec("earliest") and b.ending == OffsetSpec("latest")


def test_writer_defaults() -> None:
    w = writer()
    assert w.topic is None and w.producer_group == "spark-rocketmq-producer"
    assert not w.send_latency_fault_enable
    assert (w.retry_times_when_send_failed, w.send_msg_timeout_ms, w.max_message_size) == (2, 3000, 4 << 20)
    assert w.latency_max == (50, 100, 550, 1000, 2000, 3000, 15000)
    assert w.not_available_duration == (0, 0, 30000, 60000, 120000, 180000, 600000)
    assert w.batch_size >= 1 and w.batch_bytes >= 1 and w.max_in_flight_requests >= 1


# ------------------------------------------------------------------------------------------ values
def test_reader_every_option_lowercased_keys() -> None:
    given_options = {
        "endpoints": "http://127.0.0.1:8081; 127.0.0.1:8082 ;",
        "topic": "a, b,a",
        "consumergroup": "g1",
        "startingoffsets": '{"a":{"broker-a":{"0":12,"1":-2}},"b":{"broker-b":{"3":-1}}}',
        "filterexpression": " TagA||TagB ",
        "filtertype": "TAG",
        "maxmessagespertrigger": "1000",
        "minmessagespertrigger": "10",
        "maxtriggerdelay": "30s",
        "numpartitions": "3",
        "maxmessagesperpartition": "500",
        "allocatestrategy": "AveragelyByCircle",
        "commitoffsetstogroup": "FALSE",
        "failondataloss": "false",
        "pullbatchsize": "1024",
        "pulltimeoutms": "5000",
        "pullprotocol": "Standard",
        "accesskey": "ak",
        "secretkey": "s3cr3t-value",
        "namespace": "ns1",
        "path": "ignored",
    }
    o = parse_reader_options(given_options, streaming=True)
    assert o.endpoints == "127.0.0.1:8081;127.0.0.1:8082"
    assert o.client_config.endpoint_list == ["127.0.0.1:8081", "127.0.0.1:8082"]
    assert o.topics == ("a", "b") and o.consumer_group == "g1"
    assert o.starting.kind == "specific"
    assert o.starting.offset_map() == {
        MessageQueue("a", "broker-a", 0): 12,
        MessageQueue("a", "broker-a", 1): -2,
        MessageQueue("b", "broker-b", 3): -1,
    }
    assert o.filter == FilterSpec("tag", "TagA || TagB")
    assert (o.max_messages_per_trigger, o.min_messages_per_trigger, o.max_trigger_delay_ms) == (
        1000,
        10,
        30000,
    )
    assert (o.num_partitions, o.max_messages_per_partition) == (3, 500)
    assert o.allocate_strategy == AVERAGELY_BY_CIRCLE
    assert not o.commit_offsets_to_group and not o.fail_on_data_loss
    assert (o.pull_batch_size, o.pull_timeout_ms, o.pull_protocol) == (1024, 5000, "standard")
    assert (o.access_key, o.secret_key, o.namespace) == ("ak", "s3cr3t-value", "ns1")
    assert pickle.loads(pickle.dumps(o)) == o
    assert hash(o.client_config) == hash(pickle.loads(pickle.dumps(o.client_config)))


def test_secret_never_in_repr_or_str() -> None:
    o = reader(accessKey="ak", secretKey="s3cr3t-value")
    w = writer(accessKey="ak", secretKey="s3cr3t-value")
    for obj in (o, w, o.client_config, w.client_config):
        assert "s3cr3t-value" not in repr(obj) and "s3cr3t-value" not in str(obj)
    with pytest.raises(OptionError) as e:
        reader(accessKey="ak")
    assert "secretKey" in str(e.value)


def test_timestamps_win_and_sql_filter() -> None:
    o = reader(
        streaming=False,
        startingTimestamp="1700000000000",
        startingOffsets="earliest",
        endingTimestamp="1800000000000",
    )
    assert o.starting == OffsetSpec("timestamp", timestamp_ms=1700000000000)
    assert o.ending == OffsetSpec("timestamp", timestamp_ms=1800000000000)
    e = reader(streaming=False, endingOffsets='{"orders":{"broker-a":{"0":5,"1":-1}}}')
    assert e.ending.offset_map() == {
        MessageQueue("orders", "broker-a", 0): 5,
        MessageQueue("orders", "broker-a", 1): -1,
    }
    assert reader(startingOffsets="GROUP").starting == OffsetSpec("group")
    f = reader(filterType="sql", filterExpression="a > 5 AND b = 'x'")
    assert f.filter == FilterSpec("sql", "a > 5 AND b = 'x'") and not f.filter.matches_all


def test_writer_every_option() -> None:
    w = writer(
        topic="orders",
        producerGroup="pg",
        sendLatencyFaultEnable="true",
        retryTimesWhenSendFailed="0",
        sendMsgTimeoutMs="1000",
        maxMessageSize="1024",
        batchSize="64",
        batchBytes="65536",
        maxInFlightRequests="8",
        latencyMax="10,20",
        notAvailableDuration="0,500",
        checkpointLocation="/tmp/cp",
    )
    assert (w.topic, w.producer_group, w.send_latency_fault_enable) == ("orders", "pg", True)
    assert (w.retry_times_when_send_failed, w.send_msg_timeout_ms, w.max_message_size) == (0, 1000, 1024)
    assert (w.batch_size, w.batch_bytes, w.max_in_flight_requests) == (64, 65536, 8)
    assert (w.latency_max, w.not_available_duration) == ((10, 20), (0, 500))


def test_tls_ca_file_is_read_on_the_driver(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_bytes(PEM)
    o = reader(tlsCaFile=str(ca))
    assert o.tls and o.tls_ca_pem == PEM and o.client_config.tls_ca_pem == PEM
    assert PEM.decode() not in repr(o)
    with pytest.raises(OptionError, match="needs 'tls'='true'"):
        reader(tlsCaFile=str(ca), tls="false")
    with pytest.raises(OptionError, match="readable PEM file"):
        reader(tlsCaFile=str(tmp_path / "missing.pem"))
    (tmp_path / "bad.pem").write_bytes(b"nope")
    with pytest.raises(OptionError, match="no '-----BEGIN'"):
        reader(tlsCaFile=str(tmp_path / "bad.pem"))


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("15m", 900_000),
        ("30s", 30_000),
        ("500ms", 500),
        ("1h", 3_600_000),
        ("250", 250),
        ("2 min", 120_000),
        ("1d", 86_400_000),
        ("0", 0),
    ],
)
def test_durations(text: str, ms: int) -> None:
    assert parse_duration_ms("maxTriggerDelay", text) == ms


# ------------------------------------------------------------------------------------------ errors (table)
READER_ERRORS: list[tuple[dict[str, str], bool, str]] = [
    ({"endpoints": None}, True, "exactly one of options 'nameServer' and 'endpoints' is required (neither"),
    (
        {"nameServer": "127.0.0.1:9876"},
        True,
        "exactly one of options 'nameServer' and 'endpoints' is required (both",
    ),
    (
        {"endpoints": None, "nameServer": "ns"},
        True,
        "option 'nameServer'='ns' is invalid: expected 'host:port'",
    ),
    ({"endpoints": "localhost"}, True, "option 'endpoints'='localhost' is invalid: expected 'host:port'"),
    ({"endpoints": "h:0"}, True, "port from 1 to 65535"),
    ({"endpoints": "h:80x"}, True, "'host:port'"),
    ({"endpoints": " ; "}, True, "'host:port'"),
    ({"topic": None}, True, "option 'topic' is required"),
    ({"topic": "a,,b"}, True, "none empty"),
    ({"topic": "bad topic"}, True, "a topic name of 1 to 127 characters"),
    ({"topic": "x" * 128}, True, "a topic name of 1 to 127 characters"),
    ({"consumerGroup": "g g"}, True, "option 'consumerGroup'='g g' is invalid"),
    (
        {"startingOffsets": "first"},
        True,
        "option 'startingOffsets'='first' is invalid: expected earliest, latest, group",
    ),
    ({"startingOffsets": "latest"}, False, "'latest' reads nothing in a batch query"),
    ({"startingOffsets": '{"orders":{"broker-a":{"0":-3}}}'}, True, "-2 (earliest)"),
    ({"startingOffsets": '{"orders":{"broker-a":{"0":-1}}}'}, False, "no -1 (latest) in a batch query"),
    (
        {"startingOffsets": '{"other":{"broker-a":{"0":1}}}'},
        True,
        "only topics of option 'topic' (orders); not other",
    ),
    ({"startingOffsets": '{"orders":'}, True, "not valid JSON"),
    ({"startingOffsets": '{"orders":{"broker-a":{"q":1}}}'}, True, "queue id 'q'"),
    (
        {"startingTimestamp": "yesterday"},
        True,
        "option 'startingTimestamp'='yesterday' is invalid: expected an integer >= 0",
    ),
    ({"endingOffsets": "latest"}, True, "option 'endingOffsets' is not valid in streaming queries"),
    ({"endingTimestamp": "5"}, True, "option 'endingTimestamp' is not valid in streaming queries"),
    ({"endingOffsets": "earliest"}, False, "option 'endingOffsets'='earliest' is invalid"),
    ({"endingOffsets": '{"orders":{"broker-a":{"0":-2}}}'}, False, "no -2 (earliest) as an end"),
    ({"startingTimestamp": "10", "endingTimestamp": "5"}, False, "after 'endingTimestamp'=5"),
    (
        {"startingOffsets": '{"orders":{"b":{"0":9}}}', "endingOffsets": '{"orders":{"b":{"0":3}}}'},
        False,
        "starts queue orders/b/0 at 9, after its 'endingOffsets' 3",
    ),
    ({"filterType": "regex"}, True, "option 'filterType'='regex' is invalid: expected one of 'tag', 'sql'"),
    ({"filterType": "sql"}, True, "option 'filterExpression' is required with 'filterType'='sql'"),
    ({"filterExpression": "a|b"}, True, "a tag has no '|'"),
    ({"filterExpression": "||"}, True, "option 'filterExpression'='||' is invalid"),
    (
        {"maxMessagesPerTrigger": "abc"},
        True,
        "option 'maxMessagesPerTrigger'='abc' is invalid: expected a positive integer",
    ),
    ({"maxMessagesPerTrigger": "0"}, True, "expected a positive integer"),
    ({"maxMessagesPerTrigger": "-5"}, True, "expected a positive integer"),
    ({"maxMessagesPerTrigger": "1.5"}, True, "expected a positive integer"),
    ({"maxMessagesPerTrigger": "9" * 30}, True, "expected a positive integer"),
    ({"minMessagesPerTrigger": "x"}, True, "option 'minMessagesPerTrigger'='x' is invalid"),
    (
        {"minMessagesPerTrigger": "11", "maxMessagesPerTrigger": "10"},
        True,
        "'minMessagesPerTrigger'=11 is larger than 'maxMessagesPerTrigger'=10",
    ),
    (
        {"maxTriggerDelay": "15 fortnights"},
        True,
        "option 'maxTriggerDelay'='15 fortnights' is invalid: expected a duration",
    ),
    ({"maxTriggerDelay": "-1s"}, True, "expected a duration"),
    (
        {"numPartitions": "0"},
        True,
        "option 'numPartitions'='0' is invalid: expected an integer from 1 to 2147483647",
    ),
    ({"maxMessagesPerPartition": "none"}, True, "option 'maxMessagesPerPartition'='none' is invalid"),
    ({"allocateStrategy": "consistentHash"}, True, "expected one of 'averagely', 'averagelyByCircle'"),
    (
        {"commitOffsetsToGroup": "yes"},
        True,
        "option 'commitOffsetsToGroup'='yes' is invalid: expected 'true' or 'false'",
    ),
    ({"failOnDataLoss": "1"}, True, "option 'failOnDataLoss'='1' is invalid: expected 'true' or 'false'"),
    ({"pullBatchSize": "65537"}, True, "expected an integer from 1 to 65536"),
    ({"pullTimeoutMs": "0"}, True, "option 'pullTimeoutMs'='0' is invalid"),
    ({"pullProtocol": "grpc"}, True, "expected one of 'auto', 'bulk', 'standard'"),
    ({"secretKey": "s3cr3t"}, True, "option 'accessKey' is required when 'secretKey' is given"),
    ({"accessKey": " ", "secretKey": "s"}, True, "option 'accessKey'=' ' is invalid"),
    ({"namespace": "a b"}, True, "option 'namespace'='a b' is invalid"),
    ({"tls": "on"}, True, "option 'tls'='on' is invalid: expected 'true' or 'false'"),
    (
        {"startingOffset": "earliest"},
        True,
        "unknown option 'startingOffset' for the rocketmq reader; did you mean 'startingOffsets'?",
    ),
    ({"maxOffsetsPerTrigger": "5"}, True, "did you mean 'maxMessagesPerTrigger'?"),
    (
        {"kafka.bootstrap.servers": "x"},
        True,
        "unknown option 'kafka.bootstrap.servers' for the rocketmq reader (accepted options:",
    ),
    ({"producerGroup": "pg"}, True, "'producerGroup' is an option of the writer"),
]


@pytest.mark.parametrize(("extra", "streaming", "message"), READER_ERRORS)
def test_reader_errors(extra: dict[str, str | None], streaming: bool, message: str) -> None:
    options = {**BASE, **{k: v for k, v in extra.items() if v is not None}}
    for k, v in extra.items():
        if v is None:
            options.pop(k)
    with pytest.raises(OptionError) as e:
        parse_reader_options(options, streaming=streaming)
    assert message in str(e.value)
    # Spark hands the keys over lowercased: same outcome
    with pytest.raises(OptionError) as e2:
        parse_reader_options({k.lower(): v for k, v in options.items()}, streaming=streaming)
    assert str(e2.value).lower() == str(e.value).lower()


WRITER_ERRORS: list[tuple[dict[str, str], str]] = [
    ({"topic": "a,b"}, "option 'topic'='a,b' is invalid: expected a topic name"),
    ({"producerGroup": ""}, "option 'producerGroup'='' is invalid"),
    ({"sendLatencyFaultEnable": "maybe"}, "expected 'true' or 'false'"),
    (
        {"retryTimesWhenSendFailed": "-1"},
        "option 'retryTimesWhenSendFailed'='-1' is invalid: expected an integer from 0 to 1000",
    ),
    ({"sendMsgTimeoutMs": "0"}, "option 'sendMsgTimeoutMs'='0' is invalid"),
    ({"maxMessageSize": "4MB"}, "option 'maxMessageSize'='4MB' is invalid"),
    ({"batchSize": "0"}, "option 'batchSize'='0' is invalid"),
    ({"batchBytes": "x"}, "option 'batchBytes'='x' is invalid"),
    ({"maxInFlightRequests": "0"}, "option 'maxInFlightRequests'='0' is invalid"),
    ({"latencyMax": "100,50"}, "non-decreasing"),
    ({"latencyMax": "1,,2"}, "option 'latencyMax'='1,,2' is invalid"),
    ({"notAvailableDuration": "0,-1"}, "option 'notAvailableDuration'='0,-1' is invalid"),
    ({"latencyMax": "1,2,3"}, "must have the same number of values"),
    ({"startingOffsets": "earliest"}, "'startingOffsets' is an option of the reader"),
    ({"batchsise": "5"}, "did you mean 'batchSize'?"),
    ({"endpoints": "nope"}, "option 'endpoints'='nope' is invalid"),
    ({"nameServer": "127.0.0.1:9876"}, "exactly one of options 'nameServer' and 'endpoints'"),
]


@pytest.mark.parametrize(("extra", "message"), WRITER_ERRORS)
def test_writer_errors(extra: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError) as e:
        parse_writer_options({"endpoints": EP, **extra})
    assert message in str(e.value)


def test_duplicate_keys_differing_in_case() -> None:
    with pytest.raises(OptionError, match="given twice"):
        parse_reader_options({**BASE, "Topic": "other"}, streaming=True)
    assert parse_reader_options({**BASE, "TOPIC": "orders"}, streaming=True).topics == ("orders",)


def test_stream_only_options_in_batch_warn(caplog: pytest.LogCaptureFixture) -> None:
    reader(streaming=False, maxMessagesPerTrigger="5")
    assert "ignored in a batch query: maxMessagesPerTrigger" in caplog.text


# ------------------------------------------------------------------------------------------ fuzz
KNOWN = [k for k in COMMON_OPTIONS + READER_OPTIONS if k != "tlsCaFile"]
WRITER_KNOWN = [k for k in COMMON_OPTIONS + WRITER_OPTIONS if k != "tlsCaFile"]
values = st.one_of(
    st.text(max_size=12),
    st.integers(-5, 10**20).map(str),
    st.sampled_from(
        ["true", "false", "earliest", "latest", "group", "15m", "sql", "*", EP, "orders", "-1", "-2"]
    ),
    st.sampled_from(['{"orders":{"broker-a":{"0":1}}}', '{"orders":{"b":{"0":-1}}}', "{}", "{", '{"x":1}']),
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from([*KNOWN, "path", "bogus"]), values, max_size=8), st.booleans())
def test_fuzz_reader_options(extra: dict[str, str], streaming: bool) -> None:
    try:
        o = parse_reader_options({**BASE, **extra}, streaming=streaming)
    except OptionError as e:
        assert str(e)
    else:
        assert isinstance(o, ReaderOptions)
        assert pickle.loads(pickle.dumps(o)) == o


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(WRITER_KNOWN), values, max_size=8))
def test_fuzz_writer_options(extra: dict[str, str]) -> None:
    try:
        parse_writer_options({"endpoints": EP, **extra})
    except OptionError as e:
        assert str(e)


@given(st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=5), st.booleans())
def test_fuzz_arbitrary_keys(options: dict[str, str], streaming: bool) -> None:
    try:
        parse_reader_options(options, streaming=streaming)
    except OptionError as e:
        assert str(e)


def test_name_server_selects_remoting() -> None:
    o = parse_reader_options(
        {"nameServer": " 10.0.0.5:9876; 10.0.0.6:9876 ;", "topic": "orders"}, streaming=True
    )
    assert (o.name_server, o.endpoints) == ("10.0.0.5:9876;10.0.0.6:9876", "")
    config = o.client_config
    assert config.remoting and config.name_server_list == ["10.0.0.5:9876", "10.0.0.6:9876"]
    assert config.target == "name server 10.0.0.5:9876;10.0.0.6:9876"
    w = parse_writer_options({"NAMESERVER": "10.0.0.5:9876", "topic": "t"})
    assert w.client_config.name_server == "10.0.0.5:9876" and not w.client_config.endpoints
    assert not parse_writer_options({"endpoints": EP}).client_config.remoting
