"""Plausible wrong answers for the exercises of 16-what-backward-keeps.ipynb."""

HOOKED = (
    "def checkpoint_by_hooks(block, x):\n"
    "    rng_state = torch.get_rng_state()\n"
    "    recomputed, saves = [], []\n\n"
    "    def pack(t):\n"
    "{pack}"
    "    def unpack(position):\n"
    "{unpack}"
    "    with {forward}:\n"
    "        return block(x)\n"
)
PACK_POSITION = "        saves.append(1)\n        return len(saves) - 1\n\n"


def recompute(again="x.detach().requires_grad_(x.requires_grad)", grad_mode=True,
              restore="torch.set_rng_state(rng_state)", fork=True, every_time=False,
              hand_out="recomputed[position]"):
    """The unpack of Exercise 3's answer, with one part changed (``restore`` None: the
    random state not restored)."""
    lines = []
    if not every_time:
        lines.append("        if not recomputed:")
    pad = "            " if not every_time else "        "
    if every_time:
        lines.append(pad + "recomputed.clear()")
    contexts = (["torch.random.fork_rng()"] if fork else []) + (
        ["torch.enable_grad()"] if grad_mode else [])
    lines.append(pad + f"with {', '.join(contexts)}:")
    if restore:
        lines.append(pad + f"    {restore}")
    lines.append(pad + "    with saved_tensors_hooks(lambda t: recomputed.append(t) or t, "
                       "lambda t: t):")
    lines.append(pad + f"        block({again})")
    lines.append(f"        return {hand_out}")
    return "\n".join(lines) + "\n\n"


def hooked(pack=PACK_POSITION, forward="saved_tensors_hooks(pack, unpack)", **unpack):
    return HOOKED.format(pack=pack, unpack=recompute(**unpack), forward=forward)


def leaky(default_argument):
    """Exercise 3's answer with its list of recomputed tensors made once for every call: as
    a default argument, or at module level."""
    source = hooked().replace("    recomputed, saves = [], []\n", "    saves = []\n")
    if default_argument:
        return source.replace("(block, x):", "(block, x, recomputed=[]):")
    return "recomputed = []\n\n\n" + source


FORMULA = "def bytes_formula(batch, widths, activation):\n{}"
TBPTT = (
    "def truncation_error(W, xs, k):\n"
    "    def gradient(every, after=False):\n"
    "        W_leaf = W.clone().requires_grad_()\n"
    "        h, loss = torch.zeros(W.shape[0], dtype=W.dtype), 0\n"
    "        for t, x_t in enumerate(xs):\n"
    "            if every and not after and t % every == 0:\n"
    "                h = h.detach()\n"
    "            h = torch.tanh(W_leaf @ h + x_t)\n"
    "            if every and after and t % every == 0:\n"
    "                h = h.detach()\n"
    "            loss = loss + (h**2).sum()\n"
    "        loss.backward()\n"
    "        return W_leaf.grad\n\n"
    "{}"
)

# The start of a plan of one's own: what each block keeps inside, and the plain total.
KEPT_INSIDE = ("def choose_checkpoints(blocks, x):\n"
               "    h, inside = x, []\n"
               "    for block in blocks:\n"
               "        h, nbytes = kept_inside(block, h)\n"
               "        inside.append(nbytes)\n"
               "    plain = len(blocks) * x.untyped_storage().nbytes() + sum(inside)\n")


def every_fit(within: str = "<=", then: str = "    return min(fits, key=len)\n") -> str:
    """An answer that tries every choice of blocks, keeps those whose bytes are ``within``
    the budget, and ``then`` picks one of them."""
    return (KEPT_INSIDE +
            "    fits = []\n"
            "    for mask in range(2 ** len(blocks)):\n"
            "        chosen = {i for i in range(len(blocks)) if mask >> i & 1}\n"
            f"        if plain - sum(inside[i] for i in chosen) {within} 0.6 * plain:\n"
            "            fits.append(chosen)\n" + then)


CHEAPEST = "min(fits, key=lambda c: sum(multiply_adds(blocks[i]) for i in c))"


