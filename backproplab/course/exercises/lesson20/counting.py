"""Lesson 20, Exercise 2 (``l20-backward``): a backward pass that counts the gradients
each node still awaits, watched rule by rule on graphs of shared tensors, of many paths,
and 5,000 operations deep."""

from __future__ import annotations

import torch

from .._spec import attempt, failed, passed
from ..lesson03 import LESSON_SORT_CODE, CallWatch
from .shared import F64, shape_text, unpack


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
            what = f"the rule of a {node.op or 'new'} node {shape_text(node.shape)}"
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
            return (f"the rule of a {never[0].op} node {shape_text(never[0].shape)} never ran "
                    f"({len(never)} of the graph's nodes never ran): the leaves' gradients must "
                    "come from the rules, every node's once")
        for k, leaf in enumerate(leaves):
            arrived = self.shares.get(id(leaf), [])
            where = f"leaf {k} {shape_text(leaf.shape)}"
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


def check_counting(answer, seed):
    pieces, unpacked = unpack(answer, ("backward_by_counting", "Tensor"))
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

