"""Lesson 03, build your own autograd: its exercises and its predictions.

The exercises are about the learner's own engine, so their check cells hand
over the engine's pieces along with the answer:

- Exercise 1 (``l03-ops``) passes ``(exp, log, power, Value, backward, tanh)``.
  For each new operation f the check builds ``f(u) * u + f(u)``, ``u = x * w + b``,
  from new random numbers (a new exponent for the power each time), runs the
  lesson's ``backward`` and compares the three leaf gradients with torch's. u
  reaches the output along two paths, so a rule that sets ``a.grad`` with ``=``
  loses one. The rules run with autograd switched off (`check_by_hand`), and
  each slip below is named only when the learner's gradients equal it on every
  trial. Last, tanh is built from the learner's exp and power,
  ``(e - 1) * (e + 1)**-1`` with ``e = exp(2u)``, and must give the gradients
  of the engine's own tanh node.
- Exercise 2 (``l03-softmax-ce``) passes ``(cross_entropy, Value, backward)``:
  a softmax cross-entropy of 3 logits built from those operations. The check
  compares the loss with ``F.cross_entropy`` and the logits' gradients, from
  the engine's backward (autograd refused), with torch's, on new logits and
  targets; the graph behind the loss must hold the learner's exp and log nodes,
  so a rule written for the whole loss is not the engine's backward.
- Exercise 3 (``l03-topo``) passes the learner's ``my_topo_order``. The check
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
import torch.nn.functional as F

from ._spec import (
    ENGINE,
    METHOD,
    Method,
    Prediction,
    Report,
    attempt,
    check_by_hand,
    failed,
    passed,
)

F64 = torch.float64

# --------------------------------------------------------------------------- Exercise 1

_EXPONENTS = (-2.0, -1.0, -0.5, 0.5, 1.5, 2.0, 3.0)


def _op_inputs(gen):
    """x, w, b with u = x * w + b between 0.25 and 2.75 (log and powers need u > 0),
    and a new exponent for the power."""
    x = torch.rand((), generator=gen, dtype=F64) + 0.5
    w = torch.rand((), generator=gen, dtype=F64) + 0.5
    b = torch.rand((), generator=gen, dtype=F64) * 0.5
    k = _EXPONENTS[int(torch.randint(len(_EXPONENTS), (), generator=gen))]
    return x, w, b, k


# Each operation by name: torch's version of it and its local derivative at u (k is the
# exponent, used by power alone).
_OPS = {
    "exp": (lambda t, k: torch.exp(t), lambda u, k: math.exp(u)),
    "log": (lambda t, k: torch.log(t), lambda u, k: 1 / u),
    "power": (lambda t, k: t**k, lambda u, k: k * u ** (k - 1)),
}


def _forward(op, u, k):
    return _OPS[op][0](torch.tensor(u, dtype=F64), k).item()


def _op_reference(op):
    """torch's gradients of f(u) * u + f(u), u = x * w + b."""
    def reference(x, w, b, k):
        leaves = [t.requires_grad_() for t in (x, w, b)]
        u = x * w + b
        fu = _OPS[op][0](u, k)
        return torch.stack(torch.autograd.grad(fu * u + fu, leaves))
    return reference


def _op_slip(op, du_of):
    """The leaf gradients when d(f(u)*u + f(u))/du comes out as ``du_of(u, f(u), f'(u), k)``."""
    def wrong(x, w, b, k):
        u = float(x * w + b)
        du = du_of(u, _forward(op, u, k), _OPS[op][1](u, k), k)
        return torch.tensor([du * float(w), du * float(x), du], dtype=F64)
    return wrong


