"""Plausible wrong answers for the exercises of 21-inside-torchs-engine.ipynb (see
tests/lessons/test_exercises.py)."""

EXECUTOR = 'def run_backward(roots, grads, inputs):\n    """torch.autograd.backward(roots, grads, inputs=inputs), node by node; returns the\n    nodes in the order they ran."""\n    class Ready:\n        """A ready node on the heap, compared by priority alone, as torch compares."""\n\n        def __init__(self, node):\n            self.node = node\n            self.priority = node._sequence_nr()\n\n        def __lt__(self, other):\n            return self.priority > other.priority  # the largest sequence number first\n\n    # Walk the graph once: the edges into each node, and who sends along them.\n    waiting, users, todo, seen = {}, {}, [], set()\n    for root in roots:  # each output has an edge from the invisible root\n        waiting[root.grad_fn] = waiting.get(root.grad_fn, 0) + 1\n        todo.append(root.grad_fn)\n    while todo:\n        node = todo.pop()\n        if node in seen:\n            continue\n        seen.add(node)\n        for fn, _ in node.next_functions:\n            if fn is not None:\n                waiting[fn] = waiting.get(fn, 0) + 1\n                users.setdefault(fn, []).append(node)\n                todo.append(fn)\n\n    # Pruning: a node runs only if a path leads from it to an input\'s AccumulateGrad.\n    needed, todo = set(), [get_gradient_edge(t).node for t in inputs]\n    while todo:\n        node = todo.pop()\n        if node not in needed:\n            needed.add(node)\n            todo.extend(users.get(node, []))\n\n    buffers, ready, order = {}, [], []\n\n    def arrive(fn, slot, grad):\n        """Add grad into slot `slot` of fn\'s buffer; queue fn once nothing else is due."""\n        if grad is not None and fn in needed:\n            shape = fn._input_metadata[slot].shape\n            if grad.shape != shape:  # sent to a broadcast input: sum it down\n                grad = grad.sum_to_size(shape)\n            buffer = buffers.setdefault(fn, [None] * len(fn._input_metadata))\n            buffer[slot] = grad if buffer[slot] is None else buffer[slot] + grad\n        waiting[fn] -= 1\n        if waiting[fn] == 0 and fn in needed:\n            heapq.heappush(ready, Ready(fn))\n\n    for root, grad in zip(roots, grads, strict=True):\n        arrive(root.grad_fn, root.output_nr, grad)\n    while ready:\n        node = heapq.heappop(ready).node\n        order.append(node)\n        sent = node(*buffers.pop(node))\n        if not isinstance(sent, tuple):\n            sent = (sent,)\n        for (fn, slot), grad in zip(node.next_functions, sent, strict=True):\n            if fn is not None:\n                arrive(fn, slot, grad)\n    return order\n'

LAYERS = 'def watch_layers(model, report):\n    handles = []\n    for name, module in model.named_modules():\n        params = dict(module.named_parameters(recurse=False))\n        if not params:\n            continue  # a container, or a layer without parameters\n\n        def layer_ready(grads, name=name, keys=tuple(params)):  # bound now, not at call time\n            report(name, dict(zip(keys, grads, strict=True)))\n        handles.append(register_multi_grad_hook(list(params.values()), layer_ready))\n    return handles\n'
# The first lines of a watch_layers that visits each module with parameters of its own.
_EACH_MODULE = ("def watch_layers(model, report):\n"
                "    handles = []\n"
                "    for name, module in model.named_modules():\n"
                "        params = dict(module.named_parameters(recurse=False))\n"
                "        if not params:\n"
                "            continue\n")


def _edited(source: str, *edits: tuple[str, str]) -> str:
    """The solution with some lines changed: each (old, new) must occur once."""
    for old, new in edits:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    return source


def _executor(*edits: tuple[str, str]) -> str:
    return _edited(EXECUTOR, *edits)


def _layers(*edits: tuple[str, str]) -> str:
    return _edited(LAYERS, *edits)


PUSH = "            heapq.heappush(ready, Ready(fn))\n"
POP = "        node = heapq.heappop(ready).node\n"
COUNTED = ("        waiting[fn] -= 1\n"
           "        if waiting[fn] == 0 and fn in needed:\n"
           "            heapq.heappush(ready, Ready(fn))\n")
