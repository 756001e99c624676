"""Plausible wrong answers for the exercises of 07-retain-graph.ipynb."""

TWO = "def two_grads(step, w, h0, xs):\n{}"

WRONG = {
    "l07-predict-again": [
        ("again_raises = False\n", "not quite"),
    ],
    "l07-predict-inplace": [
        ('inplace_outcome = "old"\n', "not quite"),
        ('inplace_outcome = "new"\n', "not quite"),
        ('inplace_outcome = "nothing"\n', "not one of the choices"),
    ],
    "l07-predict-second": [
        ("z_works_after_y = True\n", "not quite"),
    ],
    "l07-two-derivatives": [
        # No retain_graph on the first call.
        (
            TWO.format(
                "    h, states = h0, []\n"
                "    for x_t in xs:\n"
                "        h = step(w, h, x_t)\n"
                "        states.append(h)\n"
                "    (a,) = torch.autograd.grad(states[1], w)\n"
                "    (b,) = torch.autograd.grad(states[-1], w)\n"
                "    return a, b\n"
            ),
            "retain_graph=True",
        ),
        # The easy way out: build the graph twice.
        (
            TWO.format(
                "    out = []\n"
                "    for stop in (2, len(xs)):\n"
                "        h = h0\n"
                "        for x_t in xs[:stop]:\n"
                "            h = step(w, h, x_t)\n"
                "        out.append(torch.autograd.grad(h, w)[0])\n"
                "    return tuple(out)\n"
            ),
            "run the loop once",
        ),
        # backward twice into .grad: the second result holds the sum of both.
        (
            TWO.format(
                "    h, states = h0, []\n"
                "    for x_t in xs:\n"
                "        h = step(w, h, x_t)\n"
                "        states.append(h)\n"
                "    states[1].backward(retain_graph=True)\n"
                "    first = w.grad.clone()\n"
                "    states[-1].backward()\n"
                "    return first, w.grad\n"
            ),
            "added together",
        ),
        # Off by one: the state after one step taken for h_2.
        (
            TWO.format(
                "    h, states = h0, []\n"
                "    for x_t in xs:\n"
                "        h = step(w, h, x_t)\n"
                "        states.append(h)\n"
                "    (a,) = torch.autograd.grad(states[0], w, retain_graph=True)\n"
                "    (b,) = torch.autograd.grad(states[-1], w)\n"
                "    return a, b\n"
            ),
            "after ONE step",
        ),
        # The two results in the wrong order.
        (
            TWO.format(
                "    h, states = h0, []\n"
                "    for x_t in xs:\n"
                "        h = step(w, h, x_t)\n"
                "        states.append(h)\n"
                "    (a,) = torch.autograd.grad(states[1], w, retain_graph=True)\n"
                "    (b,) = torch.autograd.grad(states[-1], w)\n"
                "    return b, a\n"
            ),
            "swapped",
        ),
    ],
    "l07-one-pass": [
        # One backward per loss, keeping the graph each time.
        (
            "def weighted_backward(losses, weights):\n"
            "    for w, loss in zip(weights, losses, strict=True):\n"
            "        (w * loss).backward(retain_graph=True)\n",
            "backward passes; the exercise asks for one",
        ),
        # Right pass, but the graph kept alive for nothing.
        (
            "def weighted_backward(losses, weights):\n"
            "    sum(w * loss for w, loss in zip(weights, losses)).backward(retain_graph=True)\n",
            "still alive",
        ),
        # Weights forgotten.
        ("def weighted_backward(losses, weights):\n    sum(losses).backward()\n",
         "weights are missing"),
        # backward without its parentheses: nothing runs.
        (
            "def weighted_backward(losses, weights):\n"
            "    total = sum(w * loss for w, loss in zip(weights, losses))\n"
            "    total.backward\n",
            "0 backward passes",
        ),
    ],
}
