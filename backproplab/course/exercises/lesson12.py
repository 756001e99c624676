"""Lesson 12, what backward keeps: its exercises and its predictions.

- ``l12-bytes-formula`` (Exercise 2): the bytes an MLP keeps for backward, from a
  formula. It is checked like a gradient by hand (`ByHand`): new batch sizes,
  widths and activations on every trial, the reference measured with
  `describe(...).saved_memory()`, byte counts compared exactly. Its slips are
  about counting, not about derivatives.
- ``l12-checkpoint-by-hooks``: checkpointing built from saved-tensor hooks. The
  check runs the learner's function on new blocks (dropout in some, an input that
  requires grad in some), looks with weak references (and, once, through every
  live tensor) for what the block made and should not keep, counts the block's
  runs and their grad mode, and compares the gradients with the plain block's.
- ``l12-checkpoint``: which blocks of a stack to checkpoint. The blocks cost
  unequal amounts to recompute; the check runs the learner's choice itself,
  measures the memory kept, counts the recomputations in backward with forward
  pre-hooks, and compares with the cheapest choice within the budget.
- ``l12-tbptt``: the error of the truncated-BPTT gradient against full BPTT.
"""

from __future__ import annotations

import gc
import itertools
import math
import weakref

import torch
from torch import nn
from torch.autograd.graph import saved_tensors_hooks
from torch.utils.checkpoint import checkpoint

from ...graph import describe
from ._spec import ByHand, Check, Method, Prediction, Report, attempt, passed
from ._spec import failed as _fail

# --------------------------------------------------------------------------- Exercise 2

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "gelu": nn.GELU}


def make_mlp(widths, activation):
    """Linear(w0, w1) -> activation -> Linear(w1, w2) -> ... -> Linear(w[-2], w[-1])."""
    layers = []
    for i, (fan_in, fan_out) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        if i:
            layers.append(ACTIVATIONS[activation]())
        layers.append(nn.Linear(fan_in, fan_out))
    return nn.Sequential(*layers)


def _bytes_reference(batch, widths, activation):
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = make_mlp(widths, activation)
        inputs = torch.randn(batch, widths[0])
    memory = describe(model(inputs).sum()).saved_memory()
    return memory.total - memory.leaf_bytes


def _new_mlp_shape(gen):
    """A batch size, 2 to 5 widths and an activation, all new."""
    batch = int(torch.randint(1, 65, (1,), generator=gen))
    depth = int(torch.randint(2, 6, (1,), generator=gen))
    widths = tuple(int(w) for w in torch.randint(1, 33, (depth,), generator=gen))
    activation = list(ACTIVATIONS)[int(torch.randint(0, len(ACTIVATIONS), (1,), generator=gen))]
    return batch, widths, activation


def _per_hidden(activation):
    """Tensors kept per hidden layer: the activation's output, which the next Linear keeps
    too (one block), or for GELU also its input."""
    return 2 if activation == "gelu" else 1


BYTES_SLIPS = {
    "you counted elements, not bytes: multiply by the element size (4 bytes for float32, "
    "t.element_size())":
        lambda n, w, a: n * (w[0] + _per_hidden(a) * sum(w[1:-1])),
    "the input batch is missing: it needs no gradient, but the first layer keeps it, "
    "because its weight's gradient is built from it":
        lambda n, w, a: 4 * n * _per_hidden(a) * sum(w[1:-1]),
    "each hidden layer is counted twice: the activation's output and the next layer's input "
    "(mat1) are one tensor, kept once (GELU is different: it keeps its input as well)":
        lambda n, w, a: 4 * n * (w[0] + 2 * sum(w[1:-1])),
    "GELU's input is missing: ReLU, tanh and sigmoid keep their output, which the next "
    "layer keeps anyway, but GELU keeps its input, a tensor of its own":
        lambda n, w, a: 4 * n * (w[0] + sum(w[1:-1])),
    "the network's output is counted: nothing keeps it (the sum after it saves no tensor)":
        lambda n, w, a: 4 * n * (w[0] + _per_hidden(a) * sum(w[1:-1]) + w[-1]),
    "the bytes are for one example: multiply by the batch size":
        lambda n, w, a: 4 * (w[0] + _per_hidden(a) * sum(w[1:-1])),
    "the weights are counted: they are leaves, in memory anyway, and saved_memory() keeps "
    "them apart (leaf_bytes)":
        lambda n, w, a: 4 * (n * (w[0] + _per_hidden(a) * sum(w[1:-1]))
                             + sum(p * q for p, q in zip(w[1:-1], w[2:], strict=True))),
}

