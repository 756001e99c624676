"""Shortcuts for the exercises of 03-build-your-own-autograd.ipynb
(see tests/lessons/test_exercises.py).

Exercise 1's rule is the derivative worked out by the learner, so the shortcuts are the
ways of getting a number for σ'(a) without working it out. Exercise 2's are the ways of
not writing a second sort.
"""

SIGMOID = '''def sigmoid(a):
    out = Value(1 / (1 + math.exp(-a.data)), (a,), "sigmoid")

    def rule():
{}

    out.backward_rule = rule
    return out
'''

CHEATS = {
    "l03-sigmoid": [
        # Central finite differences of σ at a.
        (
            SIGMOID.format(
                "        h = 1e-6\n"
                "        up = 1 / (1 + math.exp(-(a.data + h)))\n"
                "        down = 1 / (1 + math.exp(-(a.data - h)))\n"
                "        a.grad += (up - down) / (2 * h) * out.grad"
            ),
            "numerical estimate",
        ),
        # The package's finite differences.
        (
            SIGMOID.format(
                "        (slope,) = bl.numerical_grad(torch.sigmoid, torch.tensor(a.data))\n"
                "        a.grad += slope.item() * out.grad"
            ),
            "numerical_grad",
        ),
        # torch's autograd on a one-element tensor.
        (
            SIGMOID.format(
                "        t = torch.tensor(a.data, dtype=torch.float64, requires_grad=True)\n"
                "        torch.sigmoid(t).backward()\n"
                "        a.grad += t.grad.item() * out.grad"
            ),
            "Tensor.backward",
        ),
        # ... with grad mode switched back on first.
        (
            SIGMOID.format(
                "        with torch.enable_grad():\n"
                "            t = torch.tensor(a.data, dtype=torch.float64, requires_grad=True)\n"
                "            (g,) = torch.autograd.grad(torch.sigmoid(t), t)\n"
                "        a.grad += g.item() * out.grad"
            ),
            "enable_grad",
        ),
        # torch's own backward kernel for sigmoid.
        (
            SIGMOID.format(
                "        g = torch.ops.aten.sigmoid_backward(\n"
                "            torch.tensor(out.grad, dtype=torch.float64),\n"
                "            torch.tensor(out.data, dtype=torch.float64))\n"
                "        a.grad += g.item()"
            ),
            "backward kernels",
        ),
        # A table of σ'(u) for the visible check's inputs (seeds 0 to 3 of its 4 trials):
        # right there, a KeyError on the hidden check's new inputs.
        (
            "from backproplab.lessons.lesson03 import _sigmoid_inputs\n\n"
            "TABLE = {}\n"
            "for k in range(4):\n"
            "    x, w, b = _sigmoid_inputs(torch.Generator().manual_seed(k))\n"
            "    u = (x * w + b).item()\n"
            "    s = 1 / (1 + math.exp(-u))\n"
            "    TABLE[round(u, 9)] = s * (1 - s)\n"
            "\n\n"
            + SIGMOID.format("        a.grad += TABLE[round(a.data, 9)] * out.grad"),
            "raised KeyError",
        ),
    ],
    "l03-topo": [
        # The lesson's own sort.
        ("def my_topo_order(root):\n    return topo_order(root)\n", "lesson's own sort"),
        # The lesson's recursive sort, with the recursion limit raised out of the way.
        (
            "sys.setrecursionlimit(100_000)\n\n\n"
            "def my_topo_order(root):\n"
            "    return topo_recursive(root)\n",
            "lesson's own sort",
        ),
        # The engine's backward, then its order read back: the lesson's sort again.
        (
            "def my_topo_order(root):\n"
            "    order = topo_order(root)\n"
            "    return [node for node in order]\n",
            "lesson's own sort",
        ),
    ],
}
