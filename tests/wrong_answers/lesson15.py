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
