"""Exercise 2 of lesson 23: DDP's buckets, built from gradient hooks, without DDP.

The learner's ``bucketed_averaging(model, cap)`` receives a plain model in each worker and
must leave the average over the processes in every ``.grad`` when ``backward()`` returns,
sending the gradients as DDP does: in the order they become ready, gathered into buckets
that close once they hold ``cap`` bytes or more, each bucket one ``dist.all_reduce`` of a
flat tensor, sent as soon as its last gradient is ready, and what is left sent with the
last gradient. The check runs two steps of a model whose widths and cap come from the
seed (chosen so that every slip below gives other bucket sizes), in 2 and in 3 processes.
The model registers its output layer first, so ``model.parameters()`` lists the gradients
neither in the order backward fills them nor in its reverse. Inside the workers the
observation records every all-reduce (its size, whether it ran inside backward, and for
one made with async_op=True whether its work was waited for) and how many had been sent
when each gradient was ready.
The verdict compares the sizes with the buckets the rule gives, the moments with the
earliest possible ones, and the gradients with what DDP's averaging gives on the same
data (computed in the grader's own process). A slip is named only when the sizes are
exactly what that slip gives.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ...distributed import grads_by_name, mse
from .._spec import Method, is_failure
from .common import (
    ALLOWS,
    VOCABULARY,
    WORLD_SIZES,
    _advice,
    _factor,
    _flat,
    _is_local,
    _never_waited,
    _scale_slip,
    _unwaited,
    _watch_all_reduce,
    _watch_ddp,
    _whose,
    averaged,
    each_world,
)

STEPS = 2  # a second step catches buckets that carry over from the first


class HeadFirst(nn.Module):
    """Linear layers through ``widths`` with tanh between them, the output layer registered
    before the layers under it, as models often are. ``model.parameters()`` then starts with
    the output layer's weight, which backward fills second, not last: an answer that takes
    the first parameter for the last gradient of a step, or plans its buckets in the order
    ``parameters()`` lists them, gives other buckets than the rule."""

    def __init__(self, widths: list[int]) -> None:
        super().__init__()
        self.head = nn.Linear(widths[-2], widths[-1])
        layers: list[nn.Module] = []
        for n_in, n_out in zip(widths[:-2], widths[1:-1], strict=True):
            layers += [nn.Linear(n_in, n_out), nn.Tanh()]
        self.body = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def bucket_model(widths: list[int], seed: int) -> HeadFirst:
    """The check's model through ``widths``, the weights from ``seed``."""
    torch.manual_seed(seed)
    return HeadFirst(widths)


def _ready(widths: list[int]) -> list[tuple[str, int]]:
    """The parameters in the order backward fills their gradients, as (kind, layer): the
    last layer first, each bias before its weight (what section 3's timeline shows)."""
    return [(kind, j) for j in reversed(range(len(widths) - 1)) for kind in ("bias", "weight")]


def _registered(widths: list[int]) -> list[tuple[str, int]]:
    """The parameters in the order ``HeadFirst.parameters()`` lists them."""
    last = len(widths) - 2
    return [("weight", last), ("bias", last),
            *((kind, j) for j in range(last) for kind in ("weight", "bias"))]


def _size(widths: list[int], param: tuple[str, int]) -> int:
    kind, j = param
    return widths[j + 1] * (widths[j] if kind == "weight" else 1)


def ready_order(widths: list[int]) -> list[int]:
    """The sizes of the parameters in the order backward fills their gradients."""
    return [_size(widths, param) for param in _ready(widths)]


def buckets(sizes: list[int], cap: int, bytes_per_value: int = 4,
            before_passing: bool = False, past: int = 0) -> list[int]:
    """Values per bucket: ``sizes`` taken in turn, a bucket closed once it holds ``cap``
    bytes or more (``past`` = 1: more than ``cap`` bytes; or, ``before_passing``, before the
    gradient that would pass the cap)."""
    out, current = [], 0
    for n in sizes:
        if before_passing and current and (current + n) * bytes_per_value > cap:
            out.append(current)
            current = 0
        current += n
        if not before_passing and current * bytes_per_value >= cap + past:
            out.append(current)
            current = 0
    return out + ([current] if current else [])


