"""Lesson 20, a tensor engine of your own: its exercises and its prediction.

The exercises are about the learner's engine, so their check cells hand over the
engine's pieces with the answer, as lesson 03's do:

- Exercise 1 (``l20-matmul``) passes ``(broadcast_matmul, Tensor, backward)``: a
  matrix product for every pair of shapes ``torch.matmul`` takes. The check runs
  one trial per kind of shape (a size-1 batch dimension, batch dimensions missing
  in front, a 1-D operand on either side, two vectors to a scalar, size-1
  dimensions on both sides), with new sizes each time: the forward value must be
  torch's, then the lesson's ``backward`` runs from ``(out * G).sum()`` with autograd
  refused (`check_by_hand`), and the two leaves' gradients must be torch's. Each
  slip is named only when it holds on every trial.
- Exercise 2 (``l20-backward``) passes ``(backward_by_counting, Tensor)``. The check
  builds graphs with the lesson's operations (a tensor used several times, a random
  graph of many paths, a chain 5,000 operations deep), replaces every node's rule
  by one that records when it runs and what it is given, runs the learner's
  backward and compares every leaf's gradient with torch's. The records name the
  slips: a rule run twice, a rule run before every gradient for its node arrived,
  a gradient replaced where it should be added, a leaf that keeps one of its
  gradients. Python's calls are watched as in lesson 03's sort exercise: recursion
  and the lesson's own ``backward`` or ``topo_order`` are refused.
- Exercise 3 (``l20-amax``) passes ``(amax, Tensor, backward)``: the largest entry
  along a dimension, as one node. Inputs are small integers, so ties are common;
  torch's ``amax`` splits the gradient evenly between the tied entries.
"""

from __future__ import annotations

import torch

from ._spec import ENGINE, Method, Prediction, attempt, check_by_hand, failed, passed
from .lesson03 import LESSON_SORT_CODE, CallWatch

F64 = torch.float64


def _unpack(answer, names):
    """The pieces a check cell hands over, or a failed Report saying what was expected."""
    if not (isinstance(answer, tuple) and len(answer) == len(names)):
        return None, failed("check", f"expected the tuple ({', '.join(names)}) from the check "
                                     "cell; run the check cell as it is")
    return answer, None


def _trial(gen, kinds):
    """Which kind of input this trial is: trials run on seeds seed, seed + 1, ..., so
    every kind is met once in ``kinds`` trials, whatever the seed."""
    return gen.initial_seed() % kinds


def _size(gen, low=2, high=5):
    return int(torch.randint(low, high, (), generator=gen))


def _shape_text(shape):
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


# --------------------------------------------------------------------------- Exercise 1


def _matmul_shapes(gen):
    """The shapes of a, b for one trial: each kind of broadcasting once over 6 trials."""
    b1, b2, m, k, n = (_size(gen) for _ in range(5))
    return [
        ((b1, 1, m, k), (b2, k, n)),      # a size-1 dimension; b lacks one in front
        ((m, k), (b1, b2, k, n)),         # a lacks two batch dimensions
        ((k,), (b1, k, n)),               # a vector times a stack of matrices
        ((b1, m, k), (k,)),               # a stack of matrices times a vector
        ((1, b2, m, k), (b1, 1, k, n)),   # size-1 dimensions on both sides
        ((k,), (k,)),                     # two vectors: a scalar
    ][_trial(gen, 6)]


def _matmul_inputs(gen):
    a_shape, b_shape = _matmul_shapes(gen)
    A = torch.randn(a_shape, generator=gen, dtype=F64)
    B = torch.randn(b_shape, generator=gen, dtype=F64)
    G = torch.randn(torch.matmul(A, B).shape, generator=gen, dtype=F64)
    return A, B, G


def _matmul_reference(A, B, G):
    A, B = A.requires_grad_(), B.requires_grad_()
    return torch.autograd.grad((torch.matmul(A, B) * G).sum(), (A, B))


