"""Lesson 03, build your own autograd: its exercises and its predictions.

Both exercises are about the learner's own engine, so their check cells hand
over the engine's pieces along with the answer:

- Exercise 1 (``l03-sigmoid``) passes ``(sigmoid, Value, backward)``. The
  check builds ``s * u + s`` with ``s = sigmoid(u)``, ``u = x * w + b`` from new
  random numbers, runs the lesson's ``backward`` on it and compares the three
  leaf gradients with torch's. The sigmoid rule runs with autograd switched
  off (`check_by_hand`), and each slip below is named only when the learner's
  gradients equal it on every trial.
- Exercise 2 (``l03-topo``) passes the learner's ``my_topo_order``. The check
  watches every Python call it makes (``sys.setprofile``): a function running
  inside itself is recursion, whatever the recursion limit, and a call of the
  lesson's own ``topo_order`` (or a copy of its code) is not another way of
  sorting. Then it checks the order on new random graphs and on a chain
  10,000 operations deep.
"""

from __future__ import annotations

import math
import sys

import torch

from ... import data
from ._spec import Method, Prediction, Report, attempt, check_by_hand, failed, passed

# --------------------------------------------------------------------------- Exercise 1


def _sigmoid_inputs(gen):
    """x, w and b: three new random numbers."""
    return tuple(torch.randn((), generator=gen, dtype=torch.float64) for _ in range(3))


def _sigmoid_reference(x, w, b):
    """torch's gradients of s * u + s, s = sigmoid(u), u = x * w + b."""
    leaves = [t.requires_grad_() for t in (x, w, b)]
    u = x * w + b
    s = torch.sigmoid(u)
    return torch.stack(torch.autograd.grad(s * u + s, leaves))


def _slip(du_of):
    """The leaf gradients when d(s*u + s)/du comes out as ``du_of(s, u)`` instead."""

    def wrong(x, w, b):
        u = x * w + b
        du = du_of(torch.sigmoid(u), u)
        return torch.stack([du * w, du * x, du])

    return wrong


# The product s * u reaches u directly (factor s); the rest reaches u through the
# sigmoid, whose output gets the gradient u + 1 (u from the product, 1 from the sum).
SIGMOID_SLIPS = {
    "the rule sets a.grad with = instead of adding with +=, so the product's direct path "
    "to u is overwritten":
        _slip(lambda s, u: s * (1 - s) * (u + 1)),
    "the sign is flipped: the rule subtracts from a.grad (-=) where it should add":
        _slip(lambda s, u: s - s * (1 - s) * (u + 1)),
    "the rule leaves out out.grad: it must multiply the local derivative by the gradient "
    "that reached the sigmoid's output (here u + 1, not 1)":
        _slip(lambda s, u: s + s * (1 - s)),
    "the local derivative is written with the input a.data where the output belongs: "
    "σ'(a) = σ(a)(1 - σ(a)), so use out.data":
        _slip(lambda s, u: s + u * (1 - u) * (u + 1)),
    "u gets nothing through the sigmoid: its rule is missing or never runs (does the new "
    "Value list a among its parents, and is the rule stored in out.backward_rule?)":
        _slip(lambda s, u: s),
    "the local derivative is written as σ(a) alone: σ'(a) = σ(a)(1 - σ(a))":
        _slip(lambda s, u: s + s * (u + 1)),
    "the local derivative is tanh's, 1 - out.data**2: the sigmoid's is out.data * "
    "(1 - out.data)":
        _slip(lambda s, u: s + (1 - s**2) * (u + 1)),
}

SIGMOID_ADVICE = (
    "Write σ'(a) with the output, as tanh's rule does: σ'(a) = σ(a)(1 - σ(a)). The rule "
    "then adds that local derivative times out.grad into a.grad."
)


