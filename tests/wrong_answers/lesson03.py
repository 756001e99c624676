"""Plausible wrong answers for the exercises of 03-build-your-own-autograd.ipynb.

Each entry: (solution-cell source, a fragment the check's message must contain).
MUST_NOT lists, for some of them (by grade id and position in WRONG), fragments the
message must NOT contain: a diagnosis that held on one trial only, such as "off by
a constant factor", must not be given for a slip that has a name of its own.
tests/lessons/test_facts_lesson03.py checks both halves on the engine's own cells.
"""

# Exercise 1's solution cell, each rule (and each forward value) to fill in.
OP = '''def {name}({args}):
    out = Value({value}, (a,), "{name}")

    def rule():
        {rule}

    out.backward_rule = rule
    return out
'''
EXP = dict(name="exp", args="a", value="math.exp(a.data)", rule="a.grad += out.data * out.grad")
LOG = dict(name="log", args="a", value="math.log(a.data)",
           rule="a.grad += (1 / a.data) * out.grad")
POWER = dict(name="power", args="a, k", value="a.data**k",
             rule="a.grad += k * a.data ** (k - 1) * out.grad")


def ops(**changes):
    """Exercise 1's three functions, with one of them changed: ``log={"rule": "..."}``."""
    parts = []
    for name, op in (("exp", EXP), ("log", LOG), ("power", POWER)):
        parts.append(OP.format(**{**op, **changes.get(name, {})}))
    return "\n\n".join(parts)


# Exercise 2's solution, one line to change.
CE = (
    "def cross_entropy(logits, target):\n"
    "    counts = [exp(z) for z in logits]\n"
    "    total = counts[0] + counts[1] + counts[2]\n"
    "    prob = counts[target] * power(total, -1)\n"
    "    {}\n"
)

# A log with a slip of its own, under another name: a wrong answer may not rebind the
# names of Exercise 1's cell, which the cells after it still use.
LOG_NO_RULE = OP.format(name="log_slip", args="a", value="math.log(a.data)",
                        rule="a.grad += out.grad")
POWER_NOT_LOWERED = OP.format(name="power_slip", args="a, k", value="a.data**k",
                              rule="a.grad += k * a.data**k * out.grad")

# Exercise 3's solution, as the lesson writes it.
PATHS = (
    'def count_paths(root, leaf):\n'
    '    paths = {id(root): 1}  # paths from root to each node, complete once its users have run\n'
    '    for node in reversed(topo_order(root)):\n'
    '        here = paths.get(id(node), 0)\n'
    '        for parent in node.parents:  # one share per edge: x * x hands x two\n'
    '            paths[id(parent)] = paths.get(id(parent), 0) + here\n'
    '    return paths.get(id(leaf), 0)\n'
)


def _paths(old: str, new: str) -> str:
    """The solution with one piece changed, which must occur once."""
    assert PATHS.count(old) == 1, old
    return PATHS.replace(old, new)


# The count by recursion, remembering each node's count: right, but a chain deeper than
# the recursion limit stops it.
RECURSIVE = (
    "def count_paths(root, leaf):\n"
    "    memo = {}\n\n"
    "    def count(node):\n"
    "        if node is leaf:\n"
    "            return 1\n"
    "        if id(node) not in memo:\n"
    "            memo[id(node)] = sum(count(p) for p in node.parents)\n"
    "        return memo[id(node)]\n\n"
    "    return count(root)\n"
)

