"""Plausible wrong answers for the exercises of 01-computational-graph.ipynb.

Each entry replaces a whole solution cell; the check cell after it must raise
AssertionError whose message contains the fragment (see tests/test_exercises.py).
"""

WEIGHT_GRAD = "def weight_grad(x, dz):\n    return {}\n"

WRONG = {
    # Believes the rows differ, as they would for most inputs.
    "l01-predict-rows": [
        ("rows_identical = False\n", "every x[i] is 1 here"),
    ],
    # Forgets that "- 1" is an operation of its own and gets a node.
    "l01-predict-graph": [
        (
            "prediction = [\n"
            '    "PowBackward0",\n'
            '    "SigmoidBackward0",\n'
            '    "MulBackward0",\n'
            '    "AccumulateGrad",\n'
            '    "AccumulateGrad",\n'
            "]\n",
            "SubBackward0",
        ),
        # Lists the operations in the order the forward pass runs them.
        (
            'prediction = ["MulBackward0", "SigmoidBackward0", "SubBackward0", "PowBackward0",\n'
            '              "AccumulateGrad", "AccumulateGrad"]\n',
            "out of order",
        ),
    ],
    "l01-weight-grad": [
        # The outer product the wrong way round.
        (WEIGHT_GRAD.format("dz[:, None] * x[None, :]"), "transposed"),
        # The lesson's observation copied: every row equals dz (true only for x of ones).
        (WEIGHT_GRAD.format("dz.expand(len(x), -1)"), "mismatch"),
        # The lesson's numbers, hard-coded.
        (WEIGHT_GRAD.format("w.grad"), "hard-coded"),
        # The autograd shortcut.
        (
            "def weight_grad(x, dz):\n"
            "    w0 = torch.zeros(len(x), len(dz), requires_grad=True)\n"
            "    (x @ w0).backward(dz)\n"
            "    return w0.grad\n",
            "by hand",
        ),
    ],
    "l01-saved-cos": [
        # The derivative of cos taken as +sin.
        ("my_grad = torch.sin(y_cos.grad_fn._saved_self.detach())\n", "sign"),
        # Lets backward do it instead of using the saved value.
        ("y_cos.backward()\nmy_grad = x_cos.grad\n", "not backward()"),
        # A rounded number typed in.
        ("my_grad = torch.tensor(-0.932)\n", "worst entry"),
    ],
    "l01-walk-leaf": [
        # Walks into the matrix product and comes back with the weight instead.
        (
            "def find_bias(loss):\n"
            "    add_node = loss.grad_fn.next_functions[0][0]\n"
            "    return add_node.next_functions[0][0].next_functions[1][0].variable\n",
            "returned the weight",
        ),
        # Returns this notebook's bias instead of walking the graph it is given.
        ("def find_bias(loss):\n    return bias_ex\n", "not the bias"),
    ],
}