def _unpack(answer, names):
    """The pieces a check cell hands over, or a failed Report saying what was expected."""
    if not (isinstance(answer, tuple) and len(answer) == len(names)):
        return None, failed("check", f"expected the tuple ({', '.join(names)}) from the check "
                                   "cell; run the check cell as it is")
    return answer, None


def _check_sigmoid(answer, seed):
    pieces, unpacked = _unpack(answer, ("sigmoid", "Value", "backward"))
    if unpacked:
        return unpacked
    sigmoid, value_class, backward = pieces
    name = "sigmoid in s*u + s"
    if not callable(sigmoid):
        return failed(name, f"sigmoid is {type(sigmoid).__name__}, not a "
                                                  "function of one Value")
    gen = torch.Generator().manual_seed(seed)
    for a in (torch.randn(3, generator=gen, dtype=torch.float64) * 2).tolist():
        out, failure = attempt(name, lambda a=a: sigmoid(value_class(a)), what="sigmoid",
                               raised=lambda err, a=a: f"sigmoid(Value({a:.4f})) raised "
                               f"{type(err).__name__}: {err}")
        if failure is not None:
            return failure
        if not isinstance(out, value_class):
            return failed(name, f"sigmoid(Value({a:.4f})) returned {type(out).__name__}; it "
                                 "must return a new Value, so that backward can reach a "
                                 "through it")
        want = 1 / (1 + math.exp(-a))
        if not abs(out.data - want) <= 1e-12 * max(1.0, abs(want)):
            return failed(name, f"sigmoid(Value({a:.4f})).data is {out.data:.6g}, but "
                                 f"σ({a:.4f}) = 1 / (1 + e^-a) = {want:.6g}: the forward "
                                 "value is wrong")

    def engine_grads(x, w, b):
        vx, vw, vb = value_class(x.item()), value_class(w.item()), value_class(b.item())
        u = vx * vw + vb
        s = sigmoid(u)
        backward(s * u + s)
        return torch.tensor([vx.grad, vw.grad, vb.grad], dtype=torch.float64)

    return check_by_hand(engine_grads, _sigmoid_reference, _sigmoid_inputs, name=name,
                         trials=4, seed=seed, entries=("x.grad", "w.grad", "b.grad"),
                         mistakes=SIGMOID_SLIPS, advice=SIGMOID_ADVICE)


# --------------------------------------------------------------------------- Exercise 2


class _Node:
    """A stand-in for the lesson's Value: a sort reads only ``parents``."""

    def __init__(self, data, parents=()):
        self.data = float(data)
        self.grad = 0.0
        self.parents = parents
        self.op = "+" if parents else ""
        self.name = ""

    def __repr__(self):
        return f"Value({self.data:.4g})"


def random_graph(gen, size=60):
    """An output that depends on about ``size`` nodes, many of them used several times."""
    nodes = [_Node(k) for k in range(4)]
    for _ in range(size):
        i, j = (int(k) for k in torch.randint(0, len(nodes), (2,), generator=gen))
        nodes.append(_Node(0.0, (nodes[i], nodes[j])))
    out = nodes[-1]
    for k in torch.randint(0, len(nodes), (5,), generator=gen).tolist():
        out = _Node(0.0, (out, nodes[k]))  # tie more nodes to the output
    return out


def reachable(root):
    """Every node the output depends on, by id (the output included)."""
    found, todo = {id(root): root}, [root]
    while todo:
        for p in todo.pop().parents:
            if id(p) not in found:
                found[id(p)] = p
                todo.append(p)
    return found


# The lesson's own depth-first sort (cell l03-13), compiled here so that a copy of it
# under another name is recognised by its code.
LESSON_SORT = '''
def topo_order(root):
    order, seen = [], set()
    stack = [(root, False)]
    while stack:
        node, parents_done = stack.pop()
        if parents_done:
            order.append(node)  # every parent is already in the order
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append((node, True))
            stack.extend((p, False) for p in node.parents if id(p) not in seen)
    return order
'''
_space: dict = {}
exec(compile(LESSON_SORT, "<lesson 03's topo_order>", "exec"), _space)
LESSON_SORT_CODE = _space["topo_order"].__code__


