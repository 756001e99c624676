"""Lesson 16's Exercise 4 (``l16-checkpoint``): which blocks of a stack to checkpoint.

The blocks cost unequal amounts to recompute. The check draws its stack so that the rule
of section 3 taken as a plan, the blocks with the most bytes per multiply-add first until
the budget is met, is *not* the cheapest choice: its last block saves more than the budget
still needs, and another mix fits for less; and so that the cheapest choice keeps exactly
the budget, 60 % of the plain bytes ("at most" read as "below" misses it). The answer only
chooses. What its choice keeps and what backward recomputes follow from one plain run of
the stack (the bytes each block keeps, its multiply-adds: sums, which lesson 16's facts
test measures against real checkpointed runs), and the choice is compared with the
cheapest of every choice within the budget.
"""

from __future__ import annotations

import functools
import itertools

import torch
from torch import nn
from torch.autograd.graph import saved_tensors_hooks
from torch.utils.checkpoint import checkpoint

from .._spec import Method, call_answer, seeded
from .hooked import first_error


def cheap_block(width, depth):
    """Memory-hungry but cheap: a Linear, then 2 * depth element-wise functions that each
    keep their output, then a Linear."""
    layers = [nn.Linear(width, width)]
    for _ in range(depth):
        layers += [nn.Tanh(), nn.Sigmoid()]
    return nn.Sequential(*layers, nn.Linear(width, width))


def wide_block(width, hidden):
    """Costly to recompute: a big matrix product, one kept tensor, and another product."""
    return nn.Sequential(nn.Linear(width, hidden), nn.Tanh(), nn.Linear(hidden, width))


def multiply_adds(block):
    """Multiply-adds per example that recomputing a checkpointed block runs: its Linear
    layers but the last (a Linear saves its input before its product runs, and the
    recomputation stops once every tensor the backward needs is saved again)."""
    linears = [m for m in block.modules() if isinstance(m, nn.Linear)]
    return sum(m.in_features * m.out_features for m in linears[:-1])


def uneven_stack(seed, width=64):
    """Eight blocks of two kinds in a new order, with a new batch (the input needs no grad)."""
    gen = torch.Generator().manual_seed(seed)
    depth = int(torch.randint(1, 4, (1,), generator=gen))
    hidden = 128 * int(torch.randint(1, 4, (1,), generator=gen))
    n_cheap = int(torch.randint(2, 6, (1,), generator=gen))
    order = torch.randperm(8, generator=gen).tolist()
    with seeded(seed):
        blocks = nn.ModuleList(cheap_block(width, depth) if order[i] < n_cheap
                               else wide_block(width, hidden) for i in range(8))
    x = torch.randn(32, width, generator=gen)
    return blocks, x


def run_stack(blocks, x, chosen):
    h = x
    for i, block in enumerate(blocks):
        h = checkpoint(block, h, use_reentrant=False) if i in chosen else block(h)
    return h


def kept_bytes(blocks, run):
    """Bytes of the non-parameter storages saved for backward while ``run()`` builds its
    graph, each storage once; and the output."""
    params = {p.untyped_storage().data_ptr() for p in blocks.parameters()}
    seen = {}

    def pack(t):
        key = t.untyped_storage().data_ptr()
        if key not in params:
            seen[key] = t.untyped_storage().nbytes()
        return t

    with saved_tensors_hooks(pack, lambda t: t):
        out = run()
    return out, sum(seen.values())


BUDGET_PERCENT = 60


