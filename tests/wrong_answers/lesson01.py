"""Plausible wrong answers for the exercises of 01-computational-graph.ipynb.

Each entry replaces a whole solution cell; the check cell after it must raise
AssertionError whose message contains the fragment.
"""

WRONG = {
    # Forgets that "- 1" is an operation of its own and gets a node.
    "l01-predict-graph": (
        "prediction = [\n"
        '    "PowBackward0",\n'
        '    "SigmoidBackward0",\n'
        '    "MulBackward0",\n'
        '    "AccumulateGrad",\n'
        '    "AccumulateGrad",\n'
        "]\n",
        "SubBackward0",
    ),
    # The derivative of cos taken as +sin.
    "l01-saved-cos": (
        "my_grad = torch.sin(y_cos.grad_fn._saved_self.detach())\n",
        "sign",
    ),
    # Walks into the matrix product and comes back with the weight instead.
    "l01-walk-leaf": (
        "add_ex = loss_ex.grad_fn.next_functions[0][0]\n"
        "found = add_ex.next_functions[0][0].next_functions[1][0].variable\n",
        "shape",
    ),
}