BYTES_ADVICE = (
    "A byte count, not a derivative: list the tensors the graph keeps for a two-layer "
    "network (bl.describe(model(x).sum()) shows each node's saved tensors), note their "
    "shapes, and count each block of memory once, 4 bytes per float32 number."
)

# --------------------------------------------------------------------------- Exercise 3

HOOKED = "checkpoint_by_hooks"


def _first_error(err: Exception) -> str:
    return f"raised {type(err).__name__}: {str(err).splitlines()[0]}"


def hooked_case(gen: torch.Generator, dropout: bool) -> tuple[nn.Sequential, torch.Tensor]:
    """A new block (float64, two activations, a dropout layer when asked) and its input."""
    width, hidden, batch, seed = (int(torch.randint(low, high, (1,), generator=gen))
                                  for low, high in ((3, 7), (6, 13), (4, 9), (0, 2**31)))
    first, second = ([nn.Tanh, nn.Sigmoid, nn.GELU, nn.ReLU][int(i)]
                     for i in torch.randperm(4, generator=gen)[:2])
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        layers = [nn.Linear(width, hidden), first(), *([nn.Dropout(0.3)] if dropout else []),
                  nn.Linear(hidden, hidden), second(), nn.Linear(hidden, width)]
        block = nn.Sequential(*layers).double()
    return block, torch.randn(batch, width, generator=gen, dtype=torch.float64)


class _Watch:
    """What the check sees of a block: its runs (the grad mode of each), and, while armed,
    weak references to the storage of each tensor its layers but the last make."""

    def __init__(self, block: nn.Sequential) -> None:
        self.runs, self.made, self.values, self.armed = [], [], [], False
        self.handles = [block[0].register_forward_pre_hook(
            lambda module, args: self.runs.append(torch.is_grad_enabled()))]
        self.handles += [layer.register_forward_hook(self._made) for layer in list(block)[:-1]]

    def _made(self, module, args, out) -> None:
        if self.armed:
            self.made.append(weakref.ref(out.untyped_storage()))
            self.values.append(out.detach().clone())

    def kept(self, returned: torch.Tensor, copies_too: bool) -> int:
        """How many tensors made inside the block are still in memory, or (``copies_too``:
        a slower look through every live object) copies of them, the output aside."""
        alive = sum(ref() is not None for ref in self.made)
        if alive:  # perhaps only a cycle of garbage holds them: collect it and look again
            gc.collect()
            alive = sum(ref() is not None for ref in self.made)
        if alive or not copies_too:
            return alive
        mine = {id(v) for v in self.values} | {id(returned)}
        return sum(type(obj) is torch.Tensor and id(obj) not in mine and not obj.requires_grad
                   and any(obj.shape == v.shape and obj.dtype == v.dtype and torch.equal(obj, v)
                           for v in self.values) for obj in gc.get_objects())


def _torch_checkpoint_used(run):
    """``run()``'s result, and whether torch.utils.checkpoint did the work (either variant)."""
    import torch.utils.checkpoint as torch_checkpoint

    used, places = [], [(torch_checkpoint, "_checkpoint_without_reentrant_generator"),
                        (torch_checkpoint.CheckpointFunction, "apply")]
    own = [vars(owner).get(name) for owner, name in places]  # None: inherited
    for owner, name in places:
        original = getattr(owner, name)
        setattr(owner, name, lambda *a, original=original, **k: used.append(1) or original(*a, **k))
    try:
        return run(), bool(used)
    finally:
        for (owner, name), value in zip(places, own, strict=True):
            if value is None:
                delattr(owner, name)
            else:
                setattr(owner, name, value)


def _plain_run(block, x, wants_grad, upstream, seed):
    """The block run plainly: its output, and the gradients of (out * upstream).sum()."""
    leaf = x.clone().requires_grad_(wants_grad)
    torch.manual_seed(seed)
    out = block(leaf * 1.0 if wants_grad else leaf)
    block.zero_grad()
    (out * upstream).sum().backward()
    return out.detach(), [p.grad.clone() for p in block.parameters()] + [leaf.grad]


