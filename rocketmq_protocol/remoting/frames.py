"""Remoting frames: the `RemotingCommand` model, its JSON and ROCKETMQ header encodings, stream splitting.

A frame is `int32 L | int32 (serializeType << 24 | H) | header (H bytes) | body (L - 4 - H bytes)`, as in
apache/rocketmq `RemotingCommand.encode`/`decode`, `RocketMQSerializable` and `NettyDecoder` (Netty's
LengthFieldBasedFrameDecoder with a 16 MiB limit that counts the 4-byte prefix). Java sends JSON headers by
default and answers in its own process-wide type, so both are decoded whatever was sent.
A JSON header of the common form (RemotingCommand's own keys, no escapes) is read by the optional C reader
`_json_header.c`; any other, and every error, by the json module.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .codes import CURRENT_VERSION, LanguageCode, SerializeType
from .errors import FrameError, FrameTooLargeError, HeaderError
from .fastjson import JsonStyle, json_string

try:  # the C reader of the common JSON header (setup.py builds it where a compiler is present)
    from . import _json_header
except ImportError:
    _json_header = None

if TYPE_CHECKING:  # asyncio only for `read_frame` (the emulator's servers): clients skip its ~15 ms import
    import asyncio

__all__ = [
    "MAX_FRAME_LENGTH",
    "FrameSplitter",
    "JsonStyle",
    "RemotingCommand",
    "decode_frame",
    "decode_header",
    "decode_payload",
    "encode_frame",
    "encode_frame_parts",
    "encode_header",
    "read_frame",
]

#: Netty's limit in NettyDecoder (`com.rocketmq.remoting.frameMaxLength`): prefix + payload, in bytes.
MAX_FRAME_LENGTH = 16 * 1024 * 1024
_MAX_HEADER_LENGTH = 0xFFFFFF  # 24 bits of the header-length word

RESPONSE_FLAG = 0x1  # RemotingCommand.RPC_TYPE bit
ONEWAY_FLAG = 0x2  # RemotingCommand.RPC_ONEWAY bit

_PREFIX = struct.Struct(">iI")
_FIXED = struct.Struct(">hBhii")  # code, language, version, opaque, flag: 13 bytes
_JSON_DECODER = json.JSONDecoder()
_JSON_SCAN = _JSON_DECODER.scan_once
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")


@dataclass(slots=True)
class RemotingCommand:
    """One request or response. `ext_fields` holds the custom header (all values strings)."""

    code: int
    language: LanguageCode | int = LanguageCode.PYTHON
    version: int = int(CURRENT_VERSION)
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    #: A list: the body in pieces, sent one after another as they are (a response the emulator sends).
    body: bytes | memoryview | list[bytes | memoryview] = b""
    #: How the header was (or will by default be) serialized.
    serialize_type: SerializeType = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RESPONSE_FLAG)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & ONEWAY_FLAG)

    def response(
        self,
        code: int,
        remark: str | None = None,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes | memoryview | list[bytes | memoryview] = b"",
    ) -> RemotingCommand:
        """A response to this request: same opaque and version, the response flag, the request's header type."""
        return RemotingCommand(
            code=code,
            language=LanguageCode.JAVA,
            version=self.version,
            opaque=self.opaque,
            flag=RESPONSE_FLAG,
            remark=remark,
            ext_fields=dict(ext_fields or {}),
            body=body,
            serialize_type=self.serialize_type,
        )


# ------------------------------------------------------------------------------------------------ JSON


def _language_name(language: LanguageCode | int) -> str:
    try:
        return LanguageCode(language).name
    except ValueError:
        raise ValueError(f"language {language} has no LanguageCode name for a JSON header") from None