def _planned(widths: list[int], cap: int) -> list[int]:
    """Buckets planned in the order ``parameters()`` lists them, each sent once all of its
    gradients are ready: the sizes in the order they go out."""
    plan, current = [], []
    for param in _registered(widths):
        current.append(param)
        if 4 * sum(_size(widths, q) for q in current) >= cap:
            plan, current = plan + [current], []
    plan += [current] if current else []
    ready = _ready(widths)
    plan.sort(key=lambda bucket: max(ready.index(q) for q in bucket))
    return [sum(_size(widths, q) for q in bucket) for bucket in plan]


def _first_for_last(sizes: list[int], cap: int) -> list[int]:
    """What is left sent with the gradient of the first parameter ``parameters()`` lists
    (the second one ready), and never at the end."""
    rest = buckets(sizes[2:], cap)
    return buckets(sizes[:2], cap) + (rest[:-1] if rest and 4 * rest[-1] < cap else rest)


def _slips(widths: list[int], cap: int) -> dict[str, list[int]]:
    """The sizes of the all-reduce calls each slip makes, for one step."""
    sizes = ready_order(widths)
    per_layer = [a + b for a, b in zip(sizes[::2], sizes[1::2], strict=True)]
    return {
        "one all-reduce per parameter: gather the gradients into buckets and send a bucket "
        "once it holds the cap or more": sizes,
        "one all-reduce per layer: a bucket is made of bytes, not layers; it closes once it "
        "holds the cap or more": per_layer,
        "each bucket was closed before the gradient that would pass the cap; DDP's close once "
        "they reach or pass it, so the gradient that passes it goes in too":
            buckets(sizes, cap, before_passing=True),
        "the cap was counted in values; it is in bytes, 4 for each float32 value "
        "(t.numel() * t.element_size())": buckets(sizes, cap, bytes_per_value=1),
        "the buckets follow model.parameters(), the order the layers were registered in (this "
        "model registers its output layer first); gradients become ready in the order "
        "backward reaches them, the output layer's bias first and the first layer's weight "
        "last, and a bucket fills in that order": _planned(widths, cap),
        "a bucket was closed only once it held more than the cap; DDP's close once they hold "
        "cap bytes or more (>=, not >)": buckets(sizes, cap, past=1),
        "the last bucket was never sent: it does not reach the cap, so send what is left "
        "once every parameter's gradient is in": buckets(sizes, cap)[:-1],
        "what was left went out with the gradient of the first parameter model.parameters() "
        "lists, which is not the last one ready (this model registers its output layer "
        "first): count the gradients that have arrived, and send what is left with the last":
            _first_for_last(sizes, cap),
        "everything went in one all-reduce: close a bucket as soon as it holds the cap or "
        "more, and send it then": [sum(sizes)],
    }


def pick(seed: int) -> tuple[list[int], int]:
    """Widths (5 in, three hidden layers of 4 to 12, 3 out) and a cap in bytes under which
    the buckets, and every slip's, differ from each other; the last bucket stays under the
    cap, so it must be sent at the end. A bucket holds exactly the cap (the > slip needs
    that to differ), which few widths allow: the loop draws until some do."""
    gen = torch.Generator().manual_seed(seed)
    while True:
        widths = [5, *(int(v) for v in torch.randint(4, 13, (3,), generator=gen)), 3]
        sizes, good = ready_order(widths), []
        for cap in range(4 * min(sizes), 2 * sum(sizes), 4):  # only these can be held exactly
            want = buckets(sizes, cap)
            layouts = [want, *_slips(widths, cap).values()]
            if (len(want) > 1 and 4 * want[-1] < cap
                    and all(a != b for i, a in enumerate(layouts) for b in layouts[i + 1:])):
                good.append(cap)
        if good:
            return widths, good[int(torch.randint(0, len(good), (1,), generator=gen))]


def _batch(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed + 1)
    return torch.randn(12, 5, generator=gen), torch.randn(12, 3, generator=gen)