def _slips(op):
    """The slips any of the three rules can make, then the ones of ``op`` alone."""
    common = {
        "the rule sets a.grad with = instead of adding with +=, so the product's direct "
        "path to u is overwritten (u is used twice here)":
            lambda u, fu, d, k: d * (u + 1),
        "the sign is flipped: the rule subtracts from a.grad (-=) where it should add":
            lambda u, fu, d, k: fu - d * (u + 1),
        "the rule leaves out out.grad: it must multiply the local derivative by the gradient "
        "that reached the operation's output (here u + 1, not 1)":
            lambda u, fu, d, k: fu + d,
        "u gets nothing through the new operation: its rule is missing or never runs (does "
        "the new Value list a among its parents, and is the rule stored in "
        "out.backward_rule?)":
            lambda u, fu, d, k: fu,
    }
    own = {
        "exp": {
            "exp's rule passes out.grad on without exp's derivative: d/da e^a = e^a, which "
            "the node holds as out.data":
                lambda u, fu, d, k: fu + (u + 1),
            "exp's rule uses the input a.data where its derivative e^a belongs (out.data)":
                lambda u, fu, d, k: fu + u * (u + 1),
        },
        "log": {
            "log's rule is missing its local derivative 1/x: d/da log a = 1 / a.data, times "
            "out.grad":
                lambda u, fu, d, k: fu + (u + 1),
            "log's rule divides by out.data (log a); its derivative is 1/a, with the input "
            "a.data":
                lambda u, fu, d, k: fu + (u + 1) / fu,
            "log's rule multiplies by a.data; its derivative is 1 / a.data":
                lambda u, fu, d, k: fu + u * (u + 1),
        },
        "power": {
            "the power rule is off: the exponent was not lowered (k * a**k, or k * out.data); "
            "d/da a**k = k * a**(k - 1)":
                lambda u, fu, d, k: fu + k * u**k * (u + 1),
            "the power rule is off: the factor k is missing; d/da a**k = k * a**(k - 1)":
                lambda u, fu, d, k: fu + u ** (k - 1) * (u + 1),
            "the power rule is off: the exponent was lowered by one in the factor too "
            "((k - 1) * a**(k - 1)); d/da a**k = k * a**(k - 1)":
                lambda u, fu, d, k: fu + (k - 1) * u ** (k - 1) * (u + 1),
        },
    }[op]
    return {text: _op_slip(op, du) for text, du in {**own, **common}.items()}


_OP_ADVICE = {
    "exp": "exp's rule: a.grad += e^a * out.grad, and e^a is out.data.",
    "log": "log's rule: a.grad += (1 / a.data) * out.grad.",
    "power": "power's rule, k a plain number: a.grad += k * a.data**(k - 1) * out.grad.",
}


def _unpack(answer, names):
    """The pieces a check cell hands over, or a failed Report saying what was expected."""
    if not (isinstance(answer, tuple) and len(answer) == len(names)):
        return None, failed("check", f"expected the tuple ({', '.join(names)}) from the check "
                                     "cell; run the check cell as it is")
    return answer, None


def _call_op(fn, op, value_class, a, k):
    return fn(value_class(a), k) if op == "power" else fn(value_class(a))


def _forward_problem(op, fn, value_class, seed):
    """A failed Report when the operation's forward value or result type is wrong."""
    gen = torch.Generator().manual_seed(seed)
    for _ in range(3):
        x, w, b, k = _op_inputs(gen)
        a = float(x * w + b)
        shown = f"{op}(Value({a:.4f}), {k:g})" if op == "power" else f"{op}(Value({a:.4f}))"
        out, failure = attempt(op, lambda a=a, k=k: _call_op(fn, op, value_class, a, k),
                               what=op, raised=lambda err, s=shown: f"{s} raised "
                               f"{type(err).__name__}: {err}")
        if failure is not None:
            return failure
        if not isinstance(out, value_class):
            return failed(op, f"{shown} returned {type(out).__name__}; it must return a new "
                              "Value, so that backward can reach a through it")
        want = _forward(op, a, k)
        if not abs(out.data - want) <= 1e-12 * max(1.0, abs(want)):
            return failed(op, f"{shown}.data is {out.data:.6g}, but it should be {want:.6g}: "
                              "the forward value is wrong")
    return None


def _engine_grads(op, fn, value_class, backward):
    """The leaf gradients the learner's engine gives for f(u) * u + f(u)."""
    def grads(x, w, b, k):
        vx, vw, vb = value_class(x.item()), value_class(w.item()), value_class(b.item())
        u = vx * vw + vb
        fu = fn(u, k) if op == "power" else fn(u)
        backward(fu * u + fu)
        return torch.tensor([vx.grad, vw.grad, vb.grad], dtype=F64)
    return grads


def _tanh_from_pieces(exp, power, value_class, backward, tanh, seed):
    """None when tanh built from the learner's exp and power gives the engine tanh's
    gradients; else the failed Report."""
    name = "tanh from your exp and power"
    gen = torch.Generator().manual_seed(seed + 99)
    for _ in range(3):
        x, w, b = (float(t) for t in torch.randn(3, generator=gen, dtype=F64))
        found = []
        for make in ("pieces", "node"):
            vx, vw, vb = value_class(x), value_class(w), value_class(b)
            u = vx * vw + vb
            if make == "pieces":
                e = exp(2 * u)
                t = (e - 1) * power(e + 1, -1)
            else:
                t = tanh(u)
            backward(t * u + t)
            found.append((t.data, [vx.grad, vw.grad, vb.grad]))
        (t_p, g_p), (t_n, g_n) = found
        gap = max(abs(p - q) for p, q in zip([t_p, *g_p], [t_n, *g_n], strict=True))
        if not gap <= 1e-12:
            return failed(name, f"at u = {x * w + b:.4f}, (e - 1) * power(e + 1, -1) with "
                                f"e = exp(2u) gives tanh {t_p:.6g} and gradients "
                                f"{[round(g, 6) for g in g_p]}, but the engine's tanh node "
                                f"gives {t_n:.6g} and {[round(g, 6) for g in g_n]}")
    return None


