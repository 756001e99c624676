"""Plausible wrong answers for the exercises of 03-build-your-own-autograd.ipynb.

Each entry: (solution-cell source, a fragment the check's message must contain).
MUST_NOT lists, for some of them (by grade id and position in WRONG), fragments the
message must NOT contain: a diagnosis that held on one trial only, such as "off by
a constant factor", must not be given for a slip that has a name of its own.
tests/lessons/test_facts_lesson03.py checks both halves on the engine's own cells.
"""

SIGMOID = '''def sigmoid(a):
    out = Value(1 / (1 + math.exp(-a.data)), (a,), "sigmoid")

    def rule():
        {}

    out.backward_rule = rule
    return out
'''
TOPO = "def my_topo_order(root):\n{}"

# Kahn's algorithm, as the solution writes it, with one line to fill in at the end.
KAHN = (
    "    nodes, todo = {{id(root): root}}, [root]\n"
    "    while todo:\n"
    "        for parent in todo.pop().parents:\n"
    "            if id(parent) not in nodes:\n"
    "                nodes[id(parent)] = parent\n"
    "                todo.append(parent)\n"
    "    users = {{key: [] for key in nodes}}\n"
    "    waiting = {{key: len(node.parents) for key, node in nodes.items()}}\n"
    "    for node in nodes.values():\n"
    "        for parent in node.parents:\n"
    "            users[id(parent)].append(node)\n"
    "    ready = [node for key, node in nodes.items() if waiting[key] == 0]\n"
    "    order = []\n"
    "    while ready:\n"
    "        node = ready.pop()\n"
    "        order.append(node)\n"
    "        for user in users[id(node)]:\n"
    "            waiting[id(user)] -= 1\n"
    "            if waiting[id(user)] == 0:\n"
    "                ready.append(user)\n"
    "    {}\n"
)

RECURSIVE = (
    "    order, seen = [], set()\n"
    "    def visit(node):\n"
    "        if id(node) not in seen:\n"
    "            seen.add(id(node))\n"
    "            for p in node.parents:\n"
    "                visit(p)\n"
    "            order.append(node)\n"
    "    visit(root)\n"
    "    return order\n"
)

WRONG = {
    "l03-predict-paths": [
        ("c_guess = 6.0\n", "not quite"),  # the direct path forgotten
        ("c_guess = 1.0\n", "not quite"),
        ("c_guess = 3.0\n", "not quite"),
    ],
    "l03-predict-forgot": [
        ('forgot_guess = "lower"\n', "not quite"),  # more gradient, faster descent
        ('forgot_guess = "about the same"\n', "not quite"),
        ('forgot_guess = "diverges"\n', "not one of the choices"),
    ],
    "l03-sigmoid": [
        # = instead of +=
        (SIGMOID.format("a.grad = out.data * (1 - out.data) * out.grad"), "instead of adding"),
        # a sign slip
        (SIGMOID.format("a.grad -= out.data * (1 - out.data) * out.grad"),
         "sign is flipped: the rule subtracts"),
        # out.grad forgotten: the chain rule's incoming factor
        (SIGMOID.format("a.grad += out.data * (1 - out.data)"), "leaves out out.grad"),
        # the derivative written with the input where the output belongs
        (SIGMOID.format("a.grad += a.data * (1 - a.data) * out.grad"),
         "input a.data where the output belongs"),
        # no rule at all
        (SIGMOID.format("pass"), "gets nothing through the sigmoid"),
        # the rule is right, but a is not among the parents: backward never reaches it
        (SIGMOID.format("a.grad += out.data * (1 - out.data) * out.grad").replace(
            "(a,), ", "(), "), "list a among its parents"),
        # the (1 - σ) factor forgotten
        (SIGMOID.format("a.grad += out.data * out.grad"), "written as σ(a) alone"),
        # tanh's rule copied
        (SIGMOID.format("a.grad += (1 - out.data**2) * out.grad"), "is tanh's"),
        # the forward value with the sign of the exponent lost
        (SIGMOID.format("a.grad += out.data * (1 - out.data) * out.grad").replace(
            "math.exp(-a.data)", "math.exp(a.data)"), "forward value is wrong"),
        # a float returned: no node, nothing for backward to reach
        ("def sigmoid(a):\n    return 1 / (1 + math.exp(-a.data))\n", "must return a new Value"),
    ],
    "l03-topo": [
        # recursive
        (TOPO.format(RECURSIVE), "recursive"),
        # recursive, with the limit raised so that the deep chain would fit
        (TOPO.format("    sys.setrecursionlimit(50_000)\n" + RECURSIVE), "however high"),
        # no memory of visited nodes: shared nodes appear several times
        (
            TOPO.format(
                "    order, stack = [], [(root, False)]\n"
                "    while stack:\n"
                "        node, ready = stack.pop()\n"
                "        if ready:\n"
                "            order.append(node)\n"
                "        else:\n"
                "            stack.append((node, True))\n"
                "            stack.extend((p, False) for p in node.parents)\n"
                "    return order\n"
            ),
            "appears twice",
        ),
        # Kahn's order, returned backwards (the order backward walks)
        (TOPO.format(KAHN.format("return order[::-1]")), "order is reversed"),
        # the output itself left out of the order
        (TOPO.format(KAHN.format("return order[:-1]")), "1 missing"),
        # the lesson's own depth-first sort, called
        ("def my_topo_order(root):\n    return topo_order(root)\n", "lesson's own sort"),
        # ... and reversed: still the lesson's sort
        ("def my_topo_order(root):\n    return list(reversed(topo_order(root)))\n",
         "lesson's own sort"),
        # the lesson's sort copied under a new name (variables renamed)
        (
            TOPO.format(
                "    out, done = [], set()\n"
                "    todo = [(root, False)]\n"
                "    while todo:\n"
                "        v, ok = todo.pop()\n"
                "        if ok:\n"
                "            out.append(v)\n"
                "        elif id(v) not in done:\n"
                "            done.add(id(v))\n"
                "            todo.append((v, True))\n"
                "            todo.extend((p, False) for p in v.parents if id(p) not in done)\n"
                "    return out\n"
            ),
            "copied",
        ),
        # the lesson's sort, by another name
        ("my_topo_order = topo_order\n", "lesson's own sort"),
        # the standard library's sorter
        (
            "import graphlib\n\n\n"
            "def my_topo_order(root):\n"
            "    graph, todo = {}, [root]\n"
            "    while todo:\n"
            "        node = todo.pop()\n"
            "        if node not in graph:\n"
            "            graph[node] = node.parents\n"
            "            todo.extend(node.parents)\n"
            "    return list(graphlib.TopologicalSorter(graph).static_order())\n",
            "graphlib",
        ),
    ],
}

# (grade id, position in WRONG[grade id]) -> fragments its message must not contain.
# One trial's scalar entries once made all three of these "off by a constant factor ...
# and the sign is flipped".
MUST_NOT = {
    ("l03-sigmoid", 2): ("constant factor", "sign is flipped", "instead of adding"),
    ("l03-sigmoid", 3): ("constant factor", "sign is flipped"),
    ("l03-sigmoid", 4): ("constant factor", "sign is flipped"),
    ("l03-sigmoid", 6): ("constant factor",),
    ("l03-sigmoid", 7): ("constant factor",),
}