def _as_matrices(A, B, G):
    """matmul's own view: a 1-D a is a row (1, K), a 1-D b a column (K, 1), and G gets
    back the dimensions the product dropped."""
    if B.dim() == 1:
        B, G = B.unsqueeze(-1), G.unsqueeze(-1)
    if A.dim() == 1:
        A, G = A.unsqueeze(0), G.unsqueeze(-2)
    return A, B, G


def _sum_back(full, shape, keepdim=True):
    """``full`` summed down to ``shape``: over the dimensions broadcasting added in front,
    then over those where ``shape`` has size 1 (kept, or dropped without keepdim)."""
    extra = full.dim() - len(shape)
    grad = full.sum(dim=tuple(range(extra))) if extra else full
    stretched = tuple(i for i, s in enumerate(shape) if s == 1 and grad.shape[i] != 1)
    return grad.sum(dim=stretched, keepdim=keepdim) if stretched else grad


def _matmul_slip(a_way="right", b_way="right"):
    """The gradients when a's (or b's) is brought back to its shape the wrong way:
    ``none`` (not summed at all), ``nokeep`` (summed without keepdim), ``all`` (summed
    over every batch dimension), ``row`` (a 1-D operand's added dimension kept)."""
    def back(full, shape, added, way):
        if way == "none":
            grad = full
        elif way == "all":
            grad = full.sum(dim=tuple(range(full.dim() - 2))) if full.dim() > 2 else full
        else:
            matrix = shape if len(shape) > 1 else (1, *shape) if added == -2 else (*shape, 1)
            grad = _sum_back(full, matrix, keepdim=way != "nokeep")
        return grad.squeeze(added) if len(shape) == 1 and way != "row" else grad

    def wrong(A, B, G):
        a, b, g = _as_matrices(A, B, G)
        return back(g @ b.mT, A.shape, -2, a_way), back(a.mT @ g, B.shape, -1, b_way)
    return wrong


MATMUL_SLIPS = {
    "a.grad keeps the batch dimensions of the product: a was broadcast over them, so its "
    "gradient must be summed back to a's own shape":
        _matmul_slip(a_way="none"),
    "b.grad keeps the batch dimensions of the product: b was broadcast over them, so its "
    "gradient must be summed back to b's own shape":
        _matmul_slip(b_way="none"),
    "a.grad lost a's size-1 dimensions: where a has size 1 and the product does not, sum "
    "with keepdim=True, so that the gradient keeps a's shape":
        _matmul_slip(a_way="nokeep"),
    "b.grad lost b's size-1 dimensions: where b has size 1 and the product does not, sum "
    "with keepdim=True, so that the gradient keeps b's shape":
        _matmul_slip(b_way="nokeep"),
    "a.grad is summed over every batch dimension, as for a weight the whole batch shares; "
    "but a has batch dimensions of its own, and those keep their gradient (sum only where "
    "a was broadcast)":
        _matmul_slip(a_way="all"),
    "b.grad is summed over every batch dimension, as for a weight the whole batch shares; "
    "but b has batch dimensions of its own, and those keep their gradient (sum only where "
    "b was broadcast)":
        _matmul_slip(b_way="all"),
    "a is 1-D: matmul treats it as a row (1, K) and drops that dimension from the product, "
    "so its gradient must drop it again":
        _matmul_slip(a_way="row"),
    "b is 1-D: matmul treats it as a column (K, 1) and drops that dimension from the "
    "product, so its gradient must drop it again":
        _matmul_slip(b_way="row"),
}

MATMUL_ADVICE = ("Make both operands matrices as matmul does (a 1-D a a row, a 1-D b a "
                 "column, G given back the dimensions the product dropped), apply lesson 08 "
                 "part 2's batched rule, then sum each gradient back to its operand's shape "
                 "and drop any dimension that was added.")


def _forward_problem(name, value_class, cases):
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
            found = _shape_text(tuple(got.shape)) if isinstance(got, torch.Tensor) else "none"
            return failed(name, f"{shown}.data has shape {found}, but torch's gives "
                                f"{_shape_text(tuple(want.shape))}: the forward is wrong")
        if not torch.allclose(got, want, rtol=1e-12, atol=1e-12):
            return failed(name, f"{shown}.data differs from torch's by up to "
                                f"{(got - want).abs().max():.3g}: the forward value is wrong")
        parents = getattr(out, "parents", ())
        if not callable(getattr(out, "rule", None)) or not parents:
            return failed(name, f"{shown} made a Tensor without a rule or parents: give it "
                                "its inputs as parents and a rule (g -> one gradient per "
                                "parent), so that backward reaches them")
    return None


