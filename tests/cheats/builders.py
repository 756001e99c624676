"""Shortcuts that any by-hand exercise meets, written for one exercise's signature.

A lesson's cheat table (tests/cheats/lessonNN.py) builds its common shortcuts here:
``signature`` is the answer's ``def`` line without ``def`` and the colon
(``"conv2d_dx(x, w, dout, stride, padding)"``); ``outputs`` lists, for each value the
answer returns, a scalar of ``t`` whose gradient at ``t = x`` that value is, and ``x``.
"""

from __future__ import annotations

Outputs = list[tuple[str, str]]


def arguments(signature: str) -> str:
    """``"f(a, b)"`` -> ``"a, b"``."""
    return signature.split("(", 1)[1].rstrip(")")


def finite_differences(signature: str, outputs: Outputs) -> str:
    """Central differences, one entry at a time, written out by the learner."""
    parts = ", ".join(f"central(lambda t: {s}, {x})" for s, x in outputs)
    return (
        f"def {signature}:\n"
        "    def central(f, x, h=1e-6):\n"
        "        grad = torch.zeros_like(x).flatten()\n"
        "        for i in range(x.numel()):\n"
        "            step = torch.zeros_like(x).flatten()\n"
        "            step[i] = h\n"
        "            step = step.view_as(x)\n"
        "            grad[i] = (f(x + step) - f(x - step)) / (2 * h)\n"
        "        return grad.view_as(x)\n"
        "\n"
        f"    return {parts}\n"
    )


def numerical_grad(signature: str, outputs: Outputs) -> str:
    """The package's own finite differences, one call per returned value."""
    parts = ", ".join(f"bl.numerical_grad(lambda t: {s}, {x})[0]" for s, x in outputs)
    return f"def {signature}:\n    return {parts}\n"


def lookup(key: str, signature: str, package: str = "backproplab.course.exercises") -> str:
    """A table of the visible check's answers (seeds 0..2), looked up by the inputs: it
    passes the visible check and fails the hidden one, whose inputs are not in it."""
    return (
        f"from {package} import find_exercise\n\n"
        f"_exercise = find_exercise({key!r})\n"
        "_table = {}\n\n\n"
        "def _key(values):\n"
        "    return tuple(str(v.tolist()) if isinstance(v, torch.Tensor) else v for v in values)\n"
        "\n\n"
        "for _k in range(3):\n"
        "    _inputs = _exercise.make_inputs(torch.Generator().manual_seed(_k))\n"
        "    _copies = [t.clone() if isinstance(t, torch.Tensor) else t for t in _inputs]\n"
        "    _table[_key(_inputs)] = _exercise.reference(*_copies)\n\n\n"
        f"def {signature}:\n"
        f"    return _table[_key(({arguments(signature)},))]\n"
    )


def autograd_back_on(signature: str, outputs: Outputs) -> str:
    """Grad mode switched back on, so that autograd could differentiate the answer's
    forward (the first output only: the refusal comes before any count of outputs)."""
    scalar, inp = outputs[0]
    inp = inp if inp.isidentifier() else f"({inp})"
    return (
        f"def {signature}:\n"
        "    with torch.enable_grad():\n"
        f"        t = {inp}.detach().requires_grad_()\n"
        f"        return torch.autograd.grad({scalar}, t)[0]\n"
    )