class CallWatch:
    """Watches the Python calls a function makes, with ``sys.setprofile``.

    Only functions of the learner's notebook are followed (those whose globals are
    the answer's). ``recursive`` is the first one found running inside itself,
    directly or through other functions; ``codes`` is every one that ran. Counting
    frames does not depend on the recursion limit.
    """

    def __init__(self, namespace):
        self.namespace = namespace
        self.running = {}
        self.codes = set()
        self.modules = set()
        self.recursive = None

    def __call__(self, frame, event, arg):
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            if frame.f_globals is not self.namespace:
                self.modules.add(module.split(".")[0])
                return
            code = frame.f_code
            self.codes.add(code)
            self.running[code] = self.running.get(code, 0) + 1
            if self.running[code] > 1 and self.recursive is None:
                self.recursive = code
        elif event == "return" and frame.f_globals is self.namespace:
            code = frame.f_code
            self.running[code] = self.running.get(code, 1) - 1

    def run(self, fn, *args):
        before = sys.getprofile()
        sys.setprofile(self)
        try:
            return fn(*args)
        finally:
            sys.setprofile(before)


def _lesson_sorts(namespace):
    """The lesson's sorts as the notebook defined them: code object -> name."""
    found = {}
    for name in ("topo_order", "topo_recursive"):
        fn = namespace.get(name)
        code = getattr(fn, "__code__", None)
        if code is not None:
            found[code] = name
    return found


def _order_problem(order, root):
    """None when ``order`` is a topological order of every node behind ``root``."""
    if not isinstance(order, (list, tuple)):
        return f"it returned {type(order).__name__}; expected a list of the Values"
    place = {}
    for k, node in enumerate(order):
        if id(node) in place:
            return ("a node appears twice in your order: remember which nodes are placed "
                    "already (a shared node has several users)")
        place[id(node)] = k
    needed = reachable(root)
    if set(place) != set(needed):
        missing = len(set(needed) - set(place))
        extra = len(set(place) - set(needed))
        return (f"your order has {len(place)} nodes; the output depends on {len(needed)} "
                f"({missing} missing, {extra} that are not in the graph): collect every "
                "Value the output depends on, the output included")
    late = [(node, p) for node in order for p in node.parents if place[id(p)] > place[id(node)]]
    if late:
        if all(place[id(p)] > place[id(node)] for node in order for p in node.parents):
            return ("your order is reversed: every node comes before its parents, which is "
                    "the order backward walks. A topological order lists each node after "
                    "the nodes it was computed from")
        return (f"{len(late)} node(s) come before one of their parents: place a node only "
                "once every one of its parents is placed")
    return None


def _topo_error(err: Exception) -> str | Report:
    if isinstance(err, RecursionError):
        return failed("my_topo_order", _RECURSIVE)
    return f"raised {type(err).__name__}: {err} on a random graph"


