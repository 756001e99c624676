"""What lesson 11's three checks share: the pieces a check cell hands over, which trial
this is, shapes in words, and a new operation's forward: what it made, recorded where the
answer runs, and held against torch's in the grader."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from .._spec import call_answer, failure, plain

F64 = torch.float64


def unpack(answer, names):
    """The pieces a check cell hands over, or a failure saying what was expected."""
    if not (isinstance(answer, tuple) and len(answer) == len(names)):
        return None, failure("fail", f"expected the tuple ({', '.join(names)}) from the check "
                                     "cell; run the check cell as it is")
    return answer, None


def trial_kind(gen, kinds):
    """Which kind of input this trial is: trials run on seeds seed, seed + 1, ..., so
    every kind is met once in ``kinds`` trials, whatever the seed."""
    return gen.initial_seed() % kinds


def cases_from(gen, make, count):
    """``count`` cases of ``make``, on seeds seed, seed + 1, ...: one trial of the check
    holds them all, so that a slip is named only when it holds on every one."""
    seed = gen.initial_seed()
    return [list(make(torch.Generator().manual_seed(seed + k))) for k in range(count)]


def draw_size(gen, low=2, high=5):
    """A size from ``low`` to ``high - 1``."""
    return int(torch.randint(low, high, (), generator=gen))


def shape_text(shape):
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def forward_records(name: str, value_class: type, calls: list[tuple[str, Callable]]
                    ) -> list[dict] | dict:
    """What the new operation made on each call (shown as the message shows it): whether
    it is a Tensor of the engine (else what it is), its data, and whether it has a rule
    and parents for backward to follow; or the failure of a call that raised."""
    records = []
    for shown, call in calls:
        out, failed = call_answer(call, what=name, raised=lambda err, s=shown: (
            f"{s} raised {type(err).__name__}: {err}"))
        if failed is not None:
            return failed
        engine = isinstance(out, value_class)
        data = getattr(out, "data", None) if engine else None
        records.append({
            "made": "Tensor" if engine else "a torch tensor" if isinstance(out, torch.Tensor)
            else type(out).__name__,
            "data": plain(data) if isinstance(data, torch.Tensor) else None,
            "linked": engine and callable(getattr(out, "rule", None))
            and bool(getattr(out, "parents", ()))})
    return records


def followable(records: list[dict]) -> bool:
    """Whether backward can follow what every call made (else the grader names the first
    that it cannot, and no gradient is worth taking)."""
    return all(r["made"] == "Tensor" and r["linked"] for r in records)


def forward_problem(records: list[dict], wants: list[torch.Tensor], shown: list[str]
                    ) -> str | None:
    """What is wrong with the first forward that is not torch's (or cannot be followed),
    in words; None when every one is right."""
    for record, want, call in zip(records, wants, shown, strict=True):
        if record["made"] != "Tensor":
            return (f"{call} returned {record['made']}; it must return a new Tensor of the "
                    "engine, whose parents and rule backward can follow")
        got = record["data"]
        if not isinstance(got, torch.Tensor) or got.shape != want.shape:
            found = shape_text(tuple(got.shape)) if isinstance(got, torch.Tensor) else "none"
            return (f"{call}.data has shape {found}, but torch's gives "
                    f"{shape_text(tuple(want.shape))}: the forward is wrong")
        if not torch.allclose(got.to(want.dtype), want, rtol=1e-12, atol=1e-12):
            return (f"{call}.data differs from torch's by up to "
                    f"{(got.to(want.dtype) - want).abs().max():.3g}: the forward value is "
                    "wrong")
        if not record["linked"]:
            return (f"{call} made a Tensor without a rule or parents: give it its inputs as "
                    "parents and a rule (g -> one gradient per parent), so that backward "
                    "reaches them")
    return None


def ragged(lists: list[list[int]]) -> dict:
    """Lists of whole numbers as two tensors, their lengths and their items one after
    another: the grade's wire sends a few tensors quickly and thousands of small items
    slowly (a graph 5,000 operations deep has that many)."""
    return {"lengths": torch.tensor([len(v) for v in lists], dtype=torch.int64),
            "items": torch.tensor([x for v in lists for x in v], dtype=torch.int64)}


def unragged(packed: dict) -> list[list[int]]:
    items, lists, at = packed["items"].tolist(), [], 0
    for n in packed["lengths"].tolist():
        lists.append(items[at:at + n])
        at += n
    return lists


def stacked(tensors: list) -> dict:
    """Many small tensors as a few, for the same reason: their entries in float64 one
    after another and their shapes; what is not a real tensor is kept apart, by position,
    as plain data."""
    real = [t for t in tensors if isinstance(t, torch.Tensor) and not t.is_complex()]
    return {"entries": torch.cat([t.detach().reshape(-1).to(F64) for t in real]) if real
            else torch.zeros(0, dtype=F64),
            "shapes": ragged([list(t.shape) for t in real]), "count": len(tensors),
            "others": {str(k): plain(t) for k, t in enumerate(tensors)
                       if not (isinstance(t, torch.Tensor) and not t.is_complex())}}


def unstacked(packed: dict) -> list:
    shapes, entries, at = iter(unragged(packed["shapes"])), packed["entries"], 0
    found = []
    for k in range(packed["count"]):
        if str(k) in packed["others"]:
            found.append(packed["others"][str(k)])
            continue
        shape = next(shapes)
        n = math.prod(shape)
        found.append(entries[at:at + n].reshape(shape))
        at += n
    return found
