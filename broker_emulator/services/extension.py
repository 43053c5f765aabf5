"""rocketmq_emulator.v1.EmulatorService: unary bulk pull (Arrow IPC) and the admin verbs."""

from __future__ import annotations

import json
import logging

from rocketmq_protocol.extension import pb, pb_grpc
from rocketmq_protocol.extension.arrow_payload import encode_payload
from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.names import group_error, topic_error

from ..cluster import Broker, Cluster
from ..filtering import FilterError, parse_filter
from ..long_polling import LongPollingService
from .access import MUTATING_ADMIN_VERBS, check_access
from .common import apply_faults, polling_timeout
from .pulling import pull, pull_status

log = logging.getLogger(__name__)

BULK_MAX_MESSAGES = 65536
BULK_DEFAULT_MAX_BYTES = 16 * 1024 * 1024


class ExtensionService(pb_grpc.EmulatorServiceServicer):
    def __init__(self, cluster: Cluster, broker: Broker, polling: LongPollingService) -> None:
        self.cluster = cluster
        self.broker = broker
        self.store = broker.store
        self.polling = polling

    async def BulkPull(self, request, context):
        await apply_faults(self.broker, context)
        _, denied = check_access(self.cluster, "BulkPull", request, context)
        if denied is not None:
            return pb.BulkPullResponse(code=denied.code, message=denied.message)
        topic = request.topic
        err = topic_error(topic) or group_error(request.group)
        if err:
            return pb.BulkPullResponse(code=d.BAD_REQUEST, message=err)
        cfg = self.store.topics.get(topic)
        if cfg is None:
            return pb.BulkPullResponse(
                code=d.TOPIC_NOT_FOUND, message=f"topic {topic} is not served by {self.broker.name}"
            )
        qid = request.queue_id
        if not 0 <= qid < cfg.queues:
            return pb.BulkPullResponse(
                code=d.BAD_REQUEST, message=f"queue id {qid} of topic {topic} is outside 0..{cfg.queues - 1}"
            )
        try:
            flt = parse_filter(request.filter.type, request.filter.expression)
        except FilterError as e:
            return pb.BulkPullResponse(code=d.ILLEGAL_FILTER_EXPRESSION, message=str(e))
        n = min(max(request.max_messages, 1), BULK_MAX_MESSAGES)
        max_bytes = request.max_bytes if request.max_bytes > 0 else BULK_DEFAULT_MAX_BYTES
        timeout = polling_timeout(request.long_polling_timeout_ms / 1000.0, context)
        result = await pull(self.store, self.polling, topic, qid, request.offset, n, max_bytes, flt, timeout)
        code, msg = pull_status(result)
        payload = encode_payload(result.table) if result.table is not None else b""
        return pb.BulkPullResponse(
            code=code,
            message=msg,
            next_offset=result.next_offset,
            min_offset=result.min_offset,
            max_offset=result.max_offset,
            count=result.count,
            arrow_ipc=payload,
        )

    async def Admin(self, request, context):
        account, denied = check_access(self.cluster, "Admin", request, context)
        if denied is not None:
            return pb.AdminResponse(code=denied.code, message=denied.message)
        if account is not None and not account.admin and request.verb in MUTATING_ADMIN_VERBS:
            return pb.AdminResponse(
                code=d.FORBIDDEN,
                message=f"access key {account.access_key!r} may not run admin verb {request.verb!r} "
                f'(verbs {", ".join(sorted(MUTATING_ADMIN_VERBS))} need "admin": true in its ACL account)',
            )
        try:
            args = json.loads(request.args_json) if request.args_json else {}
            handler = getattr(self, "_admin_" + request.verb.replace("-", "_"), None)
            if handler is None:
                return pb.AdminResponse(code=d.BAD_REQUEST, message=f"unknown admin verb {request.verb!r}")
            result = handler(**args)
        except (ValueError, KeyError, TypeError) as e:
            return pb.AdminResponse(code=d.BAD_REQUEST, message=str(e))
        return pb.AdminResponse(code=d.OK, message="OK", result_json=json.dumps(result))

    # --------------------------------------------------------------- admin verbs
    def _admin_create_topic(
        self,
        name: str,
        queues: int | None = None,
        message_type: str = "MIXED",
        brokers: list[str] | None = None,
    ) -> dict:
        for b in brokers or []:
            self.cluster.broker(b)  # unknown broker names are an error, not an empty topic
        cfgs = self.cluster.create_topic(name, queues, message_type, brokers)
        served = [b.name for b in self.cluster.brokers if brokers is None or b.name in brokers]
        return {"topic": name, "brokers": served, "queues": cfgs[0].queues}

    def _admin_topics(self, topic: str | None = None) -> list[dict]:
        out = []
        for b in self.cluster.brokers:
            for name, cfg in sorted(b.store.topics.items()):
                if topic and name != topic:
                    continue
                for qid in range(cfg.queues):
                    lo, hi = b.store.min_max(name, qid)
                    out.append(
                        {
                            "topic": name,
                            "broker": b.name,
                            "queue": qid,
                            "min_offset": lo,
                            "max_offset": hi,
                            "message_type": cfg.message_type,
                        }
                    )
        return out

    def _admin_groups(self) -> dict:
        clients = [c.to_dict() for c in self.cluster.clients.snapshot()]
        groups: dict[str, dict] = {}
        for b in self.cluster.brokers:
            for group, topic, _qid, _off in b.store.consumer_offsets():
                g = groups.setdefault(group, {"group": group, "topics": set(), "clients": 0})
                g["topics"].add(topic)
        for c in clients:
            if c["group"]:
                g = groups.setdefault(c["group"], {"group": c["group"], "topics": set(), "clients": 0})
                g["clients"] += 1
                g["topics"].update(c["topics"])
        return {
            "clients": clients,
            "groups": [
                {**g, "topics": sorted(g["topics"])}
                for g in sorted(groups.values(), key=lambda x: x["group"])
            ],
        }

    def _admin_update_group(
        self, group: str, max_retries: int | None = None, fifo: bool | None = None
    ) -> dict:
        cfg = self.cluster.update_group(group, max_retries, fifo)
        return {"group": group, "max_retries": cfg.max_retries, "fifo": cfg.fifo}

    def _admin_lag(self, group: str | None = None, topic: str | None = None) -> list[dict]:
        """Per group and queue: committed offsets (pull consumers, UpdateOffset) and POP progress (mode pop,
        including the group's retry topics), with the messages still in flight for POP groups."""
        out = []
        for b in self.cluster.brokers:
            rows = [(g, t, q, off, "pull") for g, t, q, off in b.store.consumer_offsets()]
            inflight: dict[tuple[str, str, int], int] = {}
            if b.pop is not None:
                rows += [(g, t, q, off, "pop") for g, t, q, off in b.pop.progress()]
                for inf in b.pop.inflight.values():
                    key = (inf.group, inf.source, inf.queue_id)
                    inflight[key] = inflight.get(key, 0) + 1
            for g, t, qid, off, mode in sorted(rows):
                if (group and g != group) or (topic and t != topic and not t.endswith("_" + topic)):
                    continue
                lo, hi = b.store.min_max(t, qid)
                out.append(
                    {
                        "group": g,
                        "topic": t,
                        "broker": b.name,
                        "queue": qid,
                        "mode": mode,
                        "committed": off,
                        "min_offset": lo,
                        "max_offset": hi,
                        "lag": max(hi - max(off, lo), 0),
                        "inflight": inflight.get((g, t, qid), 0),
                    }
                )
        return out

    def _admin_fault(self, broker: str, clear: bool = False, **faults) -> dict:
        target = self.cluster.broker(broker)
        return {"broker": broker, "faults": target.clear_faults() if clear else target.set_fault(**faults)}

    def _admin_stats(self) -> dict:
        return {
            "brokers": [
                {
                    **b.store.stats(),
                    "endpoint": b.endpoint,
                    "faults": b.faults.current.to_dict(),
                    "pop": b.pop.stats() if b.pop else {},
                    "delayed_pending": b.delay.pending if b.delay else 0,
                    "transactions_pending": b.transactions.pending if b.transactions else 0,
                }
                for b in self.cluster.brokers
            ],
            "clients": len(self.cluster.clients.snapshot()),
            "held_requests": sum(b.polling.held for b in self.cluster.brokers if b.polling is not None),
        }

    def _admin_reload_acl(self) -> dict:
        return self.cluster.acl.reload()

    def _admin_endpoints(self) -> list[dict]:
        return [{"broker": b.name, "endpoint": b.endpoint} for b in self.cluster.brokers]
