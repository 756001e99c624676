"""Plausible wrong answers for the exercises of 11-pitfalls-and-tools.ipynb."""

WINDOWS = (
    "def tbptt_gradients(W, xs, k1, k2):\n"
    "    states = [torch.zeros(W.shape[0], dtype=W.dtype)]\n"
    "    with torch.no_grad():\n"
    "        for x_t in xs:\n"
    "            states.append(torch.tanh(W @ states[-1] + x_t))\n"
    "    grads = []\n"
    "    for t in {ends}:\n"
    "        start = {start}\n"
    "        W_leaf = W.clone().requires_grad_()\n"
    "        h, loss = {h}, 0\n"
    "        for s in range(start + 1, t + 1):\n"
    "            h = torch.tanh(W_leaf @ h + xs[s - 1])\n"
    "            if s > t - {losses}:\n"
    "                loss = loss + (h ** 2).sum()\n"
    "        grads.append(torch.autograd.grad(loss, W_leaf)[0])\n"
    "    return grads\n"
)


def windows(ends="range(k1, len(xs) + 1, k1)", start="max(0, t - k2)", h="states[start]",
            losses="k1"):
    """Exercise 1's answer, each window recomputed from the state entering it, with one
    part changed."""
    return WINDOWS.format(ends=ends, start=start, h=h, losses=losses)


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
    "l11-predict-inplace": [
        ('failing_cell = "add"\n', "not quite"),
    ],
    "l11-predict-pileup": [
        # One hook only: the piling up overlooked.
        ("step3_grad_guess = 6.0\n", "not quite"),
    ],
    "l11-windows": [
        # Section 6's chunks: detached at every update, so k2 plays no part.
        ("def tbptt_gradients(W, xs, k1, k2):\n"
         "    W = W.clone().requires_grad_()\n"
         "    h, loss, grads = torch.zeros(W.shape[0], dtype=W.dtype), 0, []\n"
         "    for t, x_t in enumerate(xs, start=1):\n"
         "        h = torch.tanh(W @ h + x_t)\n"
         "        loss = loss + (h ** 2).sum()\n"
         "        if t % k1 == 0:\n"
         "            grads.append(torch.autograd.grad(loss, W)[0])\n"
         "            h, loss = h.detach(), 0\n"
         "    return grads\n", "only k1 steps"),
        # The losses of the whole window, not only its last k1 steps.
        (windows(losses="k2"), "losses of all k2 steps"),
        # One graph for the whole sequence, kept: nothing truncated.
        ("def tbptt_gradients(W, xs, k1, k2):\n"
         "    W = W.clone().requires_grad_()\n"
         "    states = [torch.zeros(W.shape[0], dtype=W.dtype)]\n"
         "    for x_t in xs:\n"
         "        states.append(torch.tanh(W @ states[-1] + x_t))\n"
         "    grads = []\n"
         "    for t in range(k1, len(xs) + 1, k1):\n"
         "        loss = sum((states[s] ** 2).sum() for s in range(t - k1 + 1, t + 1))\n"
         "        grads.append(torch.autograd.grad(loss, W, retain_graph=True)[0])\n"
         "    return grads\n", "nothing was truncated"),
        # Every window started from zeros instead of the state the loop reached.
        (windows(h="torch.zeros(W.shape[0], dtype=W.dtype)"), "started from h = 0"),
        # One step short: the window starts after h_(t-k2+1).
        (windows(start="max(0, t - k2 + 1)"), "one short"),
        # One step too many.
        (windows(start="max(0, t - k2 - 1)"), "one too many"),
        # An update for the leftover steps at the end as well.
        (windows(ends="sorted(set(range(k1, len(xs) + 1, k1)) | {len(xs)})"), "leftover"),
        # Only the loss of the update's own step.
        (windows(losses="1"), "only the last step's loss"),
        # The gradients stacked into one tensor.
        (windows().replace("return grads", "return torch.stack(grads)"), "expected a list"),
    ],
    "l11-vanishing": [
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