def _check_matmul(answer, seed):
    pieces, unpacked = _unpack(answer, ("broadcast_matmul", "Tensor", "backward"))
    if unpacked:
        return unpacked
    matmul, value_class, backward = pieces
    name = "broadcast_matmul"
    if not callable(matmul):
        return failed(name, f"broadcast_matmul is {type(matmul).__name__}, not a function of "
                            "two Tensors")
    cases = []
    for k in range(6):
        A, B, _ = _matmul_inputs(torch.Generator().manual_seed(seed + k))
        shown = f"broadcast_matmul(a {_shape_text(A.shape)}, b {_shape_text(B.shape)})"
        cases.append((shown, lambda A=A, B=B: matmul(value_class(A), value_class(B)),
                      torch.matmul(A, B)))
    problem = _forward_problem(name, value_class, cases)
    if problem is not None:
        return problem

    def engine_grads(A, B, G):
        a, b = value_class(A), value_class(B)
        backward((matmul(a, b) * value_class(G)).sum())
        return a.grad, b.grad

    return check_by_hand(engine_grads, _matmul_reference, _matmul_inputs, name=name,
                         outputs=("a.grad", "b.grad"), trials=6, seed=seed,
                         mistakes=MATMUL_SLIPS, advice=MATMUL_ADVICE)


# --------------------------------------------------------------------------- Exercise 2


def _used_several_times(leaf, gen):
    """x is used three times, h many times: twice as both inputs of a product (next to
    the loss and further down), and through pairs of nodes added and multiplied, in both
    orders. Whatever order a pass runs ready nodes in (a stack or a queue, parents first
    or last), one part of this graph shows each slip of the counting."""
    x = leaf(torch.randn(3, 4, generator=gen, dtype=F64))
    w = leaf(torch.randn(4, 2, generator=gen, dtype=F64) * 0.5)
    h = (x @ w).tanh()
    further = (h * h).exp() + (h * x[:, :2]).tanh().tanh() + h.exp().tanh()
    p, q, r, s = h.exp(), h.relu(), (h * h).tanh(), h.tanh()
    pairs = (p + q) + p * q + (r * s + (r + s))
    return (h * h + further + x[:, 1:3].exp() + pairs).sum(), [x, w]


def _many_paths(leaf, gen, size=40):
    """A random graph of same-shape tensors (and a bias that broadcasts), many nodes used
    by several others, so that gradients meet along many paths."""
    leaves = [leaf(torch.randn(2, 3, generator=gen, dtype=F64) * 0.5) for _ in range(3)]
    bias = leaf(torch.randn(3, generator=gen, dtype=F64) * 0.5)
    nodes = list(leaves)
    for _ in range(size):
        i, j, op = (int(t) for t in torch.randint(0, len(nodes), (3,), generator=gen))
        a, b = nodes[i], nodes[j]
        nodes.append([(a + b).tanh(), a * b.tanh(), (a * b).tanh(), (a + bias).tanh()][op % 4])
    out = nodes[-1] + bias  # every leaf reaches the output
    for k in [*range(3), *torch.randint(0, len(nodes), (4,), generator=gen).tolist()]:
        out = out + nodes[k]  # tie more nodes to the output
    return out.sum(), [*leaves, bias]