WRONG = {
    "l03-predict-paths": [
        ("c_guess = 6.0\n", "not quite"),  # the direct path forgotten
        ("c_guess = 1.0\n", "not quite"),
        ("c_guess = 3.0\n", "not quite"),
    ],
    "l03-ops": [
        # log's local derivative 1/x left out
        (ops(log={"rule": "a.grad += out.grad"}), "log's rule is missing its local derivative"),
        # the power rule with the exponent not lowered
        (ops(power={"rule": "a.grad += k * a.data**k * out.grad"}), "exponent was not lowered"),
        # ... written with the output, the same slip
        (ops(power={"rule": "a.grad += k * out.data * out.grad"}), "exponent was not lowered"),
        # the power rule without its factor k
        (ops(power={"rule": "a.grad += a.data ** (k - 1) * out.grad"}), "factor k is missing"),
        # = instead of += in a new op
        (ops(exp={"rule": "a.grad = out.data * out.grad"}), "instead of adding"),
        (ops(log={"rule": "a.grad = (1 / a.data) * out.grad"}), "instead of adding"),
        (ops(power={"rule": "a.grad = k * a.data ** (k - 1) * out.grad"}), "instead of adding"),
        # out.grad forgotten: the chain rule's incoming factor
        (ops(exp={"rule": "a.grad += out.data"}), "leaves out out.grad"),
        # log's derivative written with the output
        (ops(log={"rule": "a.grad += (1 / out.data) * out.grad"}), "divides by out.data"),
        # exp's derivative left out
        (ops(exp={"rule": "a.grad += out.grad"}), "without exp's derivative"),
        # a sign slip
        (ops(log={"rule": "a.grad -= (1 / a.data) * out.grad"}), "sign is flipped"),
        # ... made in the local derivative instead: the same numbers, so the same message
        (ops(log={"rule": "a.grad += (-1 / a.data) * out.grad"}), "minus sign in the local"),
        # no rule at all
        (ops(power={"rule": "pass"}), "gets nothing through the new operation"),
        # the rule is right, but a is not among the parents: backward never reaches it
        (ops(exp={"value": "math.exp(a.data), ()"}).replace("), (), (a,), ", "), (), "),
         "list a among its parents"),
        # a forward value slip: log10 for the natural log
        (ops(log={"value": "math.log10(a.data)"}), "forward value is wrong"),
        # a float returned: no node, nothing for backward to reach
        ("def exp(a):\n    return math.exp(a.data)\n\n\n" + ops().split("\n\n\n", 1)[1],
         "must return a new Value"),
        # the power built as exp(k * log(a)): log is not defined at a base below 0 or of 0
        (OP.format(**EXP) + "\n\n" + OP.format(**LOG)
         + "\n\ndef power(a, k):\n    return exp(log(a) * k)\n", "log(a.data) is not"),
        # the rule written k * a**k / a with the output: a division by 0 at a base of 0
        (ops(power={"rule": "a.grad += k * out.data / a.data * out.grad"}),
         "nor is a division by a.data"),
    ],
    "l03-softmax-ce": [
        # the minus sign forgotten
        (CE.format("return log(prob)"), "sign is flipped"),
        # no normalising sum
        (CE.format("return -log(counts[target])"), "normalising sum is missing"),
        # the probability, not its log
        (CE.format("return -prob"), "the log is missing"),
        # log's 1/x missing in a log of the learner's own
        (LOG_NO_RULE + "\n\n" + CE.format("return -log_slip(prob)"),
         "log's rule is missing its local derivative 1/x"),
        # the power rule not lowered, in a power of the learner's own
        (POWER_NOT_LOWERED + "\n\n" + CE.format("return -log(prob)").replace(
            "power(total, -1)", "power_slip(total, -1)"), "exponent was not lowered"),
        # the sum treated as a constant: only the direct path is in the graph
        (CE.format("return -log(counts[target] * (1 / total.data))"),
         "only the direct path"),
        # the index of the wrong logit
        (CE.format("return -log(counts[0] * power(total, -1))"), "loss value is wrong"),
        # the gradient written as one rule for the whole loss (softmax minus one-hot)
        (
            "def cross_entropy(logits, target):\n"
            "    e = [math.exp(z.data) for z in logits]\n"
            "    p = [v / sum(e) for v in e]\n"
            "    out = Value(-math.log(p[target]), tuple(logits), \"ce\")\n\n"
            "    def rule():\n"
            "        for i, z in enumerate(logits):\n"
            "            z.grad += (p[i] - (i == target)) * out.grad\n\n"
            "    out.backward_rule = rule\n"
            "    return out\n",
            "built from your operations",
        ),
    ],
    "l03-paths": [
        # recursive
        (RECURSIVE, "recursive"),
        # recursive, with the limit raised so that the deep chain would fit
        (RECURSIVE.replace("    memo = {}\n", "    sys.setrecursionlimit(50_000)\n    memo = {}\n"),
         "only moves that wall"),
        # a set of visited nodes: every node walked once
        (
            "def count_paths(root, leaf):\n"
            "    count, seen, todo = 0, set(), [root]\n"
            "    while todo:\n"
            "        node = todo.pop()\n"
            "        if node is leaf:\n"
            "            count += 1\n"
            "        for p in node.parents:\n"
            "            if id(p) not in seen:\n"
            "                seen.add(id(p))\n"
            "                todo.append(p)\n"
            "    return count\n",
            "set, not added to",
        ),
        # = for +=: each share overwrites the one before
        (_paths("paths[id(parent)] = paths.get(id(parent), 0) + here",
                "paths[id(parent)] = here"), "set, not added to"),
        # a parent taken twice counted once
        (_paths("for parent in node.parents:", "for parent in set(node.parents):"),
         "taken twice by one user counts once"),
        # the order not reversed: shares handed on before they are complete
        (_paths("reversed(topo_order(root))", "topo_order(root)"), "parents first"),
        # every path walked, one by one
        (
            "def count_paths(root, leaf):\n"
            "    count, todo = 0, [root]\n"
            "    while todo:\n"
            "        node = todo.pop()\n"
            "        if node is leaf:\n"
            "            count += 1\n"
            "        todo.extend(node.parents)\n"
            "    return count\n",
            "one by one",
        ),
        # the leaf looked up with [] where the output does not reach it: a KeyError, not 0
        (_paths("return paths.get(id(leaf), 0)", "return paths[id(leaf)]"),
         "return 0 then"),
        # the output's own count started at 0: every count is 0, as with the order not
        # reversed on most graphs, but c = a * a + a tells the two apart
        (_paths("paths = {id(root): 1}", "paths = {id(root): 0}"), "every count came out 0"),
        # a float, not a count
        (_paths("return paths.get(id(leaf), 0)", "return float(paths.get(id(leaf), 0))"),
         "expected a whole number"),
        # counted in floats, the output's count seeded 1.0, an int returned: 2**120 + 1 is lost
        (_paths("paths = {id(root): 1}", "paths = {id(root): 1.0}").replace(
            "return paths.get(id(leaf), 0)", "return int(paths.get(id(leaf), 0))"),
         "kept in floats"),
        # counted in .grad, as backward seeds it: floats again
        (
            "def count_paths(root, leaf):\n"
            "    order = topo_order(root)\n"
            "    for node in order:\n"
            "        node.grad = 0.0\n"
            "    root.grad = 1.0  # one path from the root to itself, as backward seeds it\n"
            "    for node in reversed(order):\n"
            "        for parent in node.parents:  # one share per edge\n"
            "            parent.grad += node.grad\n"
            "    return int(leaf.grad)\n",
            "kept in floats",
        ),
    ],
}

# (grade id, position in WRONG[grade id]) -> fragments its message must not contain.
# One trial's scalar entries can make a slip look like "off by a constant factor ...
# and the sign is flipped".
MUST_NOT = {
    ("l03-ops", 0): ("constant factor", "sign is flipped", "instead of adding"),
    ("l03-ops", 1): ("constant factor", "sign is flipped"),
    ("l03-ops", 3): ("constant factor", "sign is flipped"),
    ("l03-ops", 4): ("constant factor", "sign is flipped"),
    ("l03-ops", 7): ("constant factor",),
    ("l03-ops", 8): ("constant factor",),
    ("l03-softmax-ce", 3): ("constant factor",),
    ("l03-softmax-ce", 4): ("constant factor",),
}
