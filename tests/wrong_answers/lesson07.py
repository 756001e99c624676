"""Plausible wrong answers for the exercises of 07-retain-graph.ipynb."""

ONE = "def one_backward(main, aux):\n    {}\n"
PLAYERS = "def two_player_step(loss_a, loss_b, A, B, lr):\n    {}\n"
STEPS = ("grads_a = torch.autograd.grad({a}, A, retain_graph=True)\n"
         "    grads_b = torch.autograd.grad({b}, B)\n"
         "    with torch.no_grad():\n"
         "        for p, g in zip(A + B, grads_a + grads_b, strict=True):\n"
         "            {update}")

# Exercise 3: the solution's pieces, each slip replacing one of them.
INIT = "        self.tensor = tensor\n        self.version = tensor._version\n"
FREED = ('        if self.tensor is None:\n'
         '            raise RuntimeError("this box was freed by an earlier backward")\n')
CHANGED = ("        if self.tensor._version != self.version:\n"
           '            raise RuntimeError(f"changed in place: version {self.tensor._version}, "\n'
           '                               f"saved at version {self.version}")\n')
UNPACK = FREED + CHANGED + "        return self.tensor\n"
FREE = "        self.tensor = None\n"
RESET = ("    for node in order:\n"
         "        if node.parents:\n"
         "            node.grad = torch.zeros_like(node.data)\n")
RUN = ("    for node in reversed(order):\n"
       "        node.rule()\n"
       "        if not retain_graph:\n"
       "            for box in node.saved:\n"
       "                box.free()\n")


def engine(init=INIT, unpack=UNPACK, free=FREE, reset=RESET, run=RUN, start=""):
    """The exercise's solution cell with one piece replaced."""
    return ("class Saved:\n"
            "    def __init__(self, tensor):\n" + init + "\n"
            "    def unpack(self):\n" + unpack + "\n"
            "    def free(self):\n" + free + "\n\n"
            "def backward(root, retain_graph=False):\n" + start +
            "    order = topo_order(root)\n" + reset +
            "    root.grad = root.grad + 1\n" + run)


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
    "l07-engine-frees": [
        # backward never frees anything: the boxes keep their tensors after the pass.
        (engine(run="    for node in reversed(order):\n        node.rule()\n"), "still hold"),
        # free() that does nothing.
        (engine(free="        pass\n"), "still hold"),
        # A flag instead of letting go: the box still holds the tensor.
        (engine(init=INIT + "        self.freed = False\n",
                unpack=UNPACK.replace("self.tensor is None", "self.freed"),
                free="        self.freed = True\n"), "free() must let go of the tensor"),
        # Freed, but unpack() does not look: it hands back None.
        (engine(unpack="        return self.tensor\n"), "freed box unpacks without an error"),
        # retain_graph ignored: every pass frees.
        (engine(run=RUN.replace("        if not retain_graph:\n            for box",
                                "        if True:\n            for box")),
         "a pass asked to keep them frees nothing"),
        # No version check: a leaf changed between passes goes unnoticed.
        (engine(unpack=FREED + "        return self.tensor\n"), "note tensor._version"),
        # The version compared with 0 rather than with the version at saving.
        (engine(unpack=UNPACK.replace("!= self.version", "!= 0")), "not with 0"),
        # A copy saved: the version counter of the copy never moves.
        (engine(init=INIT.replace("= tensor\n", "= tensor.clone()\n", 1)), "keeps a copy"),
        # Every second backward refused, whatever the graph saved.
        (engine(start="    if getattr(root, 'used', False) and not retain_graph:\n"
                      "        raise RuntimeError('backward through the graph a second time')\n"
                      "    root.used = not retain_graph\n"),
         "A sum saved nothing"),
        # The non-leaves' grads are not reset: a second pass through sums adds too much.
        (engine(reset=""), "starts every non-leaf's grad from zeros"),
        # The boxes freed before the rule reads them.
        (engine(run=RUN.replace("        node.rule()\n", "").replace(
            "                box.free()\n", "                box.free()\n        node.rule()\n")),
         "A first pass must run"),
        # One message for both protections.
        (engine(unpack=UNPACK.replace('f"changed in place: version {self.tensor._version}, "',
                                      '"this box was freed by an earlier backward"').replace(
                                      'f"saved at version {self.version}"', '""')),
         "your two errors read the same"),
        # The version slip raised as another kind of error.
        (engine(unpack=UNPACK.replace("raise RuntimeError(f", "raise ValueError(f")),
         "raises RuntimeError; so must your engine"),
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
        # backward(inputs=...) for each player, .grad never cleared: right on fresh leaves,
        # but in a loop the next step adds its gradients to the last one's.
        (PLAYERS.format("loss_a.backward(inputs=A, retain_graph=True)\n"
                        "    loss_b.backward(inputs=B)\n"
                        "    with torch.no_grad():\n"
                        "        for p in A + B:\n"
                        "            p -= lr * p.grad"),
         "two steps, a new forward pass before each"),
        # .grad cleared only between the two passes: loss_b's pass leaves A a .grad that the
        # next step's loss_a adds to.
        (PLAYERS.format("loss_a.backward(retain_graph=True)\n"
                        "    grads_a = [p.grad.clone() for p in A]\n"
                        "    for p in A + B:\n"
                        "        p.grad = None\n"
                        "    loss_b.backward()\n"
                        "    with torch.no_grad():\n"
                        "        for p, g in zip(A, grads_a):\n"
                        "            p -= lr * g\n"
                        "        for p in B:\n"
                        "            p -= lr * p.grad"),
         "two steps, a new forward pass before each"),
    ],
}
