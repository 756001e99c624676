"""Plausible wrong answers for the exercises of 07-retain-graph.ipynb."""

TWO = "def two_grads(step, w, h0, xs):\n{}"
ONE = "def one_backward(main, aux):\n    {}\n"
PLAYERS = "def two_player_step(loss_a, loss_b, A, B, lr):\n    {}\n"
STEPS = ("grads_a = torch.autograd.grad({a}, A, retain_graph=True)\n"
         "    grads_b = torch.autograd.grad({b}, B)\n"
         "    with torch.no_grad():\n"
         "        for p, g in zip(A + B, grads_a + grads_b, strict=True):\n"
         "            {update}")

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
    "l07-one-backward": [
        # The restructure done, but retain_graph=True left in.
        (ONE.format("(main / main.item() + aux).backward(retain_graph=True)"), "still alive"),
        # Still two backward calls, the second one freeing the graph.
        (ONE.format("(main / main.item()).backward(retain_graph=True)\n    aux.backward()"),
         "2 backward passes"),
        # Two calls without retain_graph: the second finds the shared graph freed.
        (ONE.format("(main / main.item()).backward()\n    aux.backward()"),
         "found the shared graph freed"),
        # The losses summed with the wrong weights.
        (ONE.format("(main + aux).backward()"), "gradient of main + aux"),
        (ONE.format("((main + aux) / main.item()).backward()"), "both losses are divided"),
        (ONE.format("(main + aux / main.item()).backward()"), "rescaling went to aux"),
        (ONE.format("(main * main.item() + aux).backward()"), "multiplied by its value"),
        # A weight with a graph through it: main / main is the constant 1.
        (ONE.format("(main / main + aux).backward()"), "main / main"),
        # The weight of the lesson's y and z (main = 4) written in.
        (ONE.format("(main / 4 + aux).backward()"), "mismatch"),
        # backward without its parentheses: nothing runs.
        (ONE.format("(main / main.item() + aux).backward"), "0 backward passes"),
    ],
    "l07-two-players": [
        # The lesson's broken step, copied: A steps before loss_b's backward.
        (PLAYERS.format("loss_a.backward(retain_graph=True)\n"
                        "    with torch.no_grad():\n"
                        "        for p in A:\n"
                        "            p -= lr * p.grad\n"
                        "    loss_b.backward()\n"
                        "    with torch.no_grad():\n"
                        "        for p in B:\n"
                        "            p -= lr * p.grad"),
         "version counter caught it"),
        # The error silenced with .data: B's gradient then reads the new A.
        (PLAYERS.format("grads_a = torch.autograd.grad(loss_a, A, retain_graph=True)\n"
                        "    for p, g in zip(A, grads_a):\n"
                        "        p.data -= lr * g\n"
                        "    grads_b = torch.autograd.grad(loss_b, B)\n"
                        "    with torch.no_grad():\n"
                        "        for p, g in zip(B, grads_b):\n"
                        "            p -= lr * g"),
         ".data hides the step"),
        # Both backward calls first, then the steps: .grad holds both losses' gradients.
        (PLAYERS.format("loss_a.backward(retain_graph=True)\n"
                        "    loss_b.backward()\n"
                        "    with torch.no_grad():\n"
                        "        for p in A + B:\n"
                        "            p -= lr * p.grad"),
         "loss_a + loss_b"),
        # One backward of the sum.
        (PLAYERS.format("(loss_a + loss_b).backward()\n"
                        "    with torch.no_grad():\n"
                        "        for p in A + B:\n"
                        "            p -= lr * p.grad"),
         "loss_a + loss_b"),
        # The gradients handed to the wrong player.
        (PLAYERS.format(STEPS.format(a="loss_b", b="loss_a", update="p -= lr * g")), "swapped"),
        # Uphill.
        (PLAYERS.format(STEPS.format(a="loss_a", b="loss_b", update="p += lr * g")),
         "up their gradients"),
        # A new tensor bound to the loop's name: the weights never change.
        (PLAYERS.format(STEPS.format(a="loss_a", b="loss_b", update="p = p - lr * g")),
         "did not change"),
        # The first gradient frees the shared graph.
        (PLAYERS.format("grads_a = torch.autograd.grad(loss_a, A)\n"
                        "    grads_b = torch.autograd.grad(loss_b, B)"),
         "retain_graph=True"),
    ],
}