def _share(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = _batch(seed)
    rank, world = dist.get_rank(), dist.get_world_size()
    return x.chunk(world)[rank], y.chunk(world)[rank]


def _bucket_trial(answer: Any, seed: int, widths: list[int], cap: int) -> dict[str, Any]:
    """Two steps of a plain model after ``answer(model, cap)`` (runs in each worker)."""
    sent = _watch_all_reduce()
    made = _watch_ddp()
    model = bucket_model(widths, seed)
    x, y = _share(seed)
    answer(model, cap)
    seen: list[int] = []  # all-reduce calls made when each gradient was ready
    # Read once each parameter's AccumulateGrad node is done: after the tensor's
    # post-accumulate hooks and after the node's own hooks registered before this one (DDP's
    # reducer hooks the node), so a bucket sent from either kind of hook is on time. The
    # nodes are held here: a node nobody holds is made anew, without its hooks, each step.
    nodes = [p.view_as(p).grad_fn.next_functions[0][0] for p in model.parameters()]
    for node in nodes:
        node.register_hook(lambda grad_inputs, grad_outputs: seen.append(len(sent)))
    steps = []
    for _ in range(STEPS):
        model.zero_grad()
        before = len(sent)
        seen.clear()
        try:
            mse(model, x, y).backward()
        except Exception as err:  # told after the sizes of the steps before, which may say why
            steps.append({"error": f"{type(err).__name__}: {err}".splitlines()[0]})
            break
        steps.append({"sizes": [call["size"] for call in sent[before:]],
                      "inside": all(call["inside"] for call in sent[before:]),
                      "seen": [k - before for k in seen]})
    return {"used_ddp": len(made), "steps": steps, "unwaited": _unwaited(sent),
            "grads": grads_by_name(model)}


def _earliest(want: list[int], sizes: list[int]) -> list[int]:
    """Buckets sent when each gradient is ready, if each goes as soon as it is full."""
    ends, total = [], 0
    for n in want:
        total += n
        ends.append(total)
    done, out = 0, []
    for n in sizes:
        done += n
        out.append(sum(1 for end in ends if end <= done))
    return out


def _sizes_slip(steps: list[dict], widths: list[int], cap: int, where: str) -> str | None:
    sizes = ready_order(widths)
    want = buckets(sizes, cap)
    for k, step in enumerate(steps):
        if step["sizes"] == want:
            continue
        if k > 0 and steps[0]["sizes"] == want:
            return (f"{where} the first step's buckets were right and the second's were "
                    f"{step['sizes']} values instead of {want}: start every backward with an "
                    "empty bucket and a fresh count.")
        for words, theirs in _slips(widths, cap).items():
            if step["sizes"] == theirs:
                return f"{where} {words}."
        return (f"{where} step {k + 1} made all-reduce calls of {step['sizes']} values. With "
                f"the gradients ready in the order of {sizes} values and a cap of {cap} bytes "
                f"(4 per value), the buckets hold {want}.")
    return None


def _timing_slip(steps: list[dict], sizes: list[int], cap: int, where: str) -> str | None:
    want = buckets(sizes, cap)
    for step in steps:
        if not step["inside"]:
            return (f"{where} an all-reduce ran outside backward: send each bucket from the "
                    "hook of its last gradient (register_post_accumulate_grad_hook).")
        if step["seen"] != _earliest(want, sizes):
            return (f"{where} a bucket went out later than the hook of its last gradient "
                    f"(sent so far when each gradient was ready: {step['seen']}; expected "
                    f"{_earliest(want, sizes)}): send each bucket as soon as it is full, so "
                    "that it travels while backward carries on.")
    return None


def _values_slip(results: list[dict], want: dict, world: int, where: str) -> str | None:
    exact = _flat(want["exact"])
    for r, (result, local) in enumerate(zip(results, want["local"], strict=True)):
        mine = _flat(result["grads"])
        if mine is None:
            return f"{where} some .grad is None after backward on rank {r}."
        if mine.shape == exact.shape and torch.allclose(mine, exact, rtol=1e-5, atol=1e-7):
            continue
        if _is_local(result["grads"], local):
            return (f"{where} each rank kept its own gradient: write each bucket's average "
                    "back into the .grad of every parameter in it.")
        c = _factor(mine, exact)
        slip = None if c is None else _scale_slip(c, world)
        if slip is not None:
            return f"{where} {_whose(results, exact, c, r)} are {slip}."
        worst = float((mine - exact).abs().max())
        return (f"{where} rank {r}'s gradients differ from DDP's by up to {worst:.2g}: is "
                "each slice of the averaged bucket written back to its own parameter?")
    return None


def _world_slip(results: list[dict], want: dict, world: int) -> str | None:
    """The first thing wrong with one run, in the order the check always looked."""
    widths, cap = want["widths"], want["cap"]
    where = f"({world} processes, cap {cap} bytes)"
    if len(results) != world:  # never from a run that went through
        return f"{where} {len(results)} ranks sent back their results."
    if results[0]["used_ddp"]:
        return (f"{where} it made a DistributedDataParallel; the exercise asks for DDP's "
                "buckets without DDP: dist.all_reduce in gradient hooks.")
    steps, sizes = results[0]["steps"], ready_order(widths)
    if not any(step.get("sizes") for step in steps) and "error" not in steps[0]:
        return (f"{where} made no dist.all_reduce call; the exercise sends each bucket in "
                "one all-reduce of a flat tensor.")
    done = [step for step in steps if "error" not in step]
    slip = _sizes_slip(done, widths, cap, where)
    if slip is None and len(done) < len(steps):
        error = steps[len(done)]["error"]
        slip = f"{where} step {len(done) + 1} raised {error}" + _advice(error) + (
            "" if done else ".")
    if slip is None and len(done) != STEPS:  # never from a run that went through
        slip = f"{where} {len(done)} of its {STEPS} steps were sent back."
    return (slip or _never_waited(results[0]["unwaited"], where)
            or _timing_slip(done, sizes, cap, where)
            or _values_slip(results, want, world, where))


def _bucket_inputs(gen: torch.Generator) -> dict[str, Any]:
    """The seed, and for 2 and for 3 processes the model's widths and the cap."""
    seed = gen.initial_seed()
    return {"seed": seed, "worlds": [list(pick(seed * 7 + world)) for world in WORLD_SIZES]}


def _observe_bucketed(answer: Any, inputs: dict[str, Any]) -> Any:
    """Two steps after the learner's function set the model up, in 2 and in 3 processes:
    the all-reduce calls of each step and the gradients each rank ended with."""
    plans = dict(zip(WORLD_SIZES, inputs["worlds"], strict=True))
    found = each_world(_bucket_trial, answer, inputs["seed"],
                       extra=lambda world: tuple(plans[world]))
    return found if is_failure(found) else {"runs": found}


def _bucket_want(inputs: dict[str, Any]) -> list[dict[str, Any]]:
    """For each world size: the widths, the cap, and what DDP's averaging gives."""
    wants = []
    for world, (widths, cap) in zip(WORLD_SIZES, inputs["worlds"], strict=True):
        seed = inputs["seed"] + world
        exact, local = averaged(functools.partial(bucket_model, widths, seed), *_batch(seed),
                                world)
        wants.append({"widths": widths, "cap": cap, "exact": exact, "local": local})
    return wants


def _bucket_slip(got: dict[str, Any], wants: list[dict[str, Any]]) -> str | None:
    for world, results, want in zip(WORLD_SIZES, got["runs"], wants, strict=True):
        slip = results["detail"] if is_failure(results) else _world_slip(results, want, world)
        if slip is not None:
            return slip
    return None


BUCKETS = Method(
    name="bucketed_averaging",
    make_inputs=_bucket_inputs,
    observe=_observe_bucketed,
    reference=_bucket_want,
    wrong=_bucket_slip,
    trials=1,
    passed=f"in 2 and in 3 processes, {STEPS} steps each: one all-reduce per bucket, the "
           "buckets closed at the cap in the order the gradients became ready, each sent from "
           "the hook of its last gradient during backward, and the gradients equal DDP's",
    allows=ALLOWS,
    vocabulary=VOCABULARY,
)
