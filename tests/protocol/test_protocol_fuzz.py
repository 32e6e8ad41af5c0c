"""Fuzzing every request decoder: hostile frames of every API at every version either decode or
raise the codec's own errors (`ProtocolError`), and never allocate much more than the frame.

The frames come from `fuzz_support`: valid requests built from the schemas with random
values, then truncated, flipped, lengthened, given huge or negative counts, overflowing
varints, unknown tagged fields, bad versions and invalid UTF-8. `tools/fuzz.sh` runs the
same properties with many more examples.
"""

from __future__ import annotations

import struct
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ads.protocol import codec
from ads.protocol import messages as m
from ads.protocol.errors import DecodeError, ProtocolError
from fuzz_support import (
    REQUEST_VERSIONS,
    fuzz_settings,
    hostile,
    hostile_frames,
    request_frames,
)

# Python objects cost more than the bytes they came from (a list slot is 8 bytes, a struct
# 16 + 8 per field, a memoryview slice 184): the worst frame measured, an array of empty
# JoinGroup protocols (3 bytes each), takes 80 times its size once decoded. A decoded frame
# may take this many times its size, plus a fixed allowance.
_AMPLIFICATION = 96
_ALLOWANCE = 64 << 10


def _decode(frame: bytes) -> None:
    try:
        codec.decode_request(frame)
    except ProtocolError:
        pass


def _peak_while_decoding(frame: bytes) -> int:
    _decode(frame)  # the first decode of a version compiles its decoder: not measured
    tracemalloc.start()
    try:
        _decode(frame)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(("api_key", "version"), REQUEST_VERSIONS,
                         ids=[f"{m.ApiKey(k).name}-v{v}" for k, v in REQUEST_VERSIONS])
def test_protocol_fuzz_every_version_round_trips_and_truncates(api_key: int,
                                                                version: int) -> None:
    # One valid frame per version, checked exhaustively: it decodes to what was encoded,
    # and every prefix of it is refused with a DecodeError.
    @given(request_frames(api_key, version))
    @fuzz_settings(3, share=100)
    def check(frame: bytes) -> None:
        header, body = codec.decode_request(frame)
        assert (header.api_key, header.api_version) == (api_key, version)
        again = codec.encode_request(api_key, version, header.correlation_id,
                                     header.client_id, body)[4:]
        assert again == frame
        for cut in range(len(frame)):
            with pytest.raises(DecodeError):
                codec.decode_request(frame[:cut])

    check()


@fuzz_settings(600)
@given(hostile_frames())
def test_protocol_fuzz_hostile_frames_raise_only_protocol_errors(frame: bytes) -> None:
    _decode(frame)


@fuzz_settings(150)
@given(hostile_frames())
def test_protocol_fuzz_hostile_frames_allocate_in_proportion(frame: bytes) -> None:
    peak = _peak_while_decoding(frame)
    assert peak < _AMPLIFICATION * len(frame) + _ALLOWANCE, (len(frame), peak)


# Every array count and every length prefix of a valid frame, in turn, replaced by a huge
# value: the decoder must see that the bytes are missing before it allocates anything.
_HUGE_I32 = [0x7FFFFFFF, 1 << 28, -2]
_HUGE_UVARINT = b"\xff\xff\xff\xff\x0f"


@fuzz_settings(60)
@given(st.sampled_from(REQUEST_VERSIONS).flatmap(lambda kv: request_frames(*kv)),
       st.data())
def test_protocol_fuzz_huge_counts_allocate_nothing(frame: bytes, data: st.DataObject) -> None:
    at = data.draw(st.integers(8, max(len(frame) - 1, 8)))
    if data.draw(st.booleans()):
        bent = frame[:at] + struct.pack(">i", data.draw(st.sampled_from(_HUGE_I32))) \
            + frame[at + 4:]
    else:
        bent = frame[:at] + _HUGE_UVARINT + frame[at + 1:]
    peak = _peak_while_decoding(bent)
    assert peak < _AMPLIFICATION * len(bent) + _ALLOWANCE, (len(bent), peak)


@fuzz_settings(300)
@given(st.sampled_from(REQUEST_VERSIONS).flatmap(lambda kv: request_frames(*kv)).flatmap(hostile))
def test_protocol_fuzz_every_api_mutated(frame: bytes) -> None:
    _decode(frame)


def test_protocol_fuzz_worst_amplification_is_bounded() -> None:
    # The costliest bytes measured over every request array: empty JoinGroup protocols,
    # 3 bytes each on the wire, a struct, a list slot and a memoryview each once decoded.
    # socket.request.max.bytes bounds the frame, so this bounds what one request can cost.
    J = m.JoinGroupRequest  # noqa: N806
    body = J(group_id="g", session_timeout_ms=1, rebalance_timeout_ms=1, member_id="",
             protocol_type="consumer",
             protocols=[J.JoinGroupRequestProtocol(name="", metadata=b"")] * 100_000)
    frame = codec.encode_request(m.ApiKey.JOIN_GROUP, 9, 1, None, body)[4:]
    peak = _peak_while_decoding(frame)
    assert 40 * len(frame) < peak < _AMPLIFICATION * len(frame), peak / len(frame)