def _check_ops(answer, seed):
    pieces, unpacked = _unpack(answer, ("exp", "log", "power", "Value", "backward", "tanh"))
    if unpacked:
        return unpacked
    *ops, value_class, backward, tanh = pieces
    checks = []
    for op, fn in zip(("exp", "log", "power"), ops, strict=True):
        if not callable(fn):
            return failed(op, f"{op} is {type(fn).__name__}, not a function of a Value")
        problem = _forward_problem(op, fn, value_class, seed)
        if problem is not None:
            return problem
        report = check_by_hand(_engine_grads(op, fn, value_class, backward), _op_reference(op),
                               _op_inputs, name=f"{op} in f(u)*u + f(u)", trials=4, seed=seed,
                               entries=("x.grad", "w.grad", "b.grad"), mistakes=_slips(op),
                               advice=_OP_ADVICE[op])
        if not report.ok:
            return report
        checks.extend(report.checks)
    problem = _tanh_from_pieces(ops[0], ops[2], value_class, backward, tanh, seed)
    if problem is not None:
        return problem
    return Report((*checks, *passed("tanh from your exp and power",
                                    "the same value and gradients as the engine's tanh node "
                                    "on 3 new inputs").checks))


# --------------------------------------------------------------------------- Exercise 2


def _ce_inputs(gen):
    """3 new logits and a target class."""
    logits = torch.randn(3, generator=gen, dtype=F64) * 2
    return logits, torch.randint(0, 3, (), generator=gen)


def _ce_reference(logits, target):
    z = logits.requires_grad_()
    (g,) = torch.autograd.grad(F.cross_entropy(z.unsqueeze(0), target.view(1)), z)
    return g


def _ce_slip(grad_of):
    """The logits' gradient under a slip, from p = softmax(z), c = exp(z) and the one-hot y."""
    def wrong(logits, target):
        c = logits.exp()
        p = c / c.sum()
        y = F.one_hot(target, 3).to(F64)
        return grad_of(p, c, y, p[target])
    return wrong


# Slips of the rules, as they show when the loss is -log(c_t * (c_1 + c_2 + c_3)**-1).
CE_SLIPS = {
    "log's rule is missing its local derivative 1/x: its input got out.grad unchanged "
    "(Exercise 1's check names such slips one rule at a time)":
        _ce_slip(lambda p, c, y, pt: pt * (p - y)),
    "the power rule is off: the exponent was not lowered (k * a**k instead of "
    "k * a**(k - 1)), so the sum's path carries e^z where softmax's p belongs":
        _ce_slip(lambda p, c, y, pt: c - y),
    "the power rule is off: the factor k (here -1) is missing, so the sum's path has the "
    "wrong sign":
        _ce_slip(lambda p, c, y, pt: -p - y),
    "only the direct path to the target's logit is there: the normalising sum also "
    "depends on every logit, and its path must be part of the graph":
        _ce_slip(lambda p, c, y, pt: -y),
}

CE_ADVICE = ("The loss is -log(e^z_t / (e^z_1 + e^z_2 + e^z_3)), every piece made with your "
             "exp, log and power (or the engine's + and *). If Exercise 1's check fails, "
             "fix that first.")


def _rules_in(root):
    """How many nodes behind ``root`` have a rule made by an exp and by a log function
    (told by the name of the function that defined the rule: exp, log, my_log, ...)."""
    seen, todo, exps, logs = {id(root)}, [root], 0, 0
    while todo:
        node = todo.pop()
        rule = getattr(node, "backward_rule", None)
        maker = getattr(rule, "__qualname__", "").split(".<locals>")[0].lower()
        exps += "exp" in maker
        logs += "log" in maker
        for p in getattr(node, "parents", ()):
            if id(p) not in seen:
                seen.add(id(p))
                todo.append(p)
    return exps, logs


