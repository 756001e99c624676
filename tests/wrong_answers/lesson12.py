"""Plausible wrong answers for the exercises of 12-what-backward-keeps.ipynb."""

COUNTER = (
    "def make_dtype_counter():\n"
    "    totals = {{}}\n\n"
    "    def pack(t):\n"
    "{}\n\n"
    "    def unpack(t):\n"
    "        return t\n\n"
    "    return pack, unpack, totals\n"
)
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

WRONG = {
    "l12-predict-recompute": [
        ("runs_guess = 1\n", "not quite"),  # nothing recomputed
        ("runs_guess = 9\n", "not quite"),  # once per block
    ],
    "l12-predict-sigmoid": [
        ('saves_more = "sigmoid"\n', "not quite"),
        ('saves_more = "the same"\n', "not one of the choices"),
    ],
    "l12-bytes-formula": [
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
        # The lesson's MLP, hard-coded.
        (FORMULA.format("    return 3840\n"), "hard-coded"),
    ],
    "l12-dtype-counter": [
        # Elements counted instead of bytes.
        (COUNTER.format("        totals[t.dtype] = totals.get(t.dtype, 0) + t.numel()\n        return t"),
         "counted elements, not bytes"),
        # pack forgets to hand the tensor on: backward has nothing to unpack.
        (COUNTER.format("        totals[t.dtype] = totals.get(t.dtype, 0) + t.numel() * t.element_size()"),
         "backward failed with your hooks"),
        # Everything lumped under one key.
        (COUNTER.format("        totals[torch.float32] = totals.get(torch.float32, 0) + t.numel() * t.element_size()\n        return t"),
         "dtypes counted"),
        # Each block of memory once, as section 1's pack hook counted: not every save.
        (
            "def make_dtype_counter():\n"
            "    seen, totals = {}, {}\n\n"
            "    def pack(t):\n"
            "        seen[t.untyped_storage().data_ptr()] = (t.dtype, t.numel() * t.element_size())\n"
            "        totals.clear()\n"
            "        for dtype, nbytes in seen.values():\n"
            "            totals[dtype] = totals.get(dtype, 0) + nbytes\n"
            "        return t\n\n"
            "    return pack, lambda t: t, totals\n",
            "once per save",
        ),
    ],
    "l12-checkpoint": [
        # No checkpoint at all.
        ("def choose_checkpoints(blocks, x):\n    return set()\n", "over the budget"),
        # Every block: within the budget, but every block is recomputed.
        ("def choose_checkpoints(blocks, x):\n    return set(range(len(blocks)))\n", "would do"),
        # The blocks that keep the most first, whatever their cost to recompute.
        (
            "def choose_checkpoints(blocks, x):\n"
            "    h, inside = x, []\n"
            "    for block in blocks:\n"
            "        h, nbytes = kept_inside(block, h)\n"
            "        inside.append(nbytes)\n"
            "    plain = len(blocks) * x.untyped_storage().nbytes() + sum(inside)\n"
            "    chosen, kept = set(), plain\n"
            "    for i in sorted(range(len(blocks)), key=lambda i: inside[i], reverse=True):\n"
            "        if kept <= 0.6 * plain:\n"
            "            break\n"
            "        chosen.add(i)\n"
            "        kept -= inside[i]\n"
            "    return chosen\n",
            "would do",
        ),
        # Only the first block: not enough.
        ("def choose_checkpoints(blocks, x):\n    return {0}\n", "over the budget"),
    ],
    "l12-tbptt": [
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
