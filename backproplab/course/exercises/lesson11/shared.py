"""What lesson 11's three checks share: the pieces a check cell hands over, which trial
this is, shapes in words, a new operation's forward (what it made, recorded where the
answer runs, and held against torch's in the grader), and the whole check of an
operation that is one node with x as its only parent (`one_node`)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...slips import fresh
from .._spec import (
    ENGINE,
    Method,
    call_answer,
    failed_words,
    failure,
    is_failure,
    judge_runs,
    plain,
    run_by_hand,
)

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


def _node_problem(node: dict) -> str | None:
    if node["parents"] != 1 or not node["x first"]:
        return (f"it made a node with {node['parents']} parent(s); it must be one node whose "
                "only parent is x, with a rule you derive (a chain of the engine's operations "
                "would be their rules, not yours)")
    return None


def one_node(*, name: str, make_case: Callable, count: int, forward: Callable,
             gradient: Callable, shown: Callable[..., str], slips: dict, advice: str,
             params: tuple[str, ...], expects: str) -> Method:
    """The check of an operation the learner writes as one node of the engine whose only
    parent is x (``amax``, ``cumsum``). A trial is ``count`` cases ``(X, *options, G)``
    made by ``make_case`` on seeds seed, seed + 1, ...; on each, what ``name(Tensor(X),
    *options)`` made is held against ``forward(X, *options)``, and x's gradient from
    ``(out * G).sum()``, run by the answer's own ``backward`` with autograd refused,
    against ``gradient(X, *options, G)`` by the by-hand judge, which names one of
    ``slips`` only when it holds on every case. ``shown(X, *options)`` is a call in words.
    """
    names, grad_name = (name, "Tensor", "backward"), f"{name}'s x.grad"

    def make_inputs(gen):
        return {"cases": cases_from(gen, make_case, count)}

    def observe(answer, inputs):
        """What the answer made on every case, how many parents its node has (and whether
        x is the first), then (when backward can follow each) x's gradient."""
        pieces, unpacked = unpack(answer, names)
        if unpacked:
            return unpacked
        op, value_class, backward = pieces
        if not callable(op):
            return failure("fail", f"{name} is {type(op).__name__}, not {expects}")
        cases = inputs["cases"]
        made = forward_records(name, value_class, [
            (shown(*case[:-1]), lambda case=case: op(value_class(case[0]), *case[1:-1]))
            for case in cases])
        if is_failure(made) or not followable(made):
            return made if is_failure(made) else {"forward": made}
        x = value_class(cases[0][0])
        parents, failed = call_answer(lambda: tuple(op(x, *cases[0][1:-1]).parents), what=name)
        if failed is not None:
            return failed
        node = {"parents": len(parents), "x first": bool(parents) and parents[0] is x}

        def engine_grad(X, *rest):  # rest: the options, then G
            x = value_class(X)
            backward((op(x, *rest[:-1]) * value_class(rest[-1])).sum())
            return x.grad

        grads = run_by_hand(engine_grad, cases, name=grad_name, params=params)
        return grads if is_failure(grads) else {"forward": made, "node": node, "grads": grads}

    def reference(inputs):
        cases = inputs["cases"]
        return {"forward": [forward(*case[:-1]) for case in cases],
                "grads": [gradient(*fresh(case)) for case in cases]}

    def judged(got, want, cases=None):
        return judge_runs(got["grads"], want, cases, name=grad_name, mistakes=slips,
                          advice=advice, params=params)

    def agree(got, want):
        return (forward_problem(got["forward"], want["forward"], [name] * count) is None
                and "grads" in got and _node_problem(got["node"]) is None
                and judged(got, want["grads"]).ok)

    def explain(inputs, got, want):
        calls = [shown(*case[:-1]) for case in inputs["cases"]]
        problem = forward_problem(got["forward"], want["forward"], calls)
        if problem is None and _node_problem(got["node"]) is not None:
            problem = f"{calls[0]}: {_node_problem(got['node'])}"
        return problem or failed_words(judged(got, gradient, inputs["cases"]), name)

    return Method(name=name, make_inputs=make_inputs, observe=observe, reference=reference,
                  explain=explain, trials=1, agree=agree, vocabulary=ENGINE,
                  passed=f"x.grad matches torch's on {count} new random inputs")
