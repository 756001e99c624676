"""Shortcuts for the exercises of 21-inside-torchs-engine.ipynb; each must fail its check.

Same format as tests/wrong_answers (see tests/lessons/test_exercises.py). The lesson runs with
its hidden tests, as nbgrader grades it. Exercise 1 asks the learner to be the engine, so the
shortcuts let torch's engine (or the check's own executor) do the work; Exercise 2 asks for
hooks, so its shortcut runs a pass itself or reads .grad from a module hook.
"""

CHEATS = {
    "l21-executor": [
        # torch's own backward, with pre-hooks recording the order it ran the nodes in.
        (
            "def run_backward(roots, grads, inputs):\n"
            "    ran, todo, seen = [], [r.grad_fn for r in roots], set()\n"
            "    handles = []\n"
            "    while todo:\n"
            "        node = todo.pop()\n"
            "        if node is None or node in seen:\n"
            "            continue\n"
            "        seen.add(node)\n"
            "        handles.append(node.register_prehook(lambda g, node=node: ran.append(node)))\n"
            "        todo.extend(fn for fn, _ in node.next_functions)\n"
            "    torch.autograd.backward(roots, grads, inputs=inputs)\n"
            "    for handle in handles:\n"
            "        handle.remove()\n"
            "    return ran\n",
            "torch.autograd.backward",
        ),
        # autograd.grad for the values, then .grad filled by hand.
        (
            "def run_backward(roots, grads, inputs):\n"
            "    found = torch.autograd.grad(roots, inputs, grads)\n"
            "    for leaf, grad in zip(inputs, found):\n"
            "        leaf.grad = grad\n"
            "    return []\n",
            "torch.autograd.grad",
        ),
        # bl.trace_backward runs a real backward pass and records its order.
        (
            "def run_backward(roots, grads, inputs):\n"
            "    trace = bl.trace_backward(roots[0], gradient=grads[0])\n"
            "    return []\n",
            "bl.trace_backward, which is backproplab.trace_backward",
        ),
        # The check's own executor, borrowed from the lesson's exercise module.
        (
            "from backproplab.course.exercises.lesson21 import engine as _engine\n\n\n"
            "def run_backward(roots, grads, inputs):\n"
            "    graph = _engine.Graph(list(roots), list(grads), list(inputs), list(inputs))\n"
            "    return _engine.execute(graph)\n",
            "_engine.Graph, which is backproplab.course.exercises.lesson21",
        ),
    ],
    "l21-layers": [
        # A backward pass run by the function itself, to see what comes.
        (
            "def watch_layers(model, report):\n"
            "    first = next(model.parameters())\n"
            "    model(torch.ones(1, first.shape[1], dtype=first.dtype)).sum().backward()\n"
            "    return []\n",
            "ran a backward pass",
        ),
        # A module hook reading .grad. The check's model scales its input by a parameter of
        # the root, so every module's input needs a gradient and each hook runs once the
        # engine has accumulated that module's parameters: it hands over .grad itself.
        (
            "def watch_layers(model, report):\n"
            "    handles = []\n"
            "    for name, module in model.named_modules():\n"
            "        params = dict(module.named_parameters(recurse=False))\n"
            "        if params:\n"
            "            handles.append(module.register_full_backward_hook(\n"
            "                lambda m, gi, go, name=name, params=params:\n"
            "                report(name, {k: p.grad for k, p in params.items()})))\n"
            "    return handles\n",
            "with the parameters' .grad tensors themselves",
        ),
    ],
}
