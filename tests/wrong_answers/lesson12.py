"""Plausible wrong answers for the exercises of 12-build-your-own-autograd.ipynb."""

SIGMOID = '''def sigmoid(a):
    out = Value(1 / (1 + math.exp(-a.data)), (a,), "sigmoid")

    def rule():
        {}

    out.backward_rule = rule
    return out
'''
TOPO = "def my_topo_order(root):\n{}"

WRONG = {
    "l12-predict-paths": [
        ("c_guess = 6.0\n", "three paths reach a"),  # the direct path forgotten
        ("c_guess = 1.0\n", "three paths reach a"),
        ("c_guess = 3.0\n", "three paths reach a"),
    ],
    "l12-sigmoid": [
        # = instead of +=
        (SIGMOID.format("a.grad = out.data * (1 - out.data) * out.grad"), "instead of adding"),
        # a sign slip
        (SIGMOID.format("a.grad -= out.data * (1 - out.data) * out.grad"), "sign"),
        # the derivative written with the input where the output belongs
        (SIGMOID.format("a.grad += a.data * (1 - a.data) * out.grad"), "mismatch"),
        # out.grad forgotten: the chain rule's incoming factor
        (SIGMOID.format("a.grad += out.data * (1 - out.data)"), "mismatch"),
    ],
    "l12-topo": [
        # recursive
        (
            TOPO.format(
                "    order, seen = [], set()\n"
                "    def visit(node):\n"
                "        if id(node) not in seen:\n"
                "            seen.add(id(node))\n"
                "            for p in node.parents:\n"
                "                visit(p)\n"
                "            order.append(node)\n"
                "    visit(root)\n"
                "    return order\n"
            ),
            "RecursionError",
        ),
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
        # the reverse pass's order returned instead of the topological one
        ("def my_topo_order(root):\n    return list(reversed(topo_order(root)))\n", "reversed"),
    ],
}