def _chain(leaf, gen, depth=5_000):
    """A chain ``depth`` operations deep: too deep for a recursive pass."""
    x = leaf(torch.randn(2, generator=gen, dtype=F64))
    c = leaf(torch.randn(2, generator=gen, dtype=F64) * 0.1)
    h = x
    for _ in range(depth // 2):
        h = (h + c).tanh()
    return h.sum(), [x, c]


GRAPHS = {
    "a graph where x and h are used several times": _used_several_times,
    "a random graph of many paths": _many_paths,
    "a chain 5,000 operations deep": _chain,
}


class _Stopped(BaseException):
    """Stops the learner's pass at a rule's second run (a BaseException, so that an
    ``except Exception`` in the learner's code lets it through)."""


EARLY = ("a tensor used in several places gets one gradient per use; count them all "
         "first, and run a node only when its count reaches 0")
IN_PLACE = ("it adds in place (+=) into a tensor a rule returned: a rule may hand one tensor "
            "to two parents (add's rule does when nothing was broadcast) or a broadcast view "
            "(a sum's rule does), so writing into it changes another node's gradient too. Add "
            "with +, which makes a new tensor")


class RuleWatch:
    """Replaces every rule of the graph behind ``root`` by one that records, for its
    node, when it runs and what it is given, against what the other rules sent it.

    ``problem`` is the first slip seen (a sentence), or None. A rule run a second time
    stops the pass at once (run once per path, a pass could take for ever on a graph of
    many paths) and is the slip told, whatever was seen before it."""

    def __init__(self, root):
        self.root = root
        self.nodes = {id(root): root}  # everything the root depends on
        self.waiting = {id(root): 0}   # id -> gradients still to arrive (one per edge)
        self.shares = {id(root): [torch.ones_like(root.data)]}  # id -> copies of what came
        self.returned = []             # (a tensor a rule returned, a copy of it)
        self.runs = {}                 # id -> how many times its rule ran
        self.problem = None
        todo = [root]
        while todo:
            for p in todo.pop().parents:
                self.waiting[id(p)] = self.waiting.get(id(p), 0) + 1
                if id(p) not in self.nodes:
                    self.nodes[id(p)] = p
                    todo.append(p)
        for node in self.nodes.values():
            if node.rule is not None:
                node.rule = self._watched(node, node.rule)

    def _note(self, text):
        if self.problem is None:
            self.problem = text

    def written_into(self):
        """Whether the pass changed, in place, a tensor that a rule returned."""
        return any(not torch.equal(t, copy) for t, copy in self.returned)

    def _watched(self, node, rule):
        def watched(g):
            key = id(node)
            self.runs[key] = self.runs.get(key, 0) + 1
            what = f"the rule of a {node.op or 'new'} node {_shape_text(node.shape)}"
            arrived = self.shares.get(key, [])
            if self.runs[key] > 1:
                self.problem = (f"{what} ran {self.runs[key]} times: a node runs once, with the "
                                "sum of every gradient that reached it (one run per arriving "
                                "gradient gives the right numbers, but the work grows with the "
                                "number of paths through the graph)")
                raise _Stopped
            if self.waiting[key] > 0:
                self._note(f"{what} ran before every gradient for it had arrived ({len(arrived)} "
                           f"of {len(arrived) + self.waiting[key]} had): {EARLY}")
            elif node is self.root and not _same(g, arrived[0]):
                self._note("the pass did not start from ones: the loss's gradient with "
                           "respect to itself is 1")
            elif not _same(g, _total(arrived)):
                self._note(IN_PLACE if self.written_into() else (
                    f"{what} was handed {_which(g, arrived)}: a tensor used several times must "
                    "get the sum of its gradients (add what arrives, do not replace it)"))
            out = rule(g)
            for parent, share in zip(node.parents, out, strict=True):
                self.waiting[id(parent)] -= 1
                self.shares.setdefault(id(parent), []).append(share.clone())
                self.returned.append((share, share.clone()))
            return out
        return watched

    def leaf_problem(self, leaves):
        """The first slip seen at the leaves, after the pass: a sentence, or None."""
        never = [n for k, n in self.nodes.items() if n.rule is not None and k not in self.runs]
        if never:
            return (f"the rule of a {never[0].op} node {_shape_text(never[0].shape)} never ran "
                    f"({len(never)} of the graph's nodes never ran): the leaves' gradients must "
                    "come from the rules, every node's once")
        for k, leaf in enumerate(leaves):
            arrived = self.shares.get(id(leaf), [])
            where = f"leaf {k} {_shape_text(leaf.shape)}"
            if leaf.grad is None:
                return (f"{where} has no .grad: add what arrives at a leaf (a node without a "
                        "rule) into its .grad")
            if _same(leaf.grad, _total(arrived)):
                continue
            if self.written_into():
                return IN_PLACE
            early = next((n for n in range(1, len(arrived))
                          if _same(leaf.grad, _total(arrived[:n]))), None)
            if early is not None:
                return (f"{where} took its .grad before every gradient for it had arrived "
                        f"({early} of {len(arrived)} had): {EARLY}")
            return f"{where} has in .grad {_which(leaf.grad, arrived)}: add them all"
        return None


def _same(a, b):
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
            and torch.allclose(a.to(F64), b.to(F64), rtol=1e-12, atol=1e-12))