def _check_hooked(answer, seed):
    if not callable(answer):
        return _fail(HOOKED, f"expected a function (block, x) -> output, got "
                             f"{type(answer).__name__}")
    gen = torch.Generator().manual_seed(seed + 12)
    passed_trials = []
    for dropout, wants_grad in ((False, False), (False, True), (True, False), (True, True)):
        block, x = hooked_case(gen, dropout)
        upstream = torch.randn(x.shape, generator=gen, dtype=torch.float64)
        run_seed = int(torch.randint(0, 2**31, (1,), generator=gen))
        where = (f"on a new block ({', '.join(type(m).__name__ for m in block)}), "
                 f"{'an input that requires grad' if wants_grad else 'an input of data'}")
        with torch.random.fork_rng():  # the learner's random state stays as it was
            want = _plain_run(block, x, wants_grad, upstream, run_seed)
            watch = _Watch(block)
            try:
                report = _run_hooked(answer, block, x, wants_grad, upstream, run_seed, want,
                                     watch, passed_trials)
            finally:
                for handle in watch.handles:
                    handle.remove()
        if report is not None:
            return _fail(HOOKED, f"{where}: {report}") if isinstance(report, str) else report
        passed_trials.append((dropout, wants_grad))
    return passed(HOOKED, "on 4 new blocks (dropout in two, an input that requires grad in "
                          "two): nothing made inside the block kept between forward and "
                          "backward, the block run once more in backward, the plain block's "
                          "gradients")


ORDER = ("Each unpack must return the tensor its own pack received, recomputed: the "
         "recomputation saves what the forward pass saved, in the same order (the same input, "
         "requiring grad as it did, in grad mode), and backward unpacks in its own order")


def _run_hooked(answer, block, x, wants_grad, upstream, run_seed, want, watch, passed_trials):
    """One trial: None when it passes, else a failed report or what went wrong, in words."""
    (want_out, want_grads), dropout = want, any(isinstance(m, nn.Dropout) for m in block)
    leaf = x.clone().requires_grad_(wants_grad)
    torch.manual_seed(run_seed)
    watch.armed = True
    (out, failure), used = _torch_checkpoint_used(
        lambda: attempt(HOOKED, answer, block, leaf * 1.0 if wants_grad else leaf,
                        what="checkpoint_by_hooks", raised=_first_error))
    watch.armed = False
    if used:
        return "torch.utils.checkpoint did the work: build it from saved_tensors_hooks instead"
    if failure is not None:
        return failure
    if not isinstance(out, torch.Tensor) or out.shape != want_out.shape:
        return f"returned {type(out).__name__}; expected the block's output, block(x)"
    if len(watch.runs) != 1:
        return f"the block ran {len(watch.runs)} times in the forward pass; once is enough"
    if not torch.equal(out.detach(), want_out):
        return "the output differs from block(x) run plainly"
    kept = watch.kept(out, copies_too=not passed_trials)
    if kept:
        return (f"{kept} of the {len(watch.made)} tensors the block's layers made are still "
                "in memory (or copies of them) between the forward and the backward pass. "
                "pack must not keep what it receives, nor a copy: return a small stand-in, "
                "such as the tensor's position among the saves")
    watch.runs.clear()
    block.zero_grad()
    try:
        (out * upstream).sum().backward()
    except Exception as err:
        if watch.runs and not any(watch.runs):
            return (f"backward failed ({_first_error(err)}), and the block was recomputed "
                    "with grad mode off, so its operations saved nothing: backward runs with "
                    "grad mode off. Recompute under torch.enable_grad()")
        if wants_grad and (dropout, False) in passed_trials:
            return (f"backward {_first_error(err)}, where the same kind of block with an input "
                    "of data passed. With x requiring grad the forward pass saved more (the "
                    "first Linear keeps its weight, to send a gradient to x): the recomputed "
                    "input must require grad as x does, or the saves no longer line up")
        return f"backward {_first_error(err)}. {ORDER}"
    if len(watch.runs) != 1:
        return (f"the block ran {len(watch.runs)} times during backward; it must run exactly "
                "once: recompute on the first unpack, and hand every later unpack its tensor "
                "from that run")
    got = [p.grad for p in block.parameters()] + [leaf.grad]
    if all((g is None and w is None) or (g is not None and w is not None and torch.allclose(
            g, w, rtol=1e-12, atol=1e-15)) for g, w in zip(got, want_grads, strict=True)):
        return None
    if dropout and (False, wants_grad) in passed_trials:
        return ("the gradients differ from the plain block's, and this block draws a dropout "
                "mask where the block without one passed: the recomputation drew a new mask. "
                "Save the random state before the forward pass (torch.get_rng_state()) and "
                "restore it for the recomputation, as preserve_rng_state does (section 3)")
    return f"the gradients differ from the plain block's. {ORDER}"


