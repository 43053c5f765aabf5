"""Typed custom headers: the `extFields` of requests and responses, as dataclasses.

One dataclass per apache/rocketmq header class (`remoting.protocol.header.*`). The table *is* the
dataclass: a field without a default is required (`@CFNotNull` in Java), its wire name is the camelCase
of the attribute unless `wire(...)` says otherwise, and its type (str, int or bool) drives the conversion
to and from the all-string ext fields, as `RemotingCommand.decodeCommandCustomHeader` and
`makeCustomHeaderToNet` do. None values are not sent.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, ClassVar, Self

from .errors import MissingFieldError

__all__ = [
    "CheckTransactionStateRequestHeader",
    "ConsumerSendMsgBackRequestHeader",
    "CreateTopicRequestHeader",
    "CustomHeader",
    "DeleteTopicRequestHeader",
    "EndTransactionRequestHeader",
    "GetConsumeStatsRequestHeader",
    "GetConsumerConnectionListRequestHeader",
    "GetConsumerListByGroupRequestHeader",
    "GetEarliestMsgStoretimeRequestHeader",
    "GetEarliestMsgStoretimeResponseHeader",
    "GetMaxOffsetRequestHeader",
    "GetMaxOffsetResponseHeader",
    "GetMinOffsetRequestHeader",
    "GetMinOffsetResponseHeader",
    "GetRouteInfoRequestHeader",
    "GetTopicStatsInfoRequestHeader",
    "GetTopicsByClusterRequestHeader",
    "NotifyConsumerIdsChangedRequestHeader",
    "PullMessageRequestHeader",
    "PullMessageResponseHeader",
    "QueryConsumerOffsetRequestHeader",
    "QueryConsumerOffsetResponseHeader",
    "QueryMessageRequestHeader",
    "QueryTopicConsumeByWhoRequestHeader",
    "ResetOffsetRequestHeader",
    "SearchOffsetRequestHeader",
    "SearchOffsetResponseHeader",
    "SendMessageRequestHeader",
    "SendMessageRequestHeaderV2",
    "SendMessageResponseHeader",
    "UnregisterClientRequestHeader",
    "UpdateConsumerOffsetRequestHeader",
    "ViewMessageRequestHeader",
    "send_header_from_ext_fields",
    "wire",
]


def wire(name: str, default: Any = dataclasses.MISSING) -> Any:
    """A field whose ext-field name is not the camelCase of the attribute (e.g. `clientID`, V2's `a`..`n`)."""
    if default is dataclasses.MISSING:
        return field(metadata={"wire": name})
    return field(default=default, metadata={"wire": name})


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _parse_bool(value: str) -> bool:
    return value.lower() == "true"  # java.lang.Boolean.parseBoolean


@cache
def _spec(cls: type) -> tuple[tuple[str, str, type, bool], ...]:
    """(attribute, wire name, scalar type, required) for every field of a header class."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        kind = hints[f.name]
        if isinstance(kind, types.UnionType):
            kind = next(a for a in typing.get_args(kind) if a is not type(None))
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        out.append((f.name, f.metadata.get("wire", _camel(f.name)), kind, required))
    return tuple(out)


class CustomHeader:
    """Conversion of a header dataclass to and from ext fields (mixin of every header below)."""

    __slots__ = ()
    NAME: ClassVar[str] = ""

    def to_ext_fields(self) -> dict[str, str]:
        """The header as ext fields: ints in decimal, bools as true/false, None fields left out."""
        out: dict[str, str] = {}
        for attr, name, kind, _ in _spec(type(self)):
            value = getattr(self, attr)
            if value is None:
                continue
            if kind is bool:
                out[name] = "true" if value else "false"
            else:
                out[name] = str(int(value)) if kind is int else str(value)
        return out

    @classmethod
    def from_ext_fields(cls, ext_fields: Mapping[str, str]) -> Self:
        """Parses ext fields; a missing required field or a non-integer int raises MissingFieldError."""
        kwargs: dict[str, Any] = {}
        header = cls.NAME or cls.__name__
        for attr, name, kind, required in _spec(cls):
            raw = ext_fields.get(name)
            if raw is None:
                if required:
                    raise MissingFieldError(header, name)
                continue
            if kind is int:
                try:
                    kwargs[attr] = int(raw)
                except ValueError:
                    raise MissingFieldError(header, name, f"is not an integer: {raw!r}") from None
            elif kind is bool:
                kwargs[attr] = _parse_bool(raw)
            else:
                kwargs[attr] = raw
        return cls(**kwargs)


@dataclass(kw_only=True)
class _RpcRequest(CustomHeader):
    """`RpcRequestHeader` + `TopicRequestHeader` fields (optional on every request, named as on the wire)."""

    ns: str | None = None  # namespace
    nsd: bool | None = None  # namespaced
    bname: str | None = None  # broker name (Java `setBrokerName`)
    oway: bool | None = None  # oneway
    lo: bool | None = None  # logical queue (static topics)


# ------------------------------------------------------------------------------------------------ name server


@dataclass
class GetRouteInfoRequestHeader(_RpcRequest):
    """GET_ROUTEINFO_BY_TOPIC (105)."""

    topic: str
    accept_standard_json_only: bool | None = None


@dataclass
class GetTopicsByClusterRequestHeader(CustomHeader):
    """GET_TOPICS_BY_CLUSTER (224)."""

    cluster: str


# ------------------------------------------------------------------------------------------------ pull


@dataclass
class PullMessageRequestHeader(_RpcRequest):
    """PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361)."""

    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    sys_flag: int
    commit_offset: int
    suspend_timeout_millis: int
    sub_version: int
    subscription: str | None = None
    expression_type: str | None = None
    max_msg_bytes: int | None = None
    request_source: int | None = None
    proxy_froward_client_id: str | None = None  # sic, upstream's spelling
    lite_topic: str | None = None


@dataclass
class PullMessageResponseHeader(CustomHeader):
    """Response of PULL_MESSAGE / LITE_PULL_MESSAGE."""

    suggest_which_broker_id: int
    next_begin_offset: int
    min_offset: int
    max_offset: int
    offset_delta: int | None = None
    topic_sys_flag: int | None = None
    group_sys_flag: int | None = None
    forbidden_type: int | None = None


# ------------------------------------------------------------------------------------------------ send


@dataclass
class SendMessageRequestHeader(_RpcRequest):
    """SEND_MESSAGE (10), long names. The broker name travels in the base field `bname`."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool | None = None
    batch: bool | None = None
    max_reconsume_times: int | None = None

    def to_v2(self) -> SendMessageRequestHeaderV2:
        """`SendMessageRequestHeaderV2.createSendMessageRequestHeaderV2`."""
        return SendMessageRequestHeaderV2(
            **{a: getattr(self, a) for a, *_ in _spec(SendMessageRequestHeaderV2) if a != "broker_name"},
            broker_name=self.bname,
        )