def _ce_forward_problem(cross_entropy, value_class, seed):
    name = "cross_entropy"
    gen = torch.Generator().manual_seed(seed + 7)
    for _ in range(3):
        logits, target = _ce_inputs(gen)
        zs, t = logits.tolist(), int(target)
        shown = f"cross_entropy({[round(z, 3) for z in zs]}, {t})"
        leaves = [value_class(z) for z in zs]
        out, failure = attempt(name, cross_entropy, leaves, t,
                               what="cross_entropy (or an operation it calls)",
                               raised=lambda err, s=shown: f"{s} raised "
                               f"{type(err).__name__}: {err}")
        if failure is not None:
            return failure
        if not isinstance(out, value_class):
            return failed(name, f"{shown} returned {type(out).__name__}; it must return the "
                                "loss as a Value, so that backward can start from it")
        want = F.cross_entropy(logits.unsqueeze(0), target.view(1)).item()
        if abs(out.data - want) <= 1e-12 * max(1.0, abs(want)):
            exps, logs = _rules_in(out)
            if not (exps and logs):
                return failed(name, "the loss must be built from your operations: its graph "
                                    f"holds {exps} exp node(s) and {logs} log node(s), where "
                                    "e^z of the logits and a log are needed. A rule written "
                                    "for the whole loss is not the engine's backward through "
                                    "your ops")
            continue
        told = {-want: "the sign is flipped: cross-entropy is MINUS the log-probability of "
                       "the target",
                -zs[t]: "the softmax's normalising sum is missing: log(e^z_t) is just z_t; "
                        "divide by the sum of e^z over the 3 logits first",
                math.exp(-want): "the log is missing: that is the target's probability",
                -math.exp(-want): "the log is missing: that is minus the target's "
                                  "probability"}
        why = next((text for v, text in told.items()
                    if abs(out.data - v) <= 1e-12 * max(1.0, abs(v))), "")
        return failed(name, f"{shown}.data is {out.data:.6g}, but torch's F.cross_entropy "
                            f"gives {want:.6g}: the loss value is wrong" + (f"; {why}" if why
                                                                          else ""))
    return None


def _check_ce(answer, seed):
    pieces, unpacked = _unpack(answer, ("cross_entropy", "Value", "backward"))
    if unpacked:
        return unpacked
    cross_entropy, value_class, backward = pieces
    if not callable(cross_entropy):
        return failed("cross_entropy", f"cross_entropy is {type(cross_entropy).__name__}, "
                                       "not a function of 3 logits and a target")
    problem = _ce_forward_problem(cross_entropy, value_class, seed)
    if problem is not None:
        return problem

    def engine_grads(logits, target):
        leaves = [value_class(z) for z in logits.tolist()]
        backward(cross_entropy(leaves, int(target)))
        return torch.tensor([v.grad for v in leaves], dtype=F64)

    return check_by_hand(engine_grads, _ce_reference, _ce_inputs,
                         name="dloss/dlogits through your engine", trials=4, seed=seed,
                         entries=("z_1.grad", "z_2.grad", "z_3.grad"), mistakes=CE_SLIPS,
                         advice=CE_ADVICE)


# --------------------------------------------------------------------------- Exercise 3


class _Node:
    """A stand-in for the lesson's Value: a sort reads only ``parents``."""

    def __init__(self, data, parents=()):
        self.data = float(data)
        self.grad = 0.0
        self.parents = parents

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
    codes = {name: getattr(namespace.get(name), "__code__", None)
             for name in ("topo_order", "topo_recursive")}
    return {code: name for name, code in codes.items() if code is not None}


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
    # The engine is the exercise: its classes may overload arithmetic.
    "l03-ops": Method(check=_check_ops, vocabulary=ENGINE),
    "l03-softmax-ce": Method(check=_check_ce, vocabulary=ENGINE),
    # Raising the recursion limit is a fair try; the check says why it cannot be enough.
    "l03-topo": Method(check=_check_topo, vocabulary=METHOD.allowing(
        "sys.setrecursionlimit", "sys.getrecursionlimit")),
}

# --------------------------------------------------------------------------- predictions


def _paths_answer():
    a = torch.tensor(3.0, requires_grad=True)
    (a * a + a).backward()
    return a.grad.item()


PREDICTIONS = {
    "l03-predict-paths": Prediction(
        question="a.grad for c = a*a + a at a = 3",
        answer=_paths_answer,
        hint="count every path from c back to a: the product uses a twice, and each of those "
             "uses carries the other factor; the sum adds one more path.",
        why="three paths reach a: two through the product, each carrying the other factor "
            "(3 each), and one straight through the sum (1): 3 + 3 + 1 = {answer}",
    ),
}