# --------------------------------------------------------------------------- Exercise 4


def cheap_block(width, depth):
    """Memory-hungry but cheap: a Linear, then 2 * depth element-wise functions that each
    keep their output, then a Linear."""
    layers = [nn.Linear(width, width)]
    for _ in range(depth):
        layers += [nn.Tanh(), nn.Sigmoid()]
    return nn.Sequential(*layers, nn.Linear(width, width))


def wide_block(width, hidden):
    """Costly to recompute: two big matrix products, one kept tensor in between."""
    return nn.Sequential(nn.Linear(width, hidden), nn.Tanh(), nn.Linear(hidden, width))


def multiply_adds(block):
    """Multiply-adds per example of one forward pass of a block (its Linear layers)."""
    return sum(m.in_features * m.out_features for m in block.modules()
               if isinstance(m, nn.Linear))


def uneven_stack(seed, width=64):
    """Eight blocks of two kinds in a new order, with a new batch (the input needs no grad)."""
    gen = torch.Generator().manual_seed(seed)
    depth = int(torch.randint(1, 4, (1,), generator=gen))
    hidden = 128 * int(torch.randint(1, 4, (1,), generator=gen))
    n_cheap = int(torch.randint(2, 6, (1,), generator=gen))
    order = torch.randperm(8, generator=gen).tolist()
    with torch.random.fork_rng():
        torch.manual_seed(seed)
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


def _check_checkpoint(answer, seed):
    name = "choose_checkpoints"
    if not callable(answer):
        return _fail(name, f"expected a function (blocks, x) -> block indices, got "
                           f"{type(answer).__name__}")
    blocks, x = uneven_stack(seed + 17)
    chosen, failure = attempt(name, answer, blocks, x.clone(), what="it", raised=_first_error)
    if failure is not None:
        return failure
    try:
        chosen = sorted(set(chosen))
    except TypeError:
        return _fail(name, f"expected a set or list of block indices, got "
                           f"{type(chosen).__name__}")
    if not all(isinstance(i, int) and 0 <= i < len(blocks) for i in chosen):
        return _fail(name, f"expected indices between 0 and {len(blocks) - 1}, got {chosen}")

    plain_out, plain = kept_bytes(blocks, lambda: run_stack(blocks, x, set()))
    blocks.zero_grad()
    plain_out.sum().backward()
    plain_grads = [p.grad.clone() for p in blocks.parameters()]
    saves = [plain - kept_bytes(blocks, lambda i=i: run_stack(blocks, x, {i}))[1]
             for i in range(len(blocks))]
    costs = [multiply_adds(b) for b in blocks]

    calls = [0] * len(blocks)
    hooks = [b.register_forward_pre_hook(
        lambda module, args, i=i: calls.__setitem__(i, calls[i] + 1))
        for i, b in enumerate(blocks)]
    try:
        out, kept = kept_bytes(blocks, lambda: run_stack(blocks, x, set(chosen)))
        calls[:] = [0] * len(blocks)  # count only what backward runs again
        blocks.zero_grad()
        out.sum().backward()
    finally:
        for hook in hooks:
            hook.remove()
    recomputed = [i for i, c in enumerate(calls) if c]
    cost = sum(calls[i] * costs[i] for i in recomputed)
    for p, g in zip(blocks.parameters(), plain_grads, strict=True):
        if not torch.equal(p.grad, g):  # not the learner's doing: the check runs the stack
            return _fail(name, "gradients changed under checkpointing")

    budget = plain * BUDGET_PERCENT // 100
    best = min((sum(costs[i] for i in c), c) for r in range(len(blocks) + 1)
               for c in itertools.combinations(range(len(blocks)), r)
               if plain - sum(saves[i] for i in c) <= budget)
    if kept > budget:
        return _fail(name, f"with blocks {chosen} checkpointed, {kept:,} bytes are kept, over "
                           f"the budget of {budget:,} ({BUDGET_PERCENT} % of the plain {plain:,}): "
                           "checkpoint more blocks")
    if cost > best[0]:
        worst = max(chosen, key=lambda i: costs[i] / max(saves[i], 1))
        better = [i for i in range(len(blocks)) if i not in chosen
                  and costs[i] / max(saves[i], 1) < costs[worst] / max(saves[worst], 1)]
        hint = (f" You checkpoint block {worst} ({saves[worst]:,} bytes for {costs[worst]:,} "
                f"multiply-adds) but not block {better[0]} ({saves[better[0]]:,} bytes for "
                f"{costs[better[0]]:,})." if better else "")
        return _fail(name, f"within the budget, but backward recomputes {cost:,} multiply-adds "
                           f"per example where {best[0]:,} would do.{hint} Checkpoint the blocks "
                           "that keep the most bytes per multiply-add first, and stop once "
                           "the budget is met")
    return passed(name, f"{kept:,} of {plain:,} bytes kept (budget {budget:,}); backward "
                         f"recomputed {len(recomputed)} blocks, {cost:,} multiply-adds per "
                         "example, the least any choice within the budget needs")


