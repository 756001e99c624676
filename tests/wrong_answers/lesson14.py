"""Plausible wrong answers for the exercise and prediction of 14-recording-on-and-off.ipynb."""

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


WRONG = {
    "l14-predict-inplace": [
        ('failing_cell = "add"\n', "not quite"),
    ],
    "l14-windows": [
        # Section 5's chunks: detached at every update, so k2 plays no part.
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
        # Updates over range(k1, len(xs), k1): the one on the last step is lost.
        (windows(ends="range(k1, len(xs), k1)"), "gradients; expected"),
        # Only the loss of the update's own step.
        (windows(losses="1"), "only the last step's loss"),
        # The gradients stacked into one tensor.
        (windows().replace("return grads", "return torch.stack(grads)"), "expected a list"),
    ],
}
