"""Shortcuts for the exercises of 14-forward-mode-and-torch-func.ipynb.

(See tests/lessons/test_exercises.py.)

Both exercises are method checks, so the shortcuts are other methods that give the right
numbers: the lesson's own column-by-column Jacobian, finite differences, a full Jacobian
by reverse mode, the lesson's loop of backward calls, and a table of the visible check's
answers.
"""

CHEATS = {
    "l14-jvp": [
        # The lesson's own worked function: the whole Jacobian, one JVP per column.
        ("def jacobian_column(f, x, direction):\n"
         "    return jacobian_by_columns(f, x) @ direction\n", "one pass per input"),
        # The lesson's reverse-mode rows, then a product.
        ("def jacobian_column(f, x, direction):\n    return jacobian_by_rows(f, x) @ direction\n",
         "reverse mode gives rows"),
        # The package's finite differences, one output at a time.
        (
            "def jacobian_column(f, x, direction):\n"
            "    rows = [bl.numerical_grad(lambda t: f(t)[i], x)[0] for i in range(len(f(x)))]\n"
            "    return torch.stack(rows) @ direction\n",
            "no forward-mode pass",
        ),
    ],
    "l14-per-sample": [
        # The lesson's loop of backward calls (cell l14-32), over the new batch.
        (
            "def per_example_norms(model, X, Y):\n"
            "    norms = []\n"
            "    for xi, yi in zip(X, Y, strict=True):\n"
            "        model.zero_grad()\n"
            "        ((model(xi.unsqueeze(0)) - yi.unsqueeze(0)) ** 2).mean().backward()\n"
            "        grads = [p.grad.reshape(-1) for p in model.parameters()]\n"
            "        norms.append(torch.cat(grads).norm())\n"
            "    return torch.stack(norms)\n",
            "loop of backward calls",
        ),
        # A table of the visible check's answer: right there, wrong on the hidden check's batch.
        (
            "from backproplab.lessons.lesson14 import _new_net\n\n"
            "_net, _X, _Y = _new_net(15)\n"
            "_norms = []\n"
            "for _xi, _yi in zip(_X, _Y, strict=True):\n"
            "    _net.zero_grad()\n"
            "    ((_net(_xi.unsqueeze(0)) - _yi.unsqueeze(0)) ** 2).mean().backward()\n"
            "    _norms.append(torch.cat([p.grad.reshape(-1) for p in _net.parameters()]).norm())\n"
            "_TABLE = torch.stack(_norms).detach()\n\n\n"
            "def per_example_norms(model, X, Y):\n"
            "    return _TABLE if torch.equal(X, _X) else torch.ones(len(X), dtype=X.dtype)\n",
            "your numbers differ",
        ),
    ],
}