# --------------------------------------------------------------------------- Exercise 5


def loop_gradient(W, xs, k=None, detach_after=False):
    """dL/dW for h_t = tanh(W h_{t-1} + x_t) from h = 0, L = sum over t of (h_t ** 2).sum(),
    the state detached every k steps (k None: full BPTT)."""
    W = W.detach().clone().requires_grad_()
    h = torch.zeros(W.shape[0], dtype=W.dtype)
    loss = 0
    for t in range(len(xs)):
        if k and not detach_after and t % k == 0:
            h = h.detach()
        h = torch.tanh(W @ h + xs[t])
        if k and detach_after and t % k == 0:
            h = h.detach()
        loss = loss + (h**2).sum()
    (grad,) = torch.autograd.grad(loss, W)
    return grad


def _relative(a, b):
    return ((a - b).norm() / b.norm()).item()


def new_loop(gen, units=None, steps=None):
    """A recurrent weight with spectral radius 0.8 and an input sequence."""
    units = units or int(torch.randint(3, 9, (1,), generator=gen))
    steps = steps or int(torch.randint(30, 81, (1,), generator=gen))
    W = torch.randn(units, units, generator=gen, dtype=torch.float64)
    W = 0.8 * W / torch.linalg.eigvals(W).abs().max()
    xs = 0.5 * torch.randn(steps, units, generator=gen, dtype=torch.float64)
    return W, xs


