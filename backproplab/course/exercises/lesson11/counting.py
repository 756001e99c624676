"""Lesson 11, Exercise 2 (``l11-backward``): a backward pass that counts the gradients
each node still awaits, watched rule by rule on graphs of shared tensors, of many paths,
and 5,000 operations deep."""

from __future__ import annotations

import collections
import itertools

import torch

from .._spec import ENGINE, Method, failure, is_failure, plain
from ..lesson03 import LESSON_SORT_CODE, CallWatch
from .shared import F64, ragged, shape_text, stacked, unpack, unragged, unstacked


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


class RuleRecorder:
    """Replaces every rule of the graph behind ``root`` by one that records each run, in
    order: the node, the gradient it was handed, the gradients it sent to the node's
    parents (copies, as they were sent), and whether a tensor sent to this node before
    has been written into since. `record` gives them, with the graph (root first), as
    plain data for the grader, which counts the arrows into each node itself.

    A rule run a second time stops the pass at once (``twice``): run once per path, a pass
    could take for ever on a graph of many paths."""

    def __init__(self, root):
        found, self.index, todo = [root], {id(root): 0}, [root]
        while todo:
            for p in todo.pop().parents:
                if id(p) not in self.index:
                    self.index[id(p)] = len(found)
                    found.append(p)
                    todo.append(p)
        self.graph = {"ops": [node.op for node in found],
                      "shapes": ragged([list(node.shape) for node in found]),
                      "rules": torch.tensor([node.rule is not None for node in found]),
                      "parents": ragged([[self.index[id(p)] for p in node.parents]
                                         for node in found])}
        self.parents = unragged(self.graph["parents"])
        # the arrows into each node: how many gradients it awaits
        self.arrows = collections.Counter(p for parents in self.parents for p in parents)
        self.sent = {}  # node index -> [(a tensor a rule sent it, a copy)]
        self.order, self.touched_then, self.handed, self.shares, self.counts = [], [], [], [], []
        # early: a rule ran before every gradient for its node had arrived
        self.ran, self.twice, self.early = set(), None, False
        for i, node in enumerate(found):
            if node.rule is not None:
                node.rule = self._watched(i, node.rule)

    def touched(self, node=None):
        """Whether a tensor a rule sent (to ``node``, or to any) was written into since."""
        sent = self.sent.values() if node is None else [self.sent.get(node, [])]
        return any(not torch.equal(t, copy) for pairs in sent for t, copy in pairs)

    def _watched(self, i, rule):
        def watched(g):
            if i in self.ran:
                self.twice = i
                raise _Stopped
            self.ran.add(i)
            self.early = self.early or len(self.sent.get(i, [])) < self.arrows[i]
            self.order.append(i)
            self.touched_then.append(self.touched(i))
            self.handed.append(g.detach().clone() if isinstance(g, torch.Tensor) else g)
            self.counts.append(0)
            out = rule(g)
            for parent, share in zip(self.parents[i], out, strict=True):
                copy = share.clone()
                self.sent.setdefault(parent, []).append((share, copy))
                self.shares.append(copy)
                self.counts[-1] += 1
            return out
        return watched

    def certain(self):
        """Whether the pass could not go on (a rule run twice) or shows a slip whatever the
        numbers: a rule run before all its gradients arrived, or never run."""
        return (self.twice is not None or self.early
                or len(self.ran) < int(self.graph["rules"].sum()))

    def record(self):
        return dict(self.graph, order=torch.tensor(self.order, dtype=torch.int64),
                    touched=torch.tensor(self.touched_then, dtype=torch.bool),
                    handed=stacked(self.handed), shares=stacked(self.shares),
                    sent=torch.tensor(self.counts, dtype=torch.int64), twice=self.twice)


def _unpacked(seen):
    """A graph's record with its nodes and runs as lists of dicts again (in the grader)."""
    nodes = [{"op": op, "shape": shape, "rule": rule, "parents": parents}
             for op, shape, rule, parents in zip(seen["ops"], unragged(seen["shapes"]),
                                                 seen["rules"].tolist(),
                                                 unragged(seen["parents"]), strict=True)]
    shares = iter(unstacked(seen["shares"]))
    runs = [{"node": i, "g": g, "touched": touched, "shares": [next(shares) for _ in range(n)]}
            for i, g, touched, n in zip(seen["order"].tolist(), unstacked(seen["handed"]),
                                        seen["touched"].tolist(), seen["sent"].tolist(),
                                        strict=True)]
    return dict(seen, nodes=nodes, runs=runs)


# The lesson's own pass and sort (cells l11-13), by code: a copy under other names is
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
exec(compile(LESSON_BACKWARD, "<lesson 11's backward>", "exec"), _space)
LESSON_BACKWARD_CODE = _space["backward"].__code__

RECURSIVE = ("your pass is recursive: a function that calls itself stops at Python's recursion "
             "limit (a chain 5,000 deep needs 5,000 nested calls), however high that limit "
             "is set. Keep a list of the nodes that are ready instead")