def _check_topo(answer, seed):
    name = "my_topo_order"
    if not callable(answer):
        return failed(name, f"expected a function of the output Value, got "
                             f"{type(answer).__name__}")
    namespace = getattr(answer, "__globals__", {})
    lesson = _lesson_sorts(namespace)
    gen = torch.Generator().manual_seed(seed)
    graphs = [random_graph(gen, size) for size in (60, 40, 80)]
    for root in graphs:
        watch = CallWatch(namespace)
        order, failure = attempt(name, watch.run, answer, root, what="it", raised=_topo_error)
        if failure is not None:
            return failure
        used = sorted(lesson[c] for c in watch.codes | {getattr(answer, "__code__", None)}
                      if c in lesson)
        copies = [c for c in watch.codes if c.co_code == LESSON_SORT_CODE.co_code]
        if used or copies:
            which = used[0] if used else "topo_order, copied"
            return failed(name, f"it runs the lesson's own sort ({which}): "
                                 "this exercise asks for a second way, Kahn's algorithm, which "
                                 "counts each node's parents instead of searching depth-first")
        if watch.recursive is not None:
            return failed(name, _RECURSIVE.replace(
                "is recursive", f"is recursive ({watch.recursive.co_name} calls itself)", 1))
        if "graphlib" in watch.modules:
            return failed(name, "it hands the graph to graphlib's sorter: write the "
                                 "counting and the placing yourself")
        problem = _order_problem(order, root)
        if problem:
            return failed(name, f"on a random graph: {problem}")

    chain = _Node(0.1)
    for _ in range(10_000):
        chain = _Node(0.0, (chain,))
    try:
        order = answer(chain)
    except RecursionError:
        return failed(name, _RECURSIVE)
    problem = _order_problem(order, chain)
    if problem:
        return failed(name, f"on a chain 10,000 deep: {problem}")
    return passed(name, f"a valid order on {len(graphs)} new random graphs and on a chain "
                         "10,000 operations deep, without recursion")


_RECURSIVE = ("your sort is recursive: a function that calls itself stops at Python's "
              "recursion limit (a chain 10,000 deep needs 10,000 nested calls), however "
              "high that limit is set. Keep a list of ready nodes of your own instead")

EXERCISES = {
    "l03-sigmoid": Method(check=_check_sigmoid),
    "l03-topo": Method(check=_check_topo),
}

# --------------------------------------------------------------------------- predictions


def _paths_answer():
    a = torch.tensor(3.0, requires_grad=True)
    (a * a + a).backward()
    return a.grad.item()


def _xor_final_loss(zero_grad, steps=200, lr=0.2):
    """The lesson's XOR network in torch (float64, the same start), with or without
    zeroing the gradients between steps; the last loss."""
    xs, ys = data.xor_data()
    gen = torch.Generator().manual_seed(1)
    W1 = torch.randn(2, 4, generator=gen, dtype=torch.float64)
    W2 = torch.randn(4, 1, generator=gen, dtype=torch.float64)
    params = [t.requires_grad_() for t in (W1, torch.zeros(4, dtype=torch.float64), W2,
                                           torch.zeros(1, dtype=torch.float64))]
    x64, y64 = xs.double(), ys.double()
    for _ in range(steps):
        W1_t, b1_t, W2_t, b2_t = params
        loss = ((torch.tanh(x64 @ W1_t + b1_t) @ W2_t + b2_t - y64) ** 2).mean()
        if zero_grad:
            for p in params:
                p.grad = None
        loss.backward()
        with torch.no_grad():
            for p in params:
                p -= lr * p.grad
    return loss.item()


def _forgot_answer():
    zeroed, forgot = _xor_final_loss(True), _xor_final_loss(False)
    if forgot > 10 * zeroed:
        return "higher"
    return "lower" if forgot < zeroed / 10 else "about the same"


PREDICTIONS = {
    "l03-predict-paths": Prediction(
        question="a.grad for c = a*a + a at a = 3",
        answer=_paths_answer,
        hint="count every path from c back to a: the product uses a twice, and each of those "
             "uses carries the other factor; the sum adds one more path.",
        why="three paths reach a: two through the product, each carrying the other factor "
            "(3 each), and one straight through the sum (1): 3 + 3 + 1 = {answer}",
    ),
    "l03-predict-forgot": Prediction(
        question="the loss after 200 steps without zero_grad, compared with 0.000276",
        answer=_forgot_answer,
        hint="without zeroing, what does p.grad hold at step 50: the gradient at step 50, or "
             "something else? Think about how big each step becomes, and whether it still "
             "points downhill once the gradients have changed direction.",
        why="each p.grad holds the sum of every gradient so far, so the steps keep growing "
            "and keep pushing the way the early gradients pointed; the loss overshoots and "
            "stalls far above the zeroed run's",
        choices=("lower", "about the same", "higher"),
    ),
}