SUM_DOWN = ("            if grad.shape != shape:  # sent to a broadcast input: sum it down\n"
            "                grad = grad.sum_to_size(shape)\n")
REGISTER = "        handles.append(register_multi_grad_hook(list(params.values()), layer_ready))\n"

WRONG = {
    "l21-predict-first": [
        # The first edge first, as a walk in edge order would.
        ('first_guess = "ExpBackward0"\n', "not quite"),
        # Not one of the two nodes.
        ('first_guess = "AddBackward0"\n', "not one of the choices"),
    ],
    "l21-predict-ties": [
        # First in, first out.
        ("ties_guess = [0, 1, 2, 3]\n", "not quite"),
        # Last in, first out.
        ("ties_guess = [3, 2, 1, 0]\n", "not quite"),
    ],
    "l21-executor": [
        # A plain queue: ready nodes leave in the order they became ready.
        (_executor((PUSH, "            ready.append(fn)\n"), (POP, "        node = ready.pop(0)\n")),
         "first in, first out"),
        # A stack: depth first.
        (_executor((PUSH, "            ready.append(fn)\n"), (POP, "        node = ready.pop()\n")),
         "last in, first out"),
        # The heap the wrong way round: the oldest node first.
        (_executor(("return self.priority > other.priority", "return self.priority < other.priority")),
         "smallest sequence number first"),
        # Ties broken by a counter, first come first served.
        (_executor(("    buffers, ready, order = {}, [], []\n",
                    "    buffers, ready, order, tick = {}, [], [], [0]\n"),
                   (PUSH, "            tick[0] += 1\n"
                          "            heapq.heappush(ready, (-fn._sequence_nr(), tick[0], fn))\n"),
                   (POP, "        node = heapq.heappop(ready)[2]\n")),
         "order they arrived"),
        # (sequence number, node) tuples: equal numbers make heapq compare the nodes.
        (_executor((PUSH, "            heapq.heappush(ready, (-fn._sequence_nr(), fn))\n"),
                   (POP, "        node = heapq.heappop(ready)[1]\n")),
         "compares by the key alone"),
        # No pruning: every node runs, and every leaf gets a .grad.
        (_executor(("    needed, todo = set(), [get_gradient_edge(t).node for t in inputs]\n",
                    "    needed, todo = set(), list(seen)\n")),
         "no pruning"),
        # A node queued the first time something arrives, not once its count reaches 0.
        (_executor(("    buffers, ready, order = {}, [], []\n",
                    "    buffers, ready, order, queued = {}, [], [], set()\n"),
                   (COUNTED, "        if fn in needed and fn not in queued:\n"
                             "            queued.add(fn)\n"
                             "            heapq.heappush(ready, Ready(fn))\n")),
         "before all of its gradient had arrived"),
        # A node queued every time something arrives.
        (_executor((COUNTED, "        if fn in needed:\n"
                             "            heapq.heappush(ready, Ready(fn))\n"),
                   ("sent = node(*buffers.pop(node))", "sent = node(*buffers[node])")),
         "twice"),
        # = for += in the input buffer.
        (_executor(("buffer[slot] = grad if buffer[slot] is None else buffer[slot] + grad",
                    "buffer[slot] = grad")),
         "+=, not ="),
        # A broadcast gradient not summed down to the slot's shape.
        (_executor((SUM_DOWN, "")), "sums it down"),
        # The empty slots dropped: the node gets fewer gradients than it has slots.
        (_executor(("sent = node(*buffers.pop(node))",
                    "sent = node(*[g for g in buffers.pop(node) if g is not None])")),
         "one buffer slot per input"),
        # Names returned instead of the nodes.
        (_executor(("    return order\n", "    return [node.name() for node in order]\n")),
         "return the nodes themselves"),
        # Every output seeded with ones, the gradients given ignored.
        (_executor(("    for root, grad in zip(roots, grads, strict=True):\n"
                    "        arrive(root.grad_fn, root.output_nr, grad)\n",
                    "    for root in roots:\n"
                    "        arrive(root.grad_fn, root.output_nr, torch.ones_like(root))\n")),
         "seeded with ones"),
        # Every root's gradient given to slot 0 of its node, root.output_nr ignored.
        (_executor(("        arrive(root.grad_fn, root.output_nr, grad)\n",
                    "        arrive(root.grad_fn, 0, grad)\n")),
         "slot 0 of root.grad_fn"),
        # The leaves' AccumulateGrad nodes never run: .grad is set by hand and not listed.
        (_executor(("        node = heapq.heappop(ready).node\n        order.append(node)\n",
                    "        node = heapq.heappop(ready).node\n"
                    "        if hasattr(node, \"variable\"):\n"
                    "            node.variable.grad = buffers.pop(node)[0]\n"
                    "            continue\n"
                    "        order.append(node)\n")),
         "you never ran AccumulateGrad"),
    ],
    "l21-layers": [
        # mode="any": the report comes with the module's first gradient.
        (_layers((REGISTER, "        handles.append(register_multi_grad_hook(\n"
                            "            list(params.values()), lambda g, name=name, keys=list(params):\n"
                            "            report(name, {k: g for k in keys}), mode=\"any\"))\n")),
         "mode 'any' fires at the first"),
        # The loop variable looked up when the hook runs: every report names the last module.
        (_layers(("def layer_ready(grads, name=name, keys=tuple(params)):",
                  "def layer_ready(grads, keys=tuple(params)):")),
         "loop variables"),
        # Every module's parameters, the model itself included.
        (_layers(("params = dict(module.named_parameters(recurse=False))",
                  "params = dict(module.named_parameters())")),
         "no parameters of its own"),
        # The root module skipped: the check's model has a parameter of its own.
        (_layers(("        if not params:\n", "        if not params or not name:\n")),
         "The model itself is one of model.named_modules()"),
        # The top level only: the check's first block is nested.
        (_layers(("model.named_modules()", "model.named_children()")), "named_children() only"),
        # .grad reported instead of the gradients the hook receives.
        (_layers(("            report(name, dict(zip(keys, grads, strict=True)))\n",
                  "            report(name, {k: p.grad for k, p in module.named_parameters(recurse=False)})\n"),
                 ("def layer_ready(grads, name=name, keys=tuple(params)):",
                  "def layer_ready(grads, name=name, keys=tuple(params), module=module):")),
         "the next pass adds into that very tensor"),
        # The handles not returned.
        (_layers(("    return handles\n", "    return None\n")), "return the handles"),
        # A count per module that is never reset: later passes report again and again.
        (_EACH_MODULE
         + "        arrived = {}\n\n"
         "        def note(grad, key, name=name, params=params, arrived=arrived):\n"
         "            arrived[key] = grad\n"
         "            if len(arrived) == len(params):\n"
         "                report(name, dict(arrived))\n"
         "        for key, p in params.items():\n"
         "            handles.append(p.register_hook(lambda g, key=key, note=note: note(g, key)))\n"
         "    return handles\n",
         "once per pass"),
        # A count reset after each report, but waiting for every parameter, in every pass.
        (_EACH_MODULE
         + "        arrived = {}\n\n"
         "        def note(grad, key, name=name, params=params, arrived=arrived):\n"
         "            arrived[key] = grad\n"
         "            if len(arrived) == len(params):\n"
         "                report(name, dict(arrived))\n"
         "                arrived.clear()\n"
         "        for key, p in params.items():\n"
         "            handles.append(p.register_hook(lambda g, key=key, note=note: note(g, key)))\n"
         "    return handles\n",
         "you never reported it"),
        # A tensor hook on each parameter reporting at once: one report per parameter.
        ("def watch_layers(model, report):\n"
         "    handles = []\n"
         "    for name, module in model.named_modules():\n"
         "        for key, p in module.named_parameters(recurse=False):\n"
         "            handles.append(p.register_hook(\n"
         "                lambda g, name=name, key=key: report(name, {key: g})))\n"
         "    return handles\n",
         "a hook on each parameter reports once per parameter"),
        # Post-accumulate hooks that report .grad once the module's last one has run.
        (_EACH_MODULE
         + "        left = [len(params)]\n\n"
         "        def ready(p, name=name, params=params, left=left):\n"
         "            left[0] -= 1\n"
         "            if left[0] == 0:\n"
         "                left[0] = len(params)\n"
         "                report(name, {k: q.grad for k, q in params.items()})\n"
         "        for p in params.values():\n"
         "            handles.append(p.register_post_accumulate_grad_hook(ready))\n"
         "    return handles\n",
         "the parameters' .grad tensors themselves"),
    ],
}
