"""Shortcuts for the exercises of 01-computational-graph.ipynb; each must fail its check.

Same format as tests/wrong_answers (see tests/lessons/test_exercises.py). The lesson runs with
its hidden tests, as nbgrader grades it.
"""

SAVED_COS = "def grad_from_saved(node):\n{}"

CHEATS = {
    "l01-saved-cos": [
        # Central finite differences around the saved value.
        (SAVED_COS.format(
            "    s, h = node._saved_self, 1e-6\n"
            "    return (torch.cos(s + h) - torch.cos(s - h)) / (2 * h)\n"),
         "numerical estimate"),
        # bl.numerical_grad on the cosine.
        (SAVED_COS.format(
            "    return bl.numerical_grad(lambda t: torch.cos(t).sum(), node._saved_self)[0]\n"),
         "numerical_grad"),
        # Calling the node itself: backward's own formula.
        (SAVED_COS.format("    return node(torch.ones_like(node._saved_self))\n"),
         "called the node itself"),
        # Rebuilding a cosine and running backward on it.
        (SAVED_COS.format(
            "    s = node._saved_self.detach().requires_grad_()\n"
            "    torch.cos(s).sum().backward()\n"
            "    return s.grad\n"),
         "Tensor.backward()"),
        # torch.autograd.grad, with grad mode switched back on.
        (SAVED_COS.format(
            "    with torch.enable_grad():\n"
            "        s = node._saved_self.detach().requires_grad_()\n"
            "        return torch.autograd.grad(torch.cos(s).sum(), s)[0]\n"),
         "enable_grad"),
        # The lesson's y_cos, run backward inside the function.
        (SAVED_COS.format("    y_cos.backward()\n    return x_cos.grad\n"), "Tensor.backward()"),
    ],
    "l01-walk-leaf": [
        # bl.describe does the walk and keeps the leaf tensors.
        (
            "def find_bias(loss):\n"
            "    nodes = bl.describe(loss).nodes\n"
            "    return [n.leaf.tensor for n in nodes if n.leaf and len(n.leaf.shape) == 1][0]\n",
            "bl.describe",
        ),
    ],
    "l01-find-leaves": [
        # bl.describe under another name.
        (
            "from backproplab.graph import describe as walk\n\n\n"
            "def find_leaves(out):\n"
            "    return [n.leaf.tensor for n in walk(out).nodes if n.leaf]\n",
            "bl.describe",
        ),
        # A backward pass, then the tensors that got a .grad: it cannot find them, and
        # the pass is refused by name.
        (
            "def find_leaves(out):\n"
            "    out.backward()\n"
            "    return []\n",
            "backward pass",
        ),
    ],
}
