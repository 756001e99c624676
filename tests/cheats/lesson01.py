"""Shortcuts for the exercises of 01-computational-graph.ipynb; each must fail its check.

Same format as tests/wrong_answers (see tests/lessons/test_exercises.py). The lesson runs with
its hidden tests, as nbgrader grades it.
"""

CHEATS = {
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
            "backproplab.graph.describe",
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