def _total(shares):
    total = shares[0]
    for share in shares[1:]:
        total = total + share
    return total


def _which(g, arrived):
    """How ``g`` relates to the gradients that arrived for a node, in words."""
    n = len(arrived)
    for k, share in enumerate(arrived):
        if n > 1 and _same(g, share):
            place = "last" if k == n - 1 else "first" if k == 0 else "middle"
            return f"only one of the {n} gradients that arrived for it (the {place} one)"
    return f"something other than the sum of the {n} gradient(s) that arrived for it"


# The lesson's own pass and sort (cells l20-13), by code: a copy under other names is
# recognised too. topo_order is lesson 03's, unchanged.
LESSON_BACKWARD = '''
def backward(root):
    if root.data.numel() != 1:
        raise ValueError(f"backward: expected a Tensor holding one number (a loss), got "
                         f"shape {root.shape}")
    grads = {id(root): torch.ones_like(root.data)}  # d root / d root
    for node in reversed(topo_order(root)):
        g = grads.pop(id(node))  # complete: every node that used this one has run
        if node.rule is None:  # a leaf: add to what it holds
            node.grad = g if node.grad is None else node.grad + g
            continue
        for parent, share in zip(node.parents, node.rule(g), strict=True):
            if id(parent) in grads:
                grads[id(parent)] = grads[id(parent)] + share  # paths add up
            else:
                grads[id(parent)] = share
'''
_space: dict = {}
exec(compile(LESSON_BACKWARD, "<lesson 20's backward>", "exec"), _space)
LESSON_BACKWARD_CODE = _space["backward"].__code__

RECURSIVE = ("your pass is recursive: a function that calls itself stops at Python's recursion "
             "limit (a chain 5,000 deep needs 5,000 nested calls), however high that limit "
             "is set. Keep a list of the nodes that are ready instead")


def _lesson_code(watch, namespace):
    """The lesson's pass or sort if the answer ran it (or a copy of it), else None."""
    mine = {LESSON_BACKWARD_CODE.co_code: "backward", LESSON_SORT_CODE.co_code: "topo_order"}
    for name in ("backward", "topo_order"):
        code = getattr(namespace.get(name), "__code__", None)
        if code is not None:
            mine[code.co_code] = name
    used = sorted({mine[c.co_code] for c in watch.codes if c.co_code in mine})
    return used[0] if used else None


def _run_counted(answer, root, namespace, rules, watched=True):
    """Run the learner's pass, its Python calls watched (or not, on the deep chain: a
    recursive pass or the lesson's own is seen on the small graphs already, and watching
    every call of a pass 5,000 nodes deep would take seconds): None, or what went wrong
    (a Report)."""
    name = "backward_by_counting"
    watch = CallWatch(namespace)
    run = watch.run if watched else (lambda fn, *args: fn(*args))

    def raised(err):
        if isinstance(err, RecursionError):
            return failed(name, RECURSIVE)
        if rules.written_into() or "more than one element of the written-to" in str(err):
            return failed(name, IN_PLACE)
        return f"raised {type(err).__name__}: {err}"
    try:
        _, failure = attempt(name, run, answer, root, what="it", raised=raised)
    except _Stopped:
        failure = None  # the slip is the RuleWatch's
    used = _lesson_code(watch, namespace)
    if used is not None:
        return failed(name, f"it runs the lesson's own {used}, which sorts the whole graph "
                            "first: this exercise asks for the other way, counting the "
                            "gradients each node still awaits")
    if watch.recursive is not None:
        return failed(name, RECURSIVE.replace(
            "is recursive", f"is recursive ({watch.recursive.co_name} calls itself)", 1))
    if rules.problem is not None:
        return failed(name, rules.problem)
    return failure