def plan(blocks, x):
    """What the stack keeps plainly, the bytes checkpointing each block alone saves, each
    block's multiply-adds, and the cost of three choices within the budget: the cheapest of
    all, the rule of thumb's (most bytes per multiply-add first, until the budget is met),
    and the cheapest of those with the fewest blocks; the cost of the cheapest choice that
    keeps less than the budget, and whether every cheapest choice keeps the budget exactly.
    One plain run: each saved storage is counted once, for the block that saved it first,
    and a block's input is kept either way (by the checkpoint when the block is
    checkpointed)."""
    params = {p.untyped_storage().data_ptr() for p in blocks.parameters()}
    seen, inputs, running = {}, set(), [0]

    def pack(t):
        key = t.untyped_storage().data_ptr()
        if key not in params and key not in seen:
            seen[key] = (running[0], t.untyped_storage().nbytes())
        return t

    h = x
    with saved_tensors_hooks(pack, lambda t: t):
        for i, block in enumerate(blocks):
            running[0] = i
            inputs.add(h.untyped_storage().data_ptr())
            h = block(h)
    plain = sum(nbytes for _, nbytes in seen.values())
    saves = [sum(nbytes for key, (i, nbytes) in seen.items() if i == b and key not in inputs)
             for b in range(len(blocks))]
    costs = [multiply_adds(b) for b in blocks]
    budget = plain * BUDGET_PERCENT // 100
    fits = [(sum(costs[i] for i in c), plain - sum(saves[i] for i in c), c)
            for r in range(len(blocks) + 1) for c in itertools.combinations(range(len(blocks)), r)
            if plain - sum(saves[i] for i in c) <= budget]
    cheapest = min(cost for cost, _, _ in fits)
    fewest = min(len(c) for _, _, c in fits)
    by_ratio, kept = [], plain
    for i in sorted(range(len(blocks)), key=lambda i: saves[i] / costs[i], reverse=True):
        if kept <= budget:
            break
        by_ratio.append(i)
        kept -= saves[i]
    return {"plain": plain, "saves": saves, "costs": costs, "budget": budget,
            "cheapest": cheapest, "by_ratio": sorted(by_ratio), "by_ratio_kept": kept,
            "by_ratio_cost": sum(costs[i] for i in by_ratio),
            "fewest": fewest, "fewest_cost": min(cost for cost, _, c in fits if len(c) == fewest),
            "below_cost": min(cost for cost, k, _ in fits if k < budget),
            "on_budget": budget * 100 == plain * BUDGET_PERCENT
                         and all(k == budget for cost, k, _ in fits if cost == cheapest)}


# What the check's stack must show, each as a test of its plan (`plan`): a plan that is
# wrong in that way costs more than the cheapest choice, on every check, and (the last)
# costs what neither of the others does, so that the message can tell them apart.
WANTED = {
    "the rule of thumb taken as the plan": lambda found: found["by_ratio_cost"] > found["cheapest"],
    "a cost counted in blocks, not in multiply-adds":
        lambda found: found["fewest_cost"] > found["cheapest"],
    "a budget read as strictly below 60 %":
        lambda found: found["on_budget"]
        and found["below_cost"] not in (found["by_ratio_cost"], found["fewest_cost"]),
}


@functools.lru_cache(maxsize=64)  # a sweep asks for the same seed once per answer
def _budget_seed(seed):
    """The seed of the check's stack for ``seed``: the first of a run of new stacks that
    shows every mistake of `WANTED` (about one stack in thirty does)."""
    for draw in range(1000):
        found = plan(*uneven_stack(1000 * seed + 17 + draw))
        if all(shows(found) for shows in WANTED.values()):
            return 1000 * seed + 17 + draw
    raise RuntimeError(f"no stack for seed {seed} shows every mistake of WANTED")


def budget_stack(seed):
    """The check's stack for ``seed``, its input, and its plan."""
    blocks, x = uneven_stack(_budget_seed(seed))
    return blocks, x, plan(blocks, x)