def _encode_json_header(cmd: RemotingCommand, style: JsonStyle) -> bytes:
    # Field order and omissions of fastjson's serialization of RemotingCommand: keys sorted, nulls dropped,
    # extFields in the map's own order (the order they were decoded or inserted in).
    parts = [f'{{"code":{int(cmd.code)}']
    if cmd.ext_fields:
        items = ",".join(
            f"{json_string(k, style)}:{json_string(v, style)}" for k, v in cmd.ext_fields.items()
        )
        parts.append(f',"extFields":{{{items}}}')
    parts.append(
        f',"flag":{int(cmd.flag)},"language":"{_language_name(cmd.language)}","opaque":{int(cmd.opaque)}'
    )
    if cmd.remark is not None:
        parts.append(f',"remark":{json_string(cmd.remark, style)}')
    parts.append(f',"serializeTypeCurrentRPC":"JSON","version":{int(cmd.version)}}}')
    return "".join(parts).encode("utf-8")


def _as_int(doc: dict, key: str, default: int) -> int:
    value = doc.get(key, default)
    if type(value) is int:
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.lstrip("-").isdigit():
            return int(value)
        raise HeaderError(f"JSON header field {key!r} is not an integer: {value!r}")
    return value


def _ext_value(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    raise HeaderError(f"extFields value is not a string: {value!r}")


def _parse_json(header: bytes | memoryview) -> object:
    """The header's JSON value. A header that starts with its object and ends with it (as every remoting
    peer writes one) is read by the C scanner alone, without `JSONDecoder.decode`'s Python layers (a
    pipelined pull reads tens of thousands a second)."""
    text = str(header, "utf-8")
    if text[:1] == "{" and text[-1:] == "}":
        try:
            doc, end = _JSON_SCAN(text, 0)
        except StopIteration:
            doc, end = None, -1
        if end == len(text):
            return doc
    return _JSON_DECODER.decode(text)  # anything else, and the error message of invalid JSON


def _decode_json_header(header: bytes | memoryview) -> RemotingCommand:
    # The common form is read in C; anything else (an error too) goes the json module's way.
    fields = _json_header.parse(header) if _json_header is not None else None
    if fields is not None:
        code, language, version, opaque, flag, remark, ext = fields
        return RemotingCommand(
            code,
            _language("JAVA" if language is None else language),
            version,
            opaque,
            flag,
            remark,
            {} if ext is None else ext,
            b"",
            SerializeType.JSON,
        )
    return _decode_json_text(header)


def _decode_json_text(header: bytes | memoryview) -> RemotingCommand:
    """A JSON header read by the json module: every form JSON allows, and each error's own message."""
    try:
        doc = _parse_json(header)
    except (UnicodeDecodeError, ValueError) as e:
        raise HeaderError(f"JSON header is not valid JSON: {e}") from None
    if type(doc) is not dict:
        raise HeaderError(f"JSON header is not an object: {type(doc).__name__}")
    if "code" not in doc:
        raise HeaderError("JSON header has no 'code'")
    lang = _language(doc.get("language", "JAVA"))
    remark = doc.get("remark")
    if remark is not None and type(remark) is not str:
        raise HeaderError(f"JSON header field 'remark' is not a string: {remark!r}")
    ext = doc.get("extFields")
    if ext is None:
        ext_fields: dict[str, str] = {}
    elif type(ext) is dict:
        if _STR_ONLY.issuperset(map(type, ext.values())):  # as Java writes them (a HashMap<String, String>)
            ext_fields = ext
        else:
            ext_fields = {str(k): _ext_value(v) for k, v in ext.items() if v is not None}
    else:
        raise HeaderError(f"JSON header field 'extFields' is not an object: {ext!r}")
    code, version, opaque, flag = doc["code"], doc.get("version", 0), doc.get("opaque", 0), doc.get("flag", 0)
    if not (type(code) is int and type(version) is int and type(opaque) is int and type(flag) is int):
        code, version = _as_int(doc, "code", 0), _as_int(doc, "version", 0)
        opaque, flag = _as_int(doc, "opaque", 0), _as_int(doc, "flag", 0)
    return RemotingCommand(code, lang, version, opaque, flag, remark, ext_fields, b"", SerializeType.JSON)


_LANGUAGES: dict[str, LanguageCode] = dict(LanguageCode.__members__)
_STR_ONLY = frozenset({str})


def _language(language: object) -> LanguageCode | int:
    """A header's `language`: a known name, an unknown name (OTHER), or a number (known or not)."""
    if type(language) is str:
        return _LANGUAGES.get(language, LanguageCode.OTHER)
    if isinstance(language, str):
        return LanguageCode.OTHER
    if isinstance(language, int) and not isinstance(language, bool):
        return LanguageCode(language) if language in LanguageCode._value2member_map_ else language
    raise HeaderError(f"JSON header field 'language' is invalid: {language!r}")


# ------------------------------------------------------------------------------------------------ ROCKETMQ


def _encode_binary_header(cmd: RemotingCommand) -> bytes:
    if not -0x8000 <= cmd.code <= 0x7FFF:
        raise ValueError(
            f"code {cmd.code} does not fit the ROCKETMQ header's int16; send it with a JSON header"
        )
    if not -0x8000 <= cmd.version <= 0x7FFF:
        raise ValueError(f"version {cmd.version} does not fit the ROCKETMQ header's int16")
    out = bytearray(_FIXED.pack(cmd.code, int(cmd.language) & 0xFF, cmd.version, cmd.opaque, cmd.flag))
    remark = cmd.remark.encode("utf-8") if cmd.remark else b""
    out += _I32.pack(len(remark))
    out += remark
    entries = bytearray()
    for k, v in cmd.ext_fields.items():
        kb = k.encode("utf-8")
        vb = v.encode("utf-8")
        if len(kb) > 0x7FFF:
            raise ValueError(f"ext field name longer than 32767 bytes: {k[:40]!r}...")
        entries += _I16.pack(len(kb))
        entries += kb
        entries += _I32.pack(len(vb))
        entries += vb
    out += _I32.pack(len(entries))
    out += entries
    return bytes(out)


def _decode_binary_header(header: bytes | memoryview) -> RemotingCommand:
    mv = memoryview(header)
    n = len(mv)
    if n < _FIXED.size + 8:
        raise HeaderError(f"ROCKETMQ header of {n} bytes is shorter than its 21-byte fixed part")
    code, language, version, opaque, flag = _FIXED.unpack_from(mv, 0)
    pos = _FIXED.size
    (remark_len,) = _I32.unpack_from(mv, pos)
    pos += 4
    if remark_len < 0 or pos + remark_len + 4 > n:
        raise HeaderError(f"ROCKETMQ header remark length {remark_len} exceeds the header length {n}")
    remark = _utf8(mv[pos : pos + remark_len], "remark") if remark_len else None
    pos += remark_len
    (ext_len,) = _I32.unpack_from(mv, pos)
    pos += 4
    if ext_len < 0 or pos + ext_len != n:
        raise HeaderError(f"ROCKETMQ header extFields length {ext_len} does not end at the header length {n}")
    ext_fields: dict[str, str] = {}
    end = n
    while pos < end:
        if pos + 2 > end:
            raise HeaderError("ROCKETMQ header extFields entry cut inside its key length")
        (klen,) = _I16.unpack_from(mv, pos)
        pos += 2
        if klen < 0 or pos + klen + 4 > end:
            raise HeaderError(f"ROCKETMQ header extFields key length {klen} runs past the header")
        key = _utf8(mv[pos : pos + klen], "extFields key")
        pos += klen
        (vlen,) = _I32.unpack_from(mv, pos)
        pos += 4
        if vlen < 0 or pos + vlen > end:
            raise HeaderError(
                f"ROCKETMQ header extFields value length {vlen} of {key!r} runs past the header"
            )
        ext_fields[key] = _utf8(mv[pos : pos + vlen], "extFields value")  # later duplicates win, as in Java
        pos += vlen
    lang: LanguageCode | int = (
        LanguageCode(language) if language in LanguageCode._value2member_map_ else language
    )
    return RemotingCommand(
        code=code,
        language=lang,
        version=version,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext_fields,
        serialize_type=SerializeType.ROCKETMQ,
    )


def _utf8(data: memoryview, what: str) -> str:
    try:
        return str(data, "utf-8")
    except UnicodeDecodeError as e:
        raise HeaderError(f"ROCKETMQ header {what} is not UTF-8: {e}") from None


# ------------------------------------------------------------------------------------------------ frames


def encode_header(
    cmd: RemotingCommand, serialize_type: SerializeType | None = None, json_style: JsonStyle = "fastjson2"
) -> bytes:
    """The header bytes alone, in `serialize_type` (default: the command's own)."""
    stype = cmd.serialize_type if serialize_type is None else serialize_type
    if stype == SerializeType.ROCKETMQ:
        return _encode_binary_header(cmd)
    return _encode_json_header(cmd, json_style)


def decode_header(header: bytes | memoryview, serialize_type: int) -> RemotingCommand:
    """A header (without body) of the given serialize type."""
    if serialize_type == SerializeType.JSON:
        return _decode_json_header(header)
    if serialize_type == SerializeType.ROCKETMQ:
        return _decode_binary_header(header)
    raise HeaderError(f"unknown serialize type {serialize_type} in the header-length word")


def encode_frame(
    cmd: RemotingCommand, serialize_type: SerializeType | None = None, json_style: JsonStyle = "fastjson2"
) -> bytes:
    """The whole frame, length prefix included, ready for the socket."""
    parts = encode_frame_parts(cmd, serialize_type, json_style)
    return b"".join(parts)


def encode_frame_parts(
    cmd: RemotingCommand, serialize_type: SerializeType | None = None, json_style: JsonStyle = "fastjson2"
) -> tuple[bytes | memoryview, ...]:
    """The frame as (length prefix and header, body pieces...): a large body (a pull response's records, a
    bulk answer's Arrow buffers given as a list) can go to the socket as it is, without being copied into
    one frame."""
    header = encode_header(cmd, serialize_type, json_style)
    if len(header) > _MAX_HEADER_LENGTH:
        raise ValueError(f"header of {len(header)} bytes exceeds the 24-bit header length")
    stype = cmd.serialize_type if serialize_type is None else serialize_type
    body = cmd.body or b""
    pieces = body if isinstance(body, list) else (body,)
    size = sum(memoryview(p).nbytes for p in pieces)
    return (_PREFIX.pack(4 + len(header) + size, (int(stype) << 24) | len(header)) + header, *pieces)


def decode_payload(payload: bytes | bytearray | memoryview) -> RemotingCommand:
    """A frame without its 4-byte length prefix (what the splitter hands over)."""
    mv = memoryview(payload)
    if len(mv) < 4:
        raise FrameError(f"frame of {len(mv)} bytes has no header-length word")
    (word,) = _I32.unpack_from(mv, 0)
    stype = (word >> 24) & 0xFF
    hlen = word & 0xFFFFFF
    if 4 + hlen > len(mv):
        raise HeaderError(
            f"header length {hlen} exceeds the frame's {len(mv) - 4} bytes after the length word"
        )
    cmd = decode_header(mv[4 : 4 + hlen], stype)
    if len(mv) > 4 + hlen:
        cmd.body = bytes(mv[4 + hlen :])
    return cmd


def decode_frame(
    frame: bytes | bytearray | memoryview, max_frame_length: int = MAX_FRAME_LENGTH
) -> RemotingCommand:
    """One whole frame, length prefix included; the prefix must match the data exactly."""
    mv = memoryview(frame)
    if len(mv) < 4:
        raise FrameError(f"frame of {len(mv)} bytes has no length prefix")
    (length,) = _I32.unpack_from(mv, 0)
    _check_length(length, max_frame_length)
    if length != len(mv) - 4:
        raise FrameError(f"length prefix says {length} bytes but {len(mv) - 4} follow")
    return decode_payload(mv[4:])


def _check_length(length: int, max_frame_length: int) -> None:
    if length < 4:
        raise FrameError(f"frame length {length} is smaller than the 4-byte header-length word")
    if length + 4 > max_frame_length:
        raise FrameTooLargeError(
            f"frame of {length + 4} bytes exceeds the maximum frame length {max_frame_length}"
        )


class FrameSplitter:
    """Incremental splitter for a byte stream, whole commands out.

    Either `feed` bytes as they arrive, or receive straight into the splitter's memory (an asyncio
    `BufferedProtocol`): `buffer()` is where the next bytes go, `received(n)` says `n` landed there. Small
    frames share one scratch buffer; a frame longer than `DIRECT_FRAME_BYTES` gets a buffer of its own
    length once its length is known, so its bytes are received once, where they are decoded (a stream
    reader copies a multi-MiB send into its buffer, out of it, and again into a splitter).

    A bad length or header raises (FrameError and subclasses) and leaves the splitter failed: the stream
    cannot be resynchronised, so the caller closes the connection, as RocketMQ's servers do.
    """

    __slots__ = ("_end", "_failed", "_frame", "_frame_pos", "_scratch", "_start", "max_frame_length")

    SCRATCH_BYTES = 256 * 1024
    DIRECT_FRAME_BYTES = 64 * 1024

    def __init__(self, max_frame_length: int = MAX_FRAME_LENGTH) -> None:
        self.max_frame_length = max_frame_length
        self._scratch = bytearray(self.SCRATCH_BYTES)
        self._start = self._end = 0  # unconsumed bytes of the scratch buffer
        self._frame: bytearray | None = None  # a long frame's payload, filled up to `_frame_pos`
        self._frame_pos = 0
        self._failed: FrameError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a whole frame."""
        if self._frame is not None:
            return 4 + self._frame_pos
        return self._end - self._start

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        """Appends `data`; returns the commands of every frame completed by it (possibly none)."""
        if self._failed is not None:
            raise self._failed
        out: list[RemotingCommand] = []
        data = memoryview(data).cast("B")
        while data:
            room = self.buffer()
            k = min(len(room), len(data))
            room[:k] = data[:k]
            out += self.received(k)
            data = data[k:]
        return out

    def buffer(self) -> memoryview:
        """Where the next received bytes go (never empty)."""
        if self._failed is not None:
            raise self._failed
        if self._frame is not None:
            return memoryview(self._frame)[self._frame_pos :]
        if self._end == len(self._scratch):  # a partial frame at the end: move it to the front
            pending = self._end - self._start
            self._scratch[:pending] = self._scratch[self._start : self._end]
            self._start, self._end = 0, pending
        return memoryview(self._scratch)[self._end :]

    def received(self, n: int) -> list[RemotingCommand]:
        """`n` bytes were written at the start of the last `buffer()`; the commands they complete."""
        try:
            return self._received(n)
        except FrameError as e:
            self._failed = e
            raise

    def _received(self, n: int) -> list[RemotingCommand]:
        if self._frame is not None:
            self._frame_pos += n
            if self._frame_pos < len(self._frame):
                return []
            payload, self._frame = self._frame, None
            return [decode_payload(payload)]
        self._end += n
        out: list[RemotingCommand] = []
        buf, pos, end = self._scratch, self._start, self._end
        view = memoryview(buf)
        try:
            while end - pos >= 4:
                (length,) = _I32.unpack_from(buf, pos)
                _check_length(length, self.max_frame_length)
                if end - pos - 4 >= length:
                    out.append(decode_payload(view[pos + 4 : pos + 4 + length]))
                    pos += 4 + length
                elif length > self.DIRECT_FRAME_BYTES:  # received from here on into its own buffer
                    have = end - pos - 4
                    self._frame = frame = bytearray(length)
                    frame[:have] = view[pos + 4 : end]
                    self._frame_pos = have
                    pos = end
                else:
                    break
        finally:
            view.release()
            self._start, self._end = (0, 0) if pos == end else (pos, end)
        return out


async def read_frame(
    reader: asyncio.StreamReader, max_frame_length: int = MAX_FRAME_LENGTH
) -> RemotingCommand | None:
    """Reads one command from `reader`; None at a clean end of stream (EOF before a frame starts).

    Raises FrameError for a bad length or header, or when the stream ends inside a frame.
    """
    import asyncio

    try:
        prefix = await reader.readexactly(4)
    except asyncio.IncompleteReadError as e:
        if not e.partial:
            return None
        raise FrameError(f"stream ended inside a length prefix ({len(e.partial)} of 4 bytes)") from None
    (length,) = _I32.unpack(prefix)
    _check_length(length, max_frame_length)
    try:
        payload = await reader.readexactly(length)
    except asyncio.IncompleteReadError as e:
        raise FrameError(f"stream ended inside a frame ({len(e.partial)} of {length} bytes)") from None
    return decode_payload(payload)