@dataclass
class SendMessageRequestHeaderV2(CustomHeader):
    """SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320): the same fields under one-letter names."""

    producer_group: str = wire("a")
    topic: str = wire("b")
    default_topic: str = wire("c")
    default_topic_queue_nums: int = wire("d")
    queue_id: int = wire("e")
    sys_flag: int = wire("f")
    born_timestamp: int = wire("g")
    flag: int = wire("h")
    properties: str | None = wire("i", None)
    reconsume_times: int | None = wire("j", None)
    unit_mode: bool | None = wire("k", None)
    max_reconsume_times: int | None = wire("l", None)
    batch: bool | None = wire("m", None)
    broker_name: str | None = wire("n", None)

    def to_v1(self) -> SendMessageRequestHeader:
        """`SendMessageRequestHeaderV2.createSendMessageRequestHeaderV1`."""
        kwargs = {a: getattr(self, a) for a, *_ in _spec(SendMessageRequestHeaderV2) if a != "broker_name"}
        return SendMessageRequestHeader(**kwargs, bname=self.broker_name)


def send_header_from_ext_fields(code: int, ext_fields: Mapping[str, str]) -> SendMessageRequestHeader:
    """The send header of SEND_MESSAGE (long names) or SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE (short names)."""
    if code in (310, 320):
        return SendMessageRequestHeaderV2.from_ext_fields(ext_fields).to_v1()
    return SendMessageRequestHeader.from_ext_fields(ext_fields)


@dataclass
class SendMessageResponseHeader(CustomHeader):
    """Response of the sends. `msg_id` is the offset message id (comma-joined for batches)."""

    msg_id: str
    queue_id: int
    queue_offset: int
    transaction_id: str | None = None
    batch_uniq_id: str | None = None
    recall_handle: str | None = None


# ------------------------------------------------------------------------------------------------ offsets


@dataclass
class GetMinOffsetRequestHeader(_RpcRequest):
    """GET_MIN_OFFSET (31)."""

    topic: str
    queue_id: int


@dataclass
class GetMinOffsetResponseHeader(CustomHeader):
    offset: int


@dataclass
class GetMaxOffsetRequestHeader(_RpcRequest):
    """GET_MAX_OFFSET (30). `committed` is true on the broker when absent."""

    topic: str
    queue_id: int
    committed: bool | None = None


@dataclass
class GetMaxOffsetResponseHeader(CustomHeader):
    offset: int


@dataclass
class SearchOffsetRequestHeader(_RpcRequest):
    """SEARCH_OFFSET_BY_TIMESTAMP (29). `boundary_type` is "lower" (default) or "upper"."""

    topic: str
    queue_id: int
    timestamp: int
    boundary_type: str | None = None
    lite_topic: str | None = None


@dataclass
class SearchOffsetResponseHeader(CustomHeader):
    offset: int