def _check_counting(answer, seed):
    pieces, unpacked = _unpack(answer, ("backward_by_counting", "Tensor"))
    if unpacked:
        return unpacked
    backward_by_counting, value_class = pieces
    name = "backward_by_counting"
    if not callable(backward_by_counting):
        return failed(name, f"expected a function of the loss Tensor, got "
                            f"{type(backward_by_counting).__name__}")
    namespace = getattr(backward_by_counting, "__globals__", {})
    for k, (graph, build) in enumerate(GRAPHS.items()):
        root, leaves = build(value_class, torch.Generator().manual_seed(seed + k))
        loss, ref_leaves = build(lambda d: d.clone().requires_grad_(),
                                 torch.Generator().manual_seed(seed + k))
        want = torch.autograd.grad(loss, ref_leaves)
        rules = RuleWatch(root)
        failure = _run_counted(backward_by_counting, root, namespace, rules,
                               watched=build is not _chain)
        if failure is not None:
            return _on(graph, failure)
        problem = rules.leaf_problem(leaves)
        if problem is None:
            wrong = [i for i, (leaf, w) in enumerate(zip(leaves, want, strict=True))
                     if not _same(leaf.grad, w)]
            if wrong:
                grad = leaves[wrong[0]].grad
                problem = (f"leaf {wrong[0]}'s .grad differs from torch's, although every "
                           "rule ran once, in order, with the sum" + (
                               f" (it is {str(grad.dtype).removeprefix('torch.')}: start from "
                               "torch.ones_like(root.data), which is float64 like the data)"
                               if grad.dtype != F64 else ""))
        if problem is not None:
            return failed(name, f"on {graph}: {problem}")
    return passed(name, "every rule ran once, after all its gradients arrived, and every "
                        "leaf's .grad equals torch's, on a graph of shared tensors, a random "
                        "graph of many paths and a chain 5,000 operations deep, without "
                        "recursion")


def _on(graph, report):
    """The failed report, its message prefixed with the graph it failed on."""
    check = report.checks[0]
    return failed(check.name, f"on {graph}: {check.message}", check.verdict)


# --------------------------------------------------------------------------- Exercise 3


def _amax_inputs(gen):
    """Small integers (ties are common) of a new shape, a dimension, keepdim, and G."""
    kind = _trial(gen, 4)
    shape = [(_size(gen, 3, 6), _size(gen, 3, 6)), (_size(gen, 2, 4), _size(gen, 3, 6), 4),
             (_size(gen, 3, 6), _size(gen, 3, 6)), (_size(gen, 2, 4), 5, _size(gen, 2, 4))][kind]
    dim, keepdim = [(1, False), (-1, True), (0, True), (1, False)][kind]
    X = torch.randint(0, 3, shape, generator=gen).to(F64)
    G = torch.randn(torch.amax(X, dim, keepdim).shape, generator=gen, dtype=F64)
    return X, dim, keepdim, G


def _amax_reference(X, dim, keepdim, G):
    X = X.requires_grad_()
    (grad,) = torch.autograd.grad((torch.amax(X, dim, keepdim) * G).sum(), X)
    return grad


def _amax_slip(share):
    """x.grad when the winners of each slice get ``share(winners, count, size)`` times
    the gradient arriving there."""
    def wrong(X, dim, keepdim, G):
        top = torch.amax(X, dim, keepdim=True)
        winners = (X == top).to(F64)
        g = G if keepdim else G.unsqueeze(dim)
        return g * share(winners, winners.sum(dim, keepdim=True), X.shape[dim])
    return wrong


def _one_winner(X, dim, keepdim, G):
    """x.grad when the whole gradient goes to the first maximum of each slice."""
    index = torch.argmax(X, dim, keepdim=True)
    g = G if keepdim else G.unsqueeze(dim)
    return torch.zeros_like(X).scatter_(dim, index, g)


