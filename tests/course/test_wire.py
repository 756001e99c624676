"""What crosses between an answer's process and the grader (`backproplab.course.sandbox`):
plain data, tensors by their values."""

from __future__ import annotations

import torch

from backproplab.course import sandbox


def test_plain_data_and_tensors_come_back_equal():
    value = {"n": 2**80, "x": float("nan"), "z": 1 - 2j, "names": ["a", None, True],
             "t": (torch.arange(6.0).view(2, 3).T, torch.tensor([1, 2], dtype=torch.int64))}
    back = sandbox.decode(sandbox.encode(value))
    assert back["n"] == 2**80 and back["x"] != back["x"] and back["z"] == 1 - 2j
    assert back["names"] == ["a", None, True]
    assert torch.equal(back["t"][0], value["t"][0]) and back["t"][1].dtype == torch.int64


def test_a_conjugate_or_negative_view_crosses_as_its_values():
    """``z.conj()`` and ``-z.conj().imag`` share memory with a bit set; their bytes are the
    values only once the bit is applied (an answer may return either)."""
    z = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex128)
    for view in (z.conj(), torch.conj(z * 1j), z.conj().imag):
        back = sandbox.decode(sandbox.encode(view))
        assert torch.equal(back, view.resolve_conj().resolve_neg()), view