@dataclass
class GetEarliestMsgStoretimeRequestHeader(_RpcRequest):
    """GET_EARLIEST_MSG_STORETIME (32)."""

    topic: str
    queue_id: int


@dataclass
class GetEarliestMsgStoretimeResponseHeader(CustomHeader):
    timestamp: int


@dataclass
class QueryConsumerOffsetRequestHeader(_RpcRequest):
    """QUERY_CONSUMER_OFFSET (14). Send `set_zero_if_not_found=False` to get 22 for a never-committed queue."""

    consumer_group: str
    topic: str
    queue_id: int
    set_zero_if_not_found: bool | None = None


@dataclass
class QueryConsumerOffsetResponseHeader(CustomHeader):
    offset: int


@dataclass
class UpdateConsumerOffsetRequestHeader(_RpcRequest):
    """UPDATE_CONSUMER_OFFSET (15)."""

    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: int


# ------------------------------------------------------------------------------------------------ clients


@dataclass
class GetConsumerListByGroupRequestHeader(_RpcRequest):
    """GET_CONSUMER_LIST_BY_GROUP (38); the reply body is `{"consumerIdList": [...]}`."""

    consumer_group: str


@dataclass
class UnregisterClientRequestHeader(_RpcRequest):
    """UNREGISTER_CLIENT (35)."""

    client_id: str = wire("clientID")
    producer_group: str | None = None
    consumer_group: str | None = None


@dataclass
class NotifyConsumerIdsChangedRequestHeader(_RpcRequest):
    """NOTIFY_CONSUMER_IDS_CHANGED (40), broker → client, oneway."""

    consumer_group: str


@dataclass
class ConsumerSendMsgBackRequestHeader(_RpcRequest):
    """CONSUMER_SEND_MSG_BACK (36): `offset` is the message's commit-log offset."""

    offset: int
    group: str
    delay_level: int
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool | None = None
    max_reconsume_times: int | None = None


@dataclass
class EndTransactionRequestHeader(_RpcRequest):
    """END_TRANSACTION (37), oneway. `commit_or_rollback` is a MessageSysFlag transaction value (0/8/12)."""

    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    commit_or_rollback: int
    msg_id: str
    topic: str | None = None
    from_transaction_check: bool | None = None
    transaction_id: str | None = None


@dataclass
class CheckTransactionStateRequestHeader(_RpcRequest):
    """CHECK_TRANSACTION_STATE (39), broker → producer, oneway; the body is the half message."""

    tran_state_table_offset: int
    commit_log_offset: int
    topic: str | None = None
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None


# ------------------------------------------------------------------------------------------------ admin


@dataclass
class CreateTopicRequestHeader(_RpcRequest):
    """UPDATE_AND_CREATE_TOPIC (17), to a broker (mqadmin updateTopic)."""

    topic: str
    default_topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_filter_type: str
    order: bool
    topic_sys_flag: int | None = None
    attributes: str | None = None
    force: bool | None = None


@dataclass
class DeleteTopicRequestHeader(_RpcRequest):
    """DELETE_TOPIC_IN_BROKER (215) / DELETE_TOPIC_IN_NAMESRV (216)."""

    topic: str


@dataclass
class GetTopicStatsInfoRequestHeader(_RpcRequest):
    """GET_TOPIC_STATS_INFO (202), mqadmin topicStatus; the reply body is a TopicStatsTable."""

    topic: str


@dataclass
class GetConsumeStatsRequestHeader(_RpcRequest):
    """GET_CONSUME_STATS (208), mqadmin consumerProgress; the reply body is a ConsumeStats."""

    consumer_group: str
    topic: str | None = None
    topic_list: str | None = None


@dataclass
class GetConsumerConnectionListRequestHeader(_RpcRequest):
    """GET_CONSUMER_CONNECTION_LIST (203)."""

    consumer_group: str


@dataclass
class QueryTopicConsumeByWhoRequestHeader(_RpcRequest):
    """QUERY_TOPIC_CONSUME_BY_WHO (300)."""

    topic: str


@dataclass
class ResetOffsetRequestHeader(_RpcRequest):
    """INVOKE_BROKER_TO_RESET_OFFSET (222), mqadmin resetOffsetByTime; `queue_id` -1 means all queues."""

    group: str
    topic: str
    timestamp: int
    is_force: bool
    queue_id: int | None = None
    offset: int | None = None


@dataclass
class ViewMessageRequestHeader(CustomHeader):
    """VIEW_MESSAGE_BY_ID (33): `offset` is the commit-log offset of an offset message id."""

    offset: int
    topic: str | None = None


@dataclass
class QueryMessageRequestHeader(_RpcRequest):
    """QUERY_MESSAGE (12): by key or unique key."""

    topic: str
    key: str
    max_num: int
    begin_timestamp: int
    end_timestamp: int
    index_type: str | None = None
    last_key: str | None = None