LESSON_CODES = {LESSON_BACKWARD_CODE.co_code.hex(): "backward",
                LESSON_SORT_CODE.co_code.hex(): "topo_order"}


def _run(answer, root, leaves, namespace, watched):
    """One graph's pass as plain data: the recorder's runs, how the pass ended, the
    learner's functions that ran (by their code, on the small graphs: watching every call
    of a pass 5,000 nodes deep would take seconds, and a recursive pass or the lesson's
    own is seen on the small graphs already), and each leaf's .grad; with whether it shows
    a slip whatever the numbers (then no later graph is needed)."""
    rules = RuleRecorder(root)
    watch = CallWatch(namespace)
    run = watch.run if watched else (lambda fn, *args: fn(*args))
    raised = None
    try:
        run(answer, root)
    except _Stopped:
        pass
    except NotImplementedError:
        return failure("missing", "not written yet: it still raises NotImplementedError.")
    except Exception as err:  # the learner's bug: said in the grader, after what comes first
        raised = {"type": type(err).__name__, "text": str(err)}
    ran = {code.co_code.hex() for code in watch.codes}
    own = {name: code.co_code.hex() for name in ("backward", "topo_order")
           if (code := getattr(namespace.get(name), "__code__", None)) is not None}
    certain = (rules.certain() or raised is not None or watch.recursive is not None
               or any(leaf.grad is None for leaf in leaves)
               or bool(ran & (set(LESSON_CODES) | set(own.values()))))
    return certain, {
        **rules.record(), "root": plain(root.data), "raised": raised,
        "touched at the end": rules.touched(), "grads": [plain(leaf.grad) for leaf in leaves],
        "leaves": [rules.index.get(id(leaf)) for leaf in leaves], "ran": sorted(ran),
        "own": own, "recursive": None if watch.recursive is None else watch.recursive.co_name}


def counting_inputs(gen):
    """The seeds of the three graphs (seed, seed + 1, seed + 2): built from them by the
    learner's engine where the answer runs, and by torch in the grader."""
    return {"seeds": [gen.initial_seed() + k for k in range(len(GRAPHS))]}


def _observe_counting(answer, inputs):
    pieces, unpacked = unpack(answer, ("backward_by_counting", "Tensor"))
    if unpacked:
        return unpacked
    backward_by_counting, value_class = pieces
    if not callable(backward_by_counting):
        return failure("fail", f"expected a function of the loss Tensor, got "
                               f"{type(backward_by_counting).__name__}")
    namespace = getattr(backward_by_counting, "__globals__", {})
    seen = []
    for build, seed in zip(GRAPHS.values(), inputs["seeds"], strict=True):
        root, leaves = build(value_class, torch.Generator().manual_seed(seed))
        ran = _run(backward_by_counting, root, leaves, namespace, build is not _chain)
        if is_failure(ran):
            return ran
        certain, graph = ran
        seen.append(graph)
        if certain:  # the grader tells this graph's slip (or an earlier one's): no more
            break
    return seen


def _reference(inputs):
    """torch's gradients for the leaves of each graph."""
    return [list(torch.autograd.grad(*build(lambda d: d.clone().requires_grad_(),
                                             torch.Generator().manual_seed(seed))))
            for build, seed in zip(GRAPHS.values(), inputs["seeds"], strict=True)]


def _same(a, b):
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
            and torch.allclose(a.to(F64), b.to(F64), rtol=1e-12, atol=1e-12))


def _total(shares):
    return sum(shares[1:], start=shares[0]) if shares else None


def _which(g, arrived):
    """How ``g`` relates to the gradients that arrived for a node, in words."""
    n = len(arrived)
    for k, share in enumerate(arrived):
        if n > 1 and _same(g, share):
            place = "last" if k == n - 1 else "first" if k == 0 else "middle"
            return f"only one of the {n} gradients that arrived for it (the {place} one)"
    return f"something other than the sum of the {n} gradient(s) that arrived for it"


def _what(node):
    return f"the rule of a {node['op'] or 'new'} node {shape_text(node['shape'])}"


def _run_problem(seen, run, came, edges):
    """What one run of a rule shows against what had arrived for its node, or None."""
    node, g = seen["nodes"][run["node"]], run["g"]
    if edges > len(came):
        return (f"{_what(node)} ran before every gradient for it had arrived ({len(came)} of "
                f"{edges} had): {EARLY}")
    if run["node"] == 0:  # the root: the pass starts from d root / d root
        return None if _same(g, torch.ones_like(seen["root"])) else (
            "the pass did not start from ones: the loss's gradient with respect to itself is 1")
    if _same(g, _total(came)):
        return None
    return IN_PLACE if run["touched"] else (
        f"{_what(node)} was handed {_which(g, came)}: a tensor used several times must get "
        "the sum of its gradients (add what arrives, do not replace it)")


