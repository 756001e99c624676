"""What lesson 20's three checks share: the pieces a check cell hands over, which trial
this is, shapes in words, and a new operation's forward held against torch's."""

from __future__ import annotations

import torch

from .._spec import attempt, failed

F64 = torch.float64


def unpack(answer, names):
    """The pieces a check cell hands over, or a failed Report saying what was expected."""
    if not (isinstance(answer, tuple) and len(answer) == len(names)):
        return None, failed("check", f"expected the tuple ({', '.join(names)}) from the check "
                                     "cell; run the check cell as it is")
    return answer, None


def trial_kind(gen, kinds):
    """Which kind of input this trial is: trials run on seeds seed, seed + 1, ..., so
    every kind is met once in ``kinds`` trials, whatever the seed."""
    return gen.initial_seed() % kinds


def draw_size(gen, low=2, high=5):
    """A size from ``low`` to ``high - 1``."""
    return int(torch.randint(low, high, (), generator=gen))


def shape_text(shape):
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def forward_problem(name, value_class, cases):
    """A failed Report when the new operation's forward is wrong on one of ``cases``
    (the call as shown, the call, torch's result), else None."""
    for shown, call, want in cases:
        out, failure = attempt(name, call, what=name, raised=lambda err, s=shown: (
            f"{s} raised {type(err).__name__}: {err}"))
        if failure is not None:
            return failure
        if not isinstance(out, value_class):
            kind = "a torch tensor" if isinstance(out, torch.Tensor) else type(out).__name__
            return failed(name, f"{shown} returned {kind}; it must return a new Tensor of the "
                                "engine, whose parents and rule backward can follow")
        got = getattr(out, "data", None)
        if not isinstance(got, torch.Tensor) or got.shape != want.shape:
            found = shape_text(tuple(got.shape)) if isinstance(got, torch.Tensor) else "none"
            return failed(name, f"{shown}.data has shape {found}, but torch's gives "
                                f"{shape_text(tuple(want.shape))}: the forward is wrong")
        if not torch.allclose(got, want, rtol=1e-12, atol=1e-12):
            return failed(name, f"{shown}.data differs from torch's by up to "
                                f"{(got - want).abs().max():.3g}: the forward value is wrong")
        parents = getattr(out, "parents", ())
        if not callable(getattr(out, "rule", None)) or not parents:
            return failed(name, f"{shown} made a Tensor without a rule or parents: give it "
                                "its inputs as parents and a rule (g -> one gradient per "
                                "parent), so that backward reaches them")
    return None