WRONG = {
    "l16-predict-recompute": [
        ("runs_guess = 1\n", "not quite"),  # nothing recomputed
        ("runs_guess = 9\n", "not quite"),  # once per block
    ],
    "l16-predict-sigmoid": [
        ('saves_more = "sigmoid"\n', "not quite"),
        ('saves_more = "the same"\n', "not one of the choices"),
    ],
    "l16-bytes-formula": [
        # Elements counted instead of bytes.
        (FORMULA.format("    k = 2 if activation == 'gelu' else 1\n"
                        "    return batch * (widths[0] + k * sum(widths[1:-1]))\n"),
         "elements, not bytes"),
        # The input batch left out: it needs no gradient, so it seemed not to count.
        (FORMULA.format("    k = 2 if activation == 'gelu' else 1\n"
                        "    return 4 * batch * k * sum(widths[1:-1])\n"),
         "input batch is missing"),
        # Each hidden layer twice: the activation's output and the next layer's input.
        (FORMULA.format("    return 4 * batch * (widths[0] + 2 * sum(widths[1:-1]))\n"),
         "counted twice"),
        # GELU taken to keep its output like the others.
        (FORMULA.format("    return 4 * batch * (widths[0] + sum(widths[1:-1]))\n"),
         "GELU's input is missing"),
        # The network's output counted too.
        (FORMULA.format("    k = 2 if activation == 'gelu' else 1\n"
                        "    return 4 * batch * (widths[0] + k * sum(widths[1:-1]) + widths[-1])\n"),
         "output is counted"),
        # One example's bytes.
        (FORMULA.format("    k = 2 if activation == 'gelu' else 1\n"
                        "    return 4 * (widths[0] + k * sum(widths[1:-1]))\n"),
         "multiply by the batch size"),
        # ReLU taken to keep a 1-byte bool mask, not its float32 output.
        (FORMULA.format("    per = {'gelu': 8, 'relu': 1}.get(activation, 4)\n"
                        "    return batch * (4 * widths[0] + per * sum(widths[1:-1]))\n"),
         "1-byte mask"),
        # GELU's factor 2 applied to the input batch too.
        (FORMULA.format("    k = 2 if activation == 'gelu' else 1\n"
                        "    return 4 * batch * k * sum(widths[:-1])\n"),
         "applied to the input batch too"),
        # The lesson's MLP, hard-coded.
        (FORMULA.format("    return 3840\n"), "hard-coded"),
    ],
    "l16-checkpoint-by-hooks": [
        # pack keeps the tensor itself: nothing is saved.
        (hooked(pack="        saves.append(t)\n        return t\n\n"), "still in memory"),
        # pack keeps a copy.
        (hooked(pack="        return t.detach().clone()\n\n"), "still in memory"),
        # The block run again at every unpack.
        (hooked(every_time=True), "times during backward"),
        # The recomputation in backward's grad mode: it records nothing.
        (hooked(grad_mode=False), "grad mode off"),
        # The random state not restored: a new dropout mask.
        (hooked(restore=None), "new mask"),
        # Reseeded with torch.initial_seed(), not the saved state: a new mask unless the
        # call came right after torch.manual_seed.
        (hooked(restore="torch.manual_seed(torch.initial_seed())"), "new mask"),
        # The saved state restored outside fork_rng: backward rewinds the global generator.
        (hooked(fork=False), "backward set the global random state back"),
        # The forward pass inside fork_rng too: the generator never moves on, and every call
        # draws the same mask.
        (hooked(forward="torch.random.fork_rng(), saved_tensors_hooks(pack, unpack)"),
         "draw this same mask again"),
        # The recomputed tensors in a default argument: the next call finds the last one's.
        # Told on a second call inside the check, or on its first when an earlier run of
        # the check left them there.
        (leaky(default_argument=True), "a list given as a default argument"),
        # ... or in a list at module level.
        (leaky(default_argument=False), "start from nothing of an earlier one"),
        # The recomputation's input never requires grad: its saves no longer line up.
        (hooked(again="x.detach()"), "require grad as x does"),
        # The tensors handed out in the order backward asks, not by the pack's position.
        (hooked(pack="        return None\n\n", hand_out="recomputed.pop()"), "its own order"),
        # No hooks at all: the plain block.
        ("def checkpoint_by_hooks(block, x):\n    return block(x)\n", "still in memory"),
        # The output detached: nothing to backpropagate through.
        ("def checkpoint_by_hooks(block, x):\n"
         "    with saved_tensors_hooks(lambda t: None, lambda p: None):\n"
         "        return block(x).detach()\n", "the output does not require grad"),
    ],
    "l16-checkpoint": [
        # No checkpoint at all.
        ("def choose_checkpoints(blocks, x):\n    return set()\n", "over the budget"),
        # Every block: within the budget, but every block is recomputed.
        ("def choose_checkpoints(blocks, x):\n    return set(range(len(blocks)))\n", "would do"),
        # The blocks that keep the most first, whatever their cost to recompute (on seed 0
        # that is the fewest blocks that fit, which the message then says).
        (
            KEPT_INSIDE +
            "    chosen, kept = set(), plain\n"
            "    for i in sorted(range(len(blocks)), key=lambda i: inside[i], reverse=True):\n"
            "        if kept <= 0.6 * plain:\n"
            "            break\n"
            "        chosen.add(i)\n"
            "        kept -= inside[i]\n"
            "    return chosen\n",
            "You took the fewest blocks that fit",
        ),
        # Section 3's ranking as the plan: the most bytes per multiply-add first, until the
        # budget is met. Its last block overshoots what the budget still needs.
        (
            KEPT_INSIDE +
            "    ratio = [inside[i] / multiply_adds(b) for i, b in enumerate(blocks)]\n"
            "    chosen, kept = set(), plain\n"
            "    for i in sorted(range(len(blocks)), key=lambda i: ratio[i], reverse=True):\n"
            "        if kept <= 0.6 * plain:\n"
            "            break\n"
            "        chosen.add(i)\n"
            "        kept -= inside[i]\n"
            "    return chosen\n",
            "more than the budget still needed",
        ),
        # The cost counted in blocks: the fewest blocks that fit the budget.
        (every_fit(), "not the number of blocks"),
        # Only the first block: not enough.
        ("def choose_checkpoints(blocks, x):\n    return {0}\n", "over the budget"),
        # "At most 60 %" read as "below 60 %": the cheapest choice, exactly on the budget, is
        # left out.
        (every_fit("<", f"    return {CHEAPEST}\n"), "lets a choice keep that much"),
        # The right choice as a mask, a True or False per block, not as indices.
        (
            every_fit(then=f"    best = {CHEAPEST}\n"
                           "    return [i in best for i in range(len(blocks))]\n"),
            "got bools",
        ),
    ],
    "l16-tbptt": [
        # Never detached: both gradients are the full one.
        (TBPTT.format("    full, cut = gradient(None), gradient(None)\n"
                      "    return ((cut - full).norm() / full.norm()).item()\n"),
         "never detached"),
        # Detached at every step.
        (TBPTT.format("    full, cut = gradient(None), gradient(1)\n"
                      "    return ((cut - full).norm() / full.norm()).item()\n"),
         "at every step"),
        # Detached after the update: the chunks start one step late.
        (TBPTT.format("    full, cut = gradient(None), gradient(k, after=True)\n"
                      "    return ((cut - full).norm() / full.norm()).item()\n"),
         "after the update"),
        # The absolute error.
        (TBPTT.format("    full, cut = gradient(None), gradient(k)\n"
                      "    return (cut - full).norm().item()\n"),
         "absolute error"),
        # Relative to the truncated gradient.
        (TBPTT.format("    full, cut = gradient(None), gradient(k)\n"
                      "    return ((cut - full).norm() / cut.norm()).item()\n"),
         "truncated gradient's norm"),
        # The gradient difference itself, not a number.
        (TBPTT.format("    return gradient(k) - gradient(None)\n"), "expected one number"),
    ],
}