def _rules_problem(seen, arrived):
    """The first slip the runs show (a rule run twice before all), or None; ``arrived``
    fills with what each node was sent."""
    nodes = seen["nodes"]
    if seen["twice"] is not None:
        return (f"{_what(nodes[seen['twice']])} ran 2 times: a node runs once, with the sum of "
                "every gradient that reached it (one run per arriving gradient gives the right "
                "numbers, but the work grows with the number of paths through the graph)")
    edges = collections.Counter(p for node in nodes for p in node["parents"])
    problem = None
    for run in seen["runs"]:
        i = run["node"]
        problem = problem or _run_problem(seen, run, arrived.get(i, []), edges[i])
        for parent, share in zip(nodes[i]["parents"], run["shares"], strict=False):
            arrived.setdefault(parent, []).append(share)
    return problem


def _raised(seen):
    err = seen["raised"]
    if err["type"] == "RecursionError":
        return RECURSIVE
    if seen["touched at the end"] or "more than one element of the written-to" in err["text"]:
        return IN_PLACE
    return f"raised {err['type']}: {err['text']}"


def _leaf_problem(seen, arrived, want):
    """The first slip seen at the leaves after the pass, or where their .grad is not
    torch's: a sentence, or None."""
    nodes, ran = seen["nodes"], {run["node"] for run in seen["runs"]}
    never = [i for i, node in enumerate(nodes) if node["rule"] and i not in ran]
    if never:
        node = nodes[never[0]]
        return (f"the rule of a {node['op']} node {shape_text(node['shape'])} never ran "
                f"({len(never)} of the graph's nodes never ran): the leaves' gradients must "
                "come from the rules, every node's once")
    for k, (i, grad) in enumerate(zip(seen["leaves"], seen["grads"], strict=True)):
        came = arrived.get(i, [])
        where = f"leaf {k} {shape_text(nodes[i]['shape'] if i is not None else ())}"
        if grad is None:
            return (f"{where} has no .grad: add what arrives at a leaf (a node without a "
                    "rule) into its .grad")
        if _same(grad, _total(came)):
            continue
        if seen["touched at the end"]:
            return IN_PLACE
        sums = itertools.accumulate(came)  # the first 1, 2, ... of them, added
        early = next((n for n, total in enumerate(sums, 1) if n < len(came)
                      and _same(grad, total)), None)
        if early is not None:
            return (f"{where} took its .grad before every gradient for it had arrived "
                    f"({early} of {len(came)} had): {EARLY}")
        return f"{where} has in .grad {_which(grad, came)}: add them all"
    wrong = next((k for k, (got, w) in enumerate(zip(seen["grads"], want, strict=True))
                  if not _same(got, w)), None)
    grad = seen["grads"][wrong] if wrong is not None else None
    low = isinstance(grad, torch.Tensor) and grad.dtype != F64
    return None if wrong is None else (
        f"leaf {wrong}'s .grad differs from torch's, although every rule ran once, in order, "
        "with the sum" + (f" (it is {str(grad.dtype).removeprefix('torch.')}: start from "
                          "torch.ones_like(root.data), which is float64 like the data)"
                          if low else ""))


def _problem(seen, want):
    """The first graph's problem, as the learner reads it, or None."""
    for graph, graph_seen, graph_want in zip(GRAPHS, seen, want, strict=False):
        mine = dict(LESSON_CODES, **{code: name for name, code in graph_seen["own"].items()})
        used = sorted({mine[code] for code in graph_seen["ran"] if code in mine})
        arrived = {}
        if used:
            problem = (f"it runs the lesson's own {used[0]}, which sorts the whole graph first: "
                       "this exercise asks for the other way, counting the gradients each node "
                       "still awaits")
        elif graph_seen["recursive"] is not None:
            problem = RECURSIVE.replace(
                "is recursive", f"is recursive ({graph_seen['recursive']} calls itself)", 1)
        else:
            graph_seen = _unpacked(graph_seen)
            problem = _rules_problem(graph_seen, arrived) or (
                _raised(graph_seen) if graph_seen["raised"] else
                _leaf_problem(graph_seen, arrived, graph_want))
        if problem is not None:
            return f"on {graph}: {problem}"
    return None


COUNTING = Method(
    name="backward_by_counting",
    make_inputs=counting_inputs,
    observe=_observe_counting,
    reference=_reference,
    explain=lambda inputs, got, want: _problem(got, want) or (
        f"it was seen on {len(got)} of the {len(GRAPHS)} graphs only"),
    trials=1,  # three graphs in one trial: the first graph that shows a slip is told
    agree=lambda got, want: len(got) == len(want) and _problem(got, want) is None,
    passed="every rule ran once, after all its gradients arrived, and every leaf's .grad "
           "equals torch's, on a graph of shared tensors, a random graph of many paths and a "
           "chain 5,000 operations deep, without recursion",
    vocabulary=ENGINE,
)
