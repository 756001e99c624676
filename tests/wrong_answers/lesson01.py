"""Plausible wrong answers for the exercises of 01-computational-graph.ipynb.

Each entry replaces a whole solution cell; the check cell after it must raise
AssertionError whose message contains the fragment (see tests/lessons/test_exercises.py).
"""

FIND_BIAS = "def find_bias(loss):\n    return {}\n"
WALK = (
    "def find_leaves(out):\n"
    "    leaves, seen, todo = [], set(), [out.grad_fn]\n"
    "    while todo:\n"
    "        node = todo.pop()\n"
    "{}"
    "        if hasattr(node, 'variable'):\n"
    "            leaves.append({})\n"
    "        todo.extend(fn for fn, _ in node.next_functions)\n"
    "    return leaves\n"
)
SKIP_NONE_AND_SEEN = (
    "        if node is None or node in seen:\n"
    "            continue\n"
    "        seen.add(node)\n"
)


WRONG = {
    "l01-predict-leaves": [
        # Takes "made by my own code" for a leaf: c and e are written by hand too.
        ('leaves_guess = ["a", "c", "e"]\n', "not quite"),
        # The output as the graph's start.
        ('leaves_guess = ["e"]\n', "not quite"),
    ],
    "l01-predict-rows": [
        # Believes the rows differ, as they would for most inputs.
        ("rows_identical = False\n", "not quite"),
        # Not one of the two choices.
        ('rows_identical = "yes"\n', "not one of the choices"),
    ],
    "l01-predict-graph": [
        # Forgets that "- 1" is an operation of its own and gets a node.
        (
            "graph_guess = [\n"
            '    "PowBackward0",\n'
            '    "SigmoidBackward0",\n'
            '    "MulBackward0",\n'
            '    "AccumulateGrad",\n'
            '    "AccumulateGrad",\n'
            "]\n",
            "not quite",
        ),
        # Lists the operations in the order the forward pass runs them.
        (
            'graph_guess = ["MulBackward0", "SigmoidBackward0", "SubBackward0", "PowBackward0",\n'
            '               "AccumulateGrad", "AccumulateGrad"]\n',
            "not quite",
        ),
    ],
    "l01-walk-leaf": [
        # Walks into the matrix product and comes back with the weight instead.
        (FIND_BIAS.format(
            "loss.grad_fn.next_functions[0][0].next_functions[0][0].next_functions[1][0].variable"),
         "returned the weight W"),
        # Returns this notebook's bias instead of walking the graph it is given.
        (FIND_BIAS.format("bias_ex"), "not in the graph"),
        # Stops at the node instead of taking its leaf.
        (FIND_BIAS.format("loss.grad_fn.next_functions[0][0].next_functions[1][0]"),
         "backward node"),
    ],
    "l01-find-leaves": [
        # Forgets the (None, 0) entries of inputs that need no gradient.
        (WALK.format("        if node in seen:\n            continue\n        seen.add(node)\n",
                     "node.variable"), "(None, 0)"),
        # No memory of visited nodes: a leaf used twice is listed twice.
        (WALK.format("        if node is None:\n            continue\n", "node.variable"),
         "more than once"),
        # Follows only the first input of every node.
        (
            "def find_leaves(out):\n"
            "    node = out.grad_fn\n"
            "    while not hasattr(node, 'variable'):\n"
            "        node = node.next_functions[0][0]\n"
            "    return [node.variable]\n",
            "first inputs",
        ),
        # Returns the AccumulateGrad nodes instead of their tensors.
        (WALK.format(SKIP_NONE_AND_SEEN, "node"), "backward nodes"),
    ],
}