def _check_tbptt(answer, seed):
    name = "truncation_error"
    if not callable(answer):
        return _fail(name, f"expected a function (W, xs, k) -> a number, got "
                           f"{type(answer).__name__}")
    gen = torch.Generator().manual_seed(seed + 18)
    for _ in range(3):
        W, xs = new_loop(gen)
        k = int(torch.randint(2, len(xs) // 2, (1,), generator=gen))
        got, failure = attempt(name, answer, W.clone(), xs.clone(), k, what="it",
                               raised=_first_error)
        if failure is not None:
            return failure
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.item()
        if not isinstance(got, (int, float)) or isinstance(got, bool):
            return _fail(name, f"expected one number, the relative error, got "
                               f"{type(got).__name__}")
        full, cut = loop_gradient(W, xs), loop_gradient(W, xs, k)
        want = _relative(cut, full)
        if math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-15):
            continue
        slips = {
            "0: the truncated gradient came out equal to the full one, so the state was never "
            "detached (the loss is the same either way: only the gradient changes)": 0.0,
            "the error of detaching at every step (k = 1): detach only when t % k == 0":
                _relative(loop_gradient(W, xs, 1), full),
            "the error of a loop that detaches after the update instead of before it: the "
            "chunks start one step late": _relative(loop_gradient(W, xs, k, True), full),
            "the absolute error ‖g_k - g‖: divide by the full gradient's norm ‖g‖":
                (cut - full).norm().item(),
            "divided by the truncated gradient's norm: the error is relative to the full "
            "gradient, ‖g_k - g‖ / ‖g‖": ((cut - full).norm() / cut.norm()).item(),
        }
        for slip, value in slips.items():
            if math.isclose(got, value, rel_tol=1e-9, abs_tol=1e-15):
                return _fail(name, f"on a new loop ({W.shape[0]} units, {len(xs)} steps, "
                                   f"k = {k}) your number is {slip}")
        return _fail(name, f"on a new loop ({W.shape[0]} units, {len(xs)} steps, k = {k}): "
                           f"yours {got:.6g}, expected {want:.6g}. Run the loop twice from "
                           "h = 0, once as it is and once with h = h.detach() before the update "
                           "whenever t % k == 0, take dL/dW from each, and return "
                           "‖g_k - g‖ / ‖g‖")
    W, xs = new_loop(torch.Generator().manual_seed(15), units=8, steps=400)
    measured = {k: answer(W.clone(), xs.clone(), k) for k in (10, 100)}
    return passed(name, "matches on 3 new loops. On a loop of 8 units and 400 steps it "
                         f"measures {measured[10]:.4f} for k = 10 and {measured[100]:.4f} "
                         "for k = 100")


BYTES = ByHand(
    name="bytes kept for backward",
    reference=_bytes_reference,
    make_inputs=_new_mlp_shape,
    mistakes=BYTES_SLIPS,
    advice=BYTES_ADVICE,
)


def _check_bytes(answer, seed):
    """`check_by_hand` on the formula, in the words of a byte count: it is compared with
    what saved_memory() measures, not with autograd."""
    report = BYTES.check(answer, seed)
    words = {
        "matches autograd on 3 new random inputs":
            "matches what saved_memory() measures on 3 new networks (batch sizes, widths, "
            "activations)",
        "compute the gradient from the arguments": "compute the count from the arguments",
        "this exercise asks for the gradient by hand": "this exercise asks for a formula",
        "Work the chain rule out and compute the gradient with plain tensor operations.":
            "Work out what each node keeps and count it with plain arithmetic.",
    }
    checks = []
    for c in report.checks:
        message = c.message
        for old, new in words.items():
            message = message.replace(old, new)
        checks.append(Check(c.name, c.ok, c.verdict, message, c.diagnosis))
    return Report(tuple(checks))


EXERCISES = {
    "l12-bytes-formula": Method(check=_check_bytes),
    "l12-checkpoint-by-hooks": Method(check=_check_hooked),
    "l12-checkpoint": Method(check=_check_checkpoint),
    "l12-tbptt": Method(check=_check_tbptt),
}

# --------------------------------------------------------------------------- predictions


def _recompute_answer():
    """How often the first of eight checkpointed blocks runs in one forward and backward."""
    with torch.random.fork_rng():
        torch.manual_seed(3)
        blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh())
            for _ in range(8))
        data = torch.randn(64, 256)
    calls = []
    hook = blocks[0].register_forward_pre_hook(lambda module, args: calls.append(1))
    try:
        run_stack(blocks, data, set(range(8))).sum().backward()
    finally:
        hook.remove()
    return len(calls)


def _sigmoid_answer():
    gen = torch.Generator().manual_seed(0)
    x_big = torch.randn(10_000, generator=gen).requires_grad_()
    kept = {}
    for name, fn in (("sigmoid", torch.sigmoid), ("formula", lambda t: 1 / (1 + torch.exp(-t)))):
        memory = describe(fn(x_big).sum()).saved_memory()
        kept[name] = memory.total - memory.leaf_bytes
    return max(kept, key=kept.get)


PREDICTIONS = {
    "l12-predict-recompute": Prediction(
        question="how many times the first checkpointed block runs in one forward and backward",
        answer=_recompute_answer,
        hint="a checkpointed block keeps nothing inside it during the forward pass; what must "
             "backward do when it reaches that block and needs the tensors it did not keep?",
        why="once in the forward pass, and once more in backward to rebuild the tensors it "
            "did not keep: {answer}",
    ),
    "l12-predict-sigmoid": Prediction(
        question="which keeps more for backward",
        answer=_sigmoid_answer,
        hint="one node per operation, and each keeps what its own derivative needs: how many "
             "nodes does each version make, and what does each of them keep?",
        why="sigmoid is one node and keeps only its output (40,000 bytes for 10,000 float32 "
            "numbers); the formula's exp and its reciprocal each keep a result of their own "
            "(80,008 bytes): the {answer} keeps more",
        choices=("sigmoid", "formula"),
    ),
}