AMAX_SLIPS = {
    "every tied entry got the whole gradient: torch's amax splits it evenly between the "
    "entries that tie for the maximum":
        _amax_slip(lambda w, n, size: w),
    "the gradient was divided by the size of the dimension, as for a mean: only the "
    "entries that tie for the maximum share it":
        _amax_slip(lambda w, n, size: w / size),
    "the gradient went to one entry per slice: that is max(dim=...)'s convention, which "
    "returns an index; amax splits it evenly between the tied entries":
        _one_winner,
}

AMAX_ADVICE = ("Lesson 08 part 2: a reduction becomes a broadcast (put the reduced dimension "
               "back as size 1 when keepdim is False), and only the maxima of each slice get "
               "gradient, tied ones an equal share.")


def _check_amax(answer, seed):
    pieces, unpacked = _unpack(answer, ("amax", "Tensor", "backward"))
    if unpacked:
        return unpacked
    amax, value_class, backward = pieces
    name = "amax"
    if not callable(amax):
        return failed(name, f"amax is {type(amax).__name__}, not a function of a Tensor, a "
                            "dimension and keepdim")
    cases, first = [], None
    for k in range(4):
        X, dim, keepdim, _ = _amax_inputs(torch.Generator().manual_seed(seed + k))
        first = X if first is None else first
        shown = f"amax(x {_shape_text(X.shape)}, dim={dim}, keepdim={keepdim})"
        cases.append((shown, lambda X=X, d=dim, kd=keepdim: amax(value_class(X), d, kd),
                      torch.amax(X, dim, keepdim)))
    problem = _forward_problem(name, value_class, cases)
    if problem is not None:
        return problem

    x = value_class(first)
    parents = tuple(amax(x, 0, False).parents)
    if len(parents) != 1 or parents[0] is not x:
        return failed(name, f"amax(x, ...) made a node with {len(parents)} parent(s); it must be "
                            "one node whose only parent is x, with a rule you derive (a chain "
                            "of the engine's operations would be their rules, not yours)")

    def engine_grad(X, dim, keepdim, G):
        x = value_class(X)
        backward((amax(x, dim, keepdim) * value_class(G)).sum())
        return x.grad

    return check_by_hand(engine_grad, _amax_reference, _amax_inputs, name="amax's x.grad",
                         trials=4, seed=seed, mistakes=AMAX_SLIPS, advice=AMAX_ADVICE)


# The engine is the lesson: its Tensor sets its own operators (``Tensor.__add__ = add``).
EXERCISES = {
    "l20-matmul": Method(check=_check_matmul, vocabulary=ENGINE),
    "l20-backward": Method(check=_check_counting, vocabulary=ENGINE),
    "l20-amax": Method(check=_check_amax, vocabulary=ENGINE),
}

# --------------------------------------------------------------------------- prediction


def _arrivals_answer():
    """How many gradients torch's engine waits for at y's node, for
    loss = (y * y + y).sum(), y = relu(x @ w): the edges into ReluBackward0."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, generator=gen, dtype=F64)
    w = torch.randn(3, 2, generator=gen, dtype=F64, requires_grad=True)
    y = (x @ w).relu()
    loss = (y * y + y).sum()
    count, seen, todo = 0, set(), [loss.grad_fn]
    while todo:
        for fn, _ in todo.pop().next_functions:
            count += fn is y.grad_fn
            if fn is not None and fn not in seen:
                seen.add(fn)
                todo.append(fn)
    return count


PREDICTIONS = {
    "l20-predict-arrivals": Prediction(
        question="gradients arriving at y for loss = (y * y + y).sum()",
        answer=_arrivals_answer,
        hint="count the places where y is an input of an operation: each one sends a "
             "gradient back to y, and the product has y as both of its inputs.",
        why="the product y * y has y as both of its inputs and sends one gradient back for "
            "each, and the sum sends one more: {answer}. torch's engine counts these edges "
            "for every node before the pass, and runs ReluBackward0 once the last one has "
            "arrived",
    ),
}
