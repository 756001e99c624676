"""Plausible wrong answers for the exercise and prediction of 15-tools-inside-backward.ipynb."""

VANISH = "def first_vanishing_layer(model, x, threshold):\n{}"
HOOKED_INPUTS = (
    "    norms, handles = {}, []\n"
    "    for name, layer in model.named_children():\n"
    "        def record(module, grad_input, grad_output, name=name):\n"
    "            norms[name] = grad_input[0].norm().item()\n"
    "        handles.append(layer.register_full_backward_hook(record))\n"
    "    model(x).sum().backward()\n"
    "    for handle in handles:\n"
    "        handle.remove()\n"
)
FROM_THE_LOSS = (
    "    for name, _ in reversed(list(model.named_children())):\n"
    "        if norms[name] < threshold:\n"
    "            return name\n"
    "    return None\n"
)


def _measured(measure: str) -> str:
    """HOOKED_INPUTS with each layer's gradient measured by ``measure``, not its norm."""
    return HOOKED_INPUTS.replace("grad_input[0].norm().item()", measure)


WRONG = {
    "l15-predict-pileup": [
        # One hook only: the piling up overlooked.
        ("step3_grad_guess = 6.0\n", "not quite"),
    ],
    "l15-vanishing": [
        # The hooks never removed.
        (
            VANISH.format(
                "    norms = {}\n"
                "    for name, layer in model.named_children():\n"
                "        def record(module, grad_input, grad_output, name=name):\n"
                "            norms[name] = grad_input[0].norm().item()\n"
                "        layer.register_full_backward_hook(record)\n"
                "    model(x).sum().backward()\n"
            ) + FROM_THE_LOSS,
            "still registered",
        ),
        # Each layer's input kept by a forward pre-hook, its .grad read after backward.
        (
            VANISH.format(
                "    inputs, handles = {}, []\n"
                "    for name, layer in model.named_children():\n"
                "        def keep(module, args, name=name):\n"
                "            inputs[name] = args[0]\n"
                "        handles.append(layer.register_forward_pre_hook(keep))\n"
                "    model(x).sum().backward()\n"
                "    for handle in handles:\n"
                "        handle.remove()\n"
                "    norms = {name: float('inf') if inputs[name].grad is None\n"
                "             else inputs[name].grad.norm().item() for name in inputs}\n"
            ) + FROM_THE_LOSS,
            "non-leaf",
        ),
        # The walk from the input up.
        (
            VANISH.format(HOOKED_INPUTS) + (
                "    for name, _ in model.named_children():\n"
                "        if norms[name] < threshold:\n"
                "            return name\n"
                "    return None\n"
            ),
            "wrong way",
        ),
        # grad_output measured, not grad_input.
        (
            VANISH.format(HOOKED_INPUTS.replace("grad_input[0]", "grad_output[0]"))
            + FROM_THE_LOSS,
            "grad_output",
        ),
        # The old register_backward_hook: on a Linear its grad_input[0] is the bias's gradient.
        (
            VANISH.format(HOOKED_INPUTS.replace("register_full_backward_hook",
                                                "register_backward_hook")) + FROM_THE_LOSS,
            "old form",
        ),
        # The same slip with tensor hooks on each layer's output.
        (
            VANISH.format(
                "    norms, handles = {}, []\n"
                "    for name, layer in model.named_children():\n"
                "        def watch(module, args, out, name=name):\n"
                "            def record(grad):\n"
                "                norms[name] = grad.norm().item()\n"
                "            out.register_hook(record)\n"
                "        handles.append(layer.register_forward_hook(watch))\n"
                "    model(x).sum().backward()\n"
                "    for handle in handles:\n"
                "        handle.remove()\n"
            ) + FROM_THE_LOSS,
            "grad_output",
        ),
        # No hooks at all: torch.autograd.grad at every layer's input, one pass.
        (
            VANISH.format(
                "    inputs, h = [], x\n"
                "    for layer in model:\n"
                "        inputs.append(h)\n"
                "        h = layer(h)\n"
                "    grads = torch.autograd.grad(h.sum(), inputs)\n"
                "    names = [name for name, _ in model.named_children()]\n"
                "    norms = {n: g.norm().item() for n, g in zip(names, grads, strict=True)}\n"
            ) + FROM_THE_LOSS,
            "no hook was registered",
        ),
        # A backward pass per layer.
        (
            VANISH.format(
                "    norms = {}\n"
                "    for name, layer in model.named_children():\n"
                "        def record(module, grad_input, grad_output, name=name):\n"
                "            norms[name] = grad_input[0].norm().item()\n"
                "        handle = layer.register_full_backward_hook(record)\n"
                "        model(x).sum().backward()\n"
                "        handle.remove()\n"
            ) + FROM_THE_LOSS,
            "backward passes",
        ),
        # The walk by index stops before 0: range(len(names) - 1, 0, -1) never looks at the
        # first layer (every check has a network whose first layer is the culprit).
        (
            VANISH.format(HOOKED_INPUTS) + (
                "    names = [name for name, _ in model.named_children()]\n"
                "    for i in range(len(names) - 1, 0, -1):\n"
                "        if norms[names[i]] < threshold:\n"
                "            return names[i]\n"
                "    return None\n"
            ),
            "does vanish in this network: 'fc1'",
        ),
        # The squared norm (no square root) compared with the threshold.
        (VANISH.format(_measured("(grad_input[0] ** 2).sum().item()")) + FROM_THE_LOSS,
         "it does not vanish there"),
        # The first sample's gradient only, grad_input[0][0].
        (VANISH.format(_measured("grad_input[0][0].norm().item()")) + FROM_THE_LOSS,
         "it does not vanish there"),
        # The loss taken as model(x).mean(): every norm divided by the batch size.
        (VANISH.format(HOOKED_INPUTS.replace("model(x).sum()", "model(x).mean()"))
         + FROM_THE_LOSS, "it does not vanish there"),
        # The gradient's (signed) sum instead of its norm.
        (VANISH.format(_measured("grad_input[0].sum().item()")) + FROM_THE_LOSS,
         "it does not vanish there"),
        # The largest entry instead of the norm.
        (VANISH.format(_measured("grad_input[0].abs().max().item()")) + FROM_THE_LOSS,
         "it does not vanish there"),
        # The mean entry instead of the norm.
        (VANISH.format(_measured("grad_input[0].abs().mean().item()")) + FROM_THE_LOSS,
         "it does not vanish there"),
        # The average of the samples' norms instead of the batch's norm.
        (VANISH.format(_measured("grad_input[0].norm(dim=1).mean().item()")) + FROM_THE_LOSS,
         "it does not vanish there"),
        # The L1 norm (the entries' sizes added up) instead of the norm: larger than it.
        (VANISH.format(_measured("grad_input[0].abs().sum().item()")) + FROM_THE_LOSS,
         "a measure larger than the norm"),
        # Each sample's norm added up over the batch instead of the batch's norm: larger too.
        (VANISH.format(_measured("grad_input[0].flatten(1).norm(dim=1).sum().item()"))
         + FROM_THE_LOSS, "a measure larger than the norm"),
        # The closure without name=name: every hook writes to the last layer's name, and the
        # walk reads the others as infinite.
        (
            VANISH.format(
                HOOKED_INPUTS.replace(", name=name):", "):")
            ) + FROM_THE_LOSS.replace("norms[name]", "norms.get(name, float('inf'))"),
            "it does not vanish there",
        ),
        # The walk from the loss returns the last layer above the threshold, the one before
        # the culprit.
        (
            VANISH.format(HOOKED_INPUTS) + (
                "    previous = None\n"
                "    for name, _ in reversed(list(model.named_children())):\n"
                "        if norms[name] < threshold:\n"
                "            return previous\n"
                "        previous = name\n"
                "    return None\n"
            ),
            "it does not vanish there",
        ),
        # No break: the walk from the loss goes on and keeps the last layer under the
        # threshold, the one nearest the input.
        (
            VANISH.format(HOOKED_INPUTS) + (
                "    found = None\n"
                "    for name, _ in reversed(list(model.named_children())):\n"
                "        if norms[name] < threshold:\n"
                "            found = name\n"
                "    return found\n"
            ),
            "goes on past the first one",
        ),
        # The position instead of the name.
        (
            VANISH.format(HOOKED_INPUTS) + (
                "    names = [name for name, _ in model.named_children()]\n"
                "    for i in reversed(range(len(names))):\n"
                "        if norms[names[i]] < threshold:\n"
                "            return i\n"
                "    return None\n"
            ),
            "expected a layer's name",
        ),
    ],
}
