"""The worker protocol's framing: every message is an 8-byte request id, then a cloudpickle.

The id sits outside the pickle so that the worker can answer a request it cannot even unpickle
under that request's id, and so that the client can tell a late reply to an earlier request
(left unread when that request was interrupted) from the one it waits for (issue 15). The
worker's ready message has id 0; requests count up from 1.
"""

from __future__ import annotations

import struct
from typing import Any

import cloudpickle

_ID = struct.Struct("<Q")


def pack_message(rid: int, obj: Any) -> bytes:
    """Frame ``obj`` as the message of request ``rid``."""
    return _ID.pack(rid) + cloudpickle.dumps(obj)


def request_id(data: bytes) -> int:
    """Return the request id of a framed message, without unpickling it."""
    return _ID.unpack_from(data)[0]


def unpack_message(data: bytes) -> tuple[int, Any]:
    """Return ``(request id, object)`` of a framed message."""
    return request_id(data), cloudpickle.loads(memoryview(data)[_ID.size:])