def _too_costly(chosen, cost, found):
    """The message for a choice within the budget that recomputes more than it must."""
    said = (f"within the budget, but backward recomputes {cost:,} multiply-adds per example "
            f"where {found['cheapest']:,} would do. ")
    kept = _kept(chosen, found)
    if found["on_budget"] and kept < found["budget"] and cost == found["below_cost"]:
        return said + (
            f"Yours keeps {kept:,} bytes, below the budget, and is the cheapest of the choices "
            f"that keep less than the budget; the cheapest choices within it keep exactly "
            f"{found['budget']:,}, the budget itself ({BUDGET_PERCENT} % of the plain "
            f"{found['plain']:,}): \"at most {BUDGET_PERCENT} %\" lets a choice keep that much")
    kinds = [(found["saves"][i], found["costs"][i]) for i in range(len(found["costs"]))]
    if sorted(kinds[i] for i in chosen) == sorted(kinds[i] for i in found["by_ratio"]):
        over = found["budget"] - found["by_ratio_kept"]
        return said + (
            "Your blocks are the ones taken with the most bytes per multiply-add first until "
            f"the budget is met, and the last of those saves {over:,} bytes more than the budget "
            "still needed: another mix of blocks fits for less. Bytes per multiply-add rank "
            "the blocks, they do not choose the set: compare the choices that fit the budget")
    if len(chosen) == found["fewest"]:
        return said + (
            f"You took the fewest blocks that fit ({len(chosen)}), but backward's cost is the "
            "multiply-adds it recomputes, not the number of blocks: more blocks, cheaper to "
            "recompute, fit for less. Compare the choices that fit the budget by their "
            "multiply-adds")
    return said + (
        "Even the blocks with the most bytes per multiply-add taken first, until the budget "
        f"is met, would recompute {found['by_ratio_cost']:,} here, more than needed: compare "
        "the choices that fit the budget")


def _observe_choice(answer, inputs):
    """The blocks the answer chose for the stack, each once and in order (an index that is
    not an int as its repr), or what it returned instead of a collection of indices (bools,
    a True or False per block, are no indices: Python would take them for 0 and 1)."""
    blocks, x = uneven_stack(inputs["stack"])
    chosen, failed = call_answer(answer, blocks, x, what="it", raised=first_error,
                                 not_callable=f"expected a function (blocks, x) -> block "
                                              f"indices, got {type(answer).__name__}")
    if failed is not None:
        return failed
    try:
        indices = sorted(set(chosen))
    except TypeError:
        return {"returned": type(chosen).__name__}
    if any(isinstance(i, bool) for i in indices):
        return {"returned": "bools"}
    return [i if isinstance(i, int) else repr(i)[:40] for i in indices]


def _cheapest_choices(inputs):
    """Every choice within the budget that recomputes the least: what a right answer
    returns. A plain run of the stack says what each block keeps (`plan`), so the bytes a
    choice keeps and what backward recomputes are sums (lesson 16's facts test measures
    them against real runs)."""
    found = plan(*uneven_stack(inputs["stack"]))
    return [list(c) for r in range(len(found["costs"]) + 1)
            for c in itertools.combinations(range(len(found["costs"])), r)
            if _kept(c, found) <= found["budget"]
            and sum(found["costs"][i] for i in c) == found["cheapest"]]


def _kept(chosen, found):
    """The bytes kept with ``chosen`` checkpointed: the plain run's, less what each saves."""
    return found["plain"] - sum(found["saves"][i] for i in chosen)


def _explain_choice(inputs, got, want):
    found = plan(*uneven_stack(inputs["stack"]))
    n = len(found["costs"])
    if got == {"returned": "bools"}:
        return ("expected block indices, got bools: return the indices of the blocks to "
                "checkpoint, such as {0, 3}, not a True or False for each block")
    if isinstance(got, dict):
        return f"expected a set or list of block indices, got {got['returned']}"
    if not all(isinstance(i, int) and 0 <= i < n for i in got):
        return f"expected indices between 0 and {n - 1}, got {got}"
    plain, budget, kept = found["plain"], found["budget"], _kept(got, found)
    if kept > budget:
        return (f"with blocks {got} checkpointed, {kept:,} bytes are kept, over the budget of "
                f"{budget:,} ({BUDGET_PERCENT} % of the plain {plain:,}): checkpoint more "
                "blocks")
    return _too_costly(got, sum(found["costs"][i] for i in got), found)


CHECKPOINT = Method(
    name="choose_checkpoints",
    make_inputs=lambda gen: {"stack": _budget_seed(gen.initial_seed())},
    observe=_observe_choice,
    reference=_cheapest_choices,
    explain=_explain_choice,
    trials=1,
    agree=lambda got, want: got in want,
    passed=f"the bytes kept are within the budget ({BUDGET_PERCENT} % of what the plain stack "
           "keeps), and backward recomputes the least any choice within the budget needs",
)
