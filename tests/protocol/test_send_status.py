"""`decode_send_response` reads an OK SendMessageResponse's status alone and any other one in full."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2 as s
from rocketmq_protocol.grpc_v2.send_status import decode_send_response


def _response(code: int, entries: int) -> s.SendMessageResponse:
    return s.SendMessageResponse(
        status=d.Status(code=code, message=d.Code.Name(code)),
        entries=[
            s.SendResultEntry(status=d.Status(code=code), message_id=f"{i:032X}", offset=i)
            for i in range(entries)
        ],
    )


def test_an_ok_answer_is_read_for_its_status_and_keeps_its_entries_unparsed() -> None:
    full = _response(d.OK, 3)
    raw = full.SerializeToString()
    got = decode_send_response(raw)
    assert not isinstance(got, s.SendMessageResponse)
    assert (got.status.code, got.status.message) == (d.OK, "OK")
    assert got.SerializeToString() == raw  # the entries were kept as bytes, not dropped or changed
    assert s.SendMessageResponse.FromString(got.SerializeToString()) == full


@pytest.mark.parametrize("code", [d.MULTIPLE_RESULTS, d.TOO_MANY_REQUESTS, d.MESSAGE_BODY_TOO_LARGE])
def test_any_other_answer_is_parsed_in_full(code: int) -> None:
    full = _response(code, 2)
    got = decode_send_response(full.SerializeToString())
    assert isinstance(got, s.SendMessageResponse) and got == full


def test_the_emulators_ok_answer_reads_the_same() -> None:
    """The bytes the emulator builds with NumPy (`send_response_bytes`) decode to its OK status."""
    from broker_emulator.grpc_v2.messages import send_response_bytes

    raw = send_response_bytes(pa.array([f"{i:032X}" for i in range(64)]), np.arange(64))
    assert decode_send_response(raw).status.code == s.SendMessageResponse.FromString(raw).status.code == d.OK
