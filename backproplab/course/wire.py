"""Plain data across a pipe: what the grader and an answer's sandbox send each other.

The grader never unpickles what a sandbox sends: a pickle can run code as it
is read. Messages are written in a small format of their own instead, which
can only ever become plain data: ``None``, booleans, integers, floats,
complex numbers, strings, lists, tuples, dicts with string keys, and tensors
(dense, strided, of the dtypes in ``DTYPES``). A frame is a header (JSON) and
the tensors' raw bytes after it; its length comes first, so a reader refuses a
frame larger than its limit before reading it.

>>> import torch
>>> back = decode(encode({"said": "start", "grad": torch.tensor([1.0, -2.0]), "n": (1, 2)}))
>>> back["said"], back["grad"], back["n"]
('start', tensor([ 1., -2.]), (1, 2))
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any, BinaryIO

import torch

__all__ = ["DTYPES", "LIMIT", "FrameTooLarge", "WireError", "decode", "encode", "read_exactly",
           "read_frame", "write_frame"]

LIMIT = 64 << 20  # bytes a frame may hold: far more than any honest answer sends back
DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64,
    torch.complex128, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8,
    torch.bool)}
_LENGTH = struct.Struct(">Q")


class WireError(ValueError):
    """A frame that is not plain data in this format."""


class FrameTooLarge(WireError):
    """A frame longer than the reader's limit (its length is in ``size``)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"a message of {size:,} bytes, over the limit of {limit:,}")
        self.size = size


def _header(value: Any, blobs: list[bytes], depth: int = 0, limit: int | None = None) -> Any:
    """``value`` as JSON-ready data; tensors' bytes go to ``blobs`` (`FrameTooLarge` as soon
    as they pass ``limit``, before the bytes are copied)."""
    if depth > 32:
        raise WireError("nested more than 32 levels deep")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return {"i": str(value)}  # any size, exactly
    if isinstance(value, float):
        return {"f": repr(value)}  # nan and inf included
    if isinstance(value, complex):
        return {"c": [repr(value.real), repr(value.imag)]}
    if isinstance(value, (list, tuple)):
        return {"l" if isinstance(value, list) else "t":
                [_header(v, blobs, depth + 1, limit) for v in value]}
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise WireError("a dict whose keys are not all strings")
        return {"d": {k: _header(v, blobs, depth + 1, limit) for k, v in value.items()}}
    if isinstance(value, torch.Tensor):
        size = sum(map(len, blobs)) + value.numel() * value.element_size()
        if limit is not None and size > limit:
            raise FrameTooLarge(size, limit)
        # A conjugate or negative view (z.conj()) shares memory with a bit set: its bytes
        # are the values only once that bit is applied.
        t = value.detach().to("cpu", copy=False).resolve_conj().resolve_neg().contiguous()
        dtype = str(t.dtype).removeprefix("torch.")
        if dtype not in DTYPES or t.layout != torch.strided:
            raise WireError(f"a tensor of dtype {dtype} and layout {t.layout}")
        blobs.append(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        return {"T": [dtype, list(t.shape), len(blobs) - 1]}
    raise WireError(f"a {type(value).__name__}, which is not plain data")


def encode(value: Any, limit: int | None = None) -> bytes:
    """``value`` as one frame's body (see the module's documentation); with ``limit``,
    `FrameTooLarge` rather than a body of more bytes."""
    blobs: list[bytes] = []
    head = json.dumps(_header(value, blobs, 0, limit), allow_nan=False).encode()
    if limit is not None and len(head) + sum(map(len, blobs)) > limit:
        raise FrameTooLarge(len(head) + sum(map(len, blobs)), limit)
    sizes = [len(b) for b in blobs]
    return _LENGTH.pack(len(head)) + head + json.dumps(sizes).encode() + b"\n" + b"".join(blobs)


def _value(node: Any, blobs: list[bytes], depth: int = 0) -> Any:
    if depth > 34:
        raise WireError("nested too deep")
    if node is None or isinstance(node, (bool, str)):
        return node
    if not isinstance(node, dict) or len(node) != 1:
        raise WireError("not a frame of this format")
    (tag, body), = node.items()
    try:
        if tag == "i":
            if len(body) > 4300:  # int(str) refuses longer ones anyway
                raise WireError("an integer with too many digits")
            return int(body)
        if tag == "f":
            return float(body)
        if tag == "c":
            return complex(float(body[0]), float(body[1]))
        if tag in ("l", "t"):
            items = [_value(v, blobs, depth + 1) for v in body]
            return items if tag == "l" else tuple(items)
        if tag == "d":
            return {str(k): _value(v, blobs, depth + 1) for k, v in body.items()}
        if tag == "T":
            dtype, shape, index = DTYPES[body[0]], [int(s) for s in body[1]], int(body[2])
            data = blobs[index]
            count = math.prod(shape)
            if len(data) != count * torch.empty((), dtype=dtype).element_size():
                raise WireError("a tensor whose bytes do not match its shape")
            if count == 0:
                return torch.empty(shape, dtype=dtype)
            return torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape)
    except WireError:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError) as err:
        raise WireError(f"not a frame of this format ({type(err).__name__})") from None
    raise WireError(f"an unknown tag {tag!r}")


def decode(body: bytes) -> Any:
    """The plain data a frame's body holds; `WireError` when it is anything else."""
    try:
        (n,) = _LENGTH.unpack_from(body)
        head = json.loads(body[_LENGTH.size:_LENGTH.size + n])
        rest = body[_LENGTH.size + n:]
        line, _, data = rest.partition(b"\n")
        sizes = json.loads(line)
        if not (isinstance(sizes, list) and all(isinstance(s, int) and s >= 0 for s in sizes)
                and sum(sizes) == len(data)):
            raise WireError("tensor sizes that do not add up")
    except WireError:
        raise
    except (struct.error, ValueError, RecursionError):
        raise WireError("not a frame of this format") from None
    blobs, at = [], 0
    for s in sizes:
        blobs.append(data[at:at + s])
        at += s
    return _value(head, blobs)


def write_frame(stream: BinaryIO, value: Any, limit: int | None = None) -> None:
    """Send ``value`` as one frame: its length, then its body (at most ``limit`` bytes)."""
    body = encode(value, limit)
    stream.write(_LENGTH.pack(len(body)) + body)
    stream.flush()


def read_exactly(stream: BinaryIO, n: int) -> bytes:
    """``n`` bytes from ``stream``; EOFError when it ends first."""
    parts, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise EOFError("the other end closed the pipe")
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def read_frame(stream: BinaryIO, limit: int = LIMIT) -> Any:
    """The next frame's value; `FrameTooLarge` (before reading it) when it is over ``limit``."""
    (size,) = _LENGTH.unpack(read_exactly(stream, _LENGTH.size))
    if size > limit:
        raise FrameTooLarge(size, limit)
    return decode(read_exactly(stream, size))
