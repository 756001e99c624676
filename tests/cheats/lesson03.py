"""Shortcuts for the exercises of 03-build-your-own-autograd.ipynb
(see tests/lessons/test_exercises.py).

Exercise 1's rules are derivatives worked out by the learner, so the shortcuts are the
ways of getting a number for a local derivative without working it out. Exercise 2's
are the ways of getting the logits' gradients without the engine running the learner's
rules. Exercise 3's are the ways of not writing a second sort.
"""

OPS_HEAD = '''def exp(a):
    out = Value(math.exp(a.data), (a,), "exp")

    def rule():
        a.grad += out.data * out.grad

    out.backward_rule = rule
    return out


def power(a, k):
    out = Value(a.data**k, (a,), "power")

    def rule():
        a.grad += k * a.data ** (k - 1) * out.grad

    out.backward_rule = rule
    return out


'''
LOG = '''def log(a):
    out = Value(math.log(a.data), (a,), "log")

    def rule():
{}

    out.backward_rule = rule
    return out
'''

# Exercise 2 built as the solution builds it; the last line replaces the loss's own rule.
CE = (
    "def cross_entropy(logits, target):\n"
    "    counts = [exp(z) for z in logits]\n"
    "    total = counts[0] + counts[1] + counts[2]\n"
    "    loss = -log(counts[target] * power(total, -1))\n\n"
    "    def rule():\n"
    "        for z in loss_parents(loss):\n"
    "            z.grad = 0.0  # nothing flows down the graph\n"
    "{}\n\n"
    "    loss.backward_rule = rule\n"
    "    return loss\n\n\n"
    "def loss_parents(loss):\n"
    "    return list(loss.parents)\n"
)

CHEATS = {
    "l03-ops": [
        # Central finite differences of log at a.
        (
            OPS_HEAD + LOG.format(
                "        h = 1e-6\n"
                "        slope = (math.log(a.data + h) - math.log(a.data - h)) / (2 * h)\n"
                "        a.grad += slope * out.grad"
            ),
            "numerical estimate",
        ),
        # The package's finite differences.
        (
            OPS_HEAD + LOG.format(
                "        (slope,) = bl.numerical_grad(torch.log, torch.tensor(a.data))\n"
                "        a.grad += slope.item() * out.grad"
            ),
            "numerical_grad",
        ),
        # torch's autograd on a one-element tensor.
        (
            OPS_HEAD + LOG.format(
                "        t = torch.tensor(a.data, dtype=torch.float64, requires_grad=True)\n"
                "        torch.log(t).backward()\n"
                "        a.grad += t.grad.item() * out.grad"
            ),
            "Tensor.backward",
        ),
        # ... with grad mode switched back on first.
        (
            OPS_HEAD + LOG.format(
                "        with torch.enable_grad():\n"
                "            t = torch.tensor(a.data, dtype=torch.float64, requires_grad=True)\n"
                "            (g,) = torch.autograd.grad(torch.log(t), t)\n"
                "        a.grad += g.item() * out.grad"
            ),
            "enable_grad",
        ),
        # A table of log's derivative at the visible check's inputs (seeds 0 to 3 of its
        # 4 trials): right there, a KeyError on the hidden check's new inputs.
        (
            "from backproplab.course.exercises.lesson03.engine import op_inputs\n\n"
            "TABLE = {}\n"
            "for k in range(4):\n"
            "    x, w, b, _ = op_inputs(torch.Generator().manual_seed(k))\n"
            "    u = (x * w + b).item()\n"
            "    TABLE[round(u, 9)] = 1 / u\n"
            "\n\n"
            + OPS_HEAD + LOG.format("        a.grad += TABLE[round(a.data, 9)] * out.grad"),
            "raised KeyError",
        ),
    ],
    "l03-softmax-ce": [
        # torch's F.cross_entropy differentiated by autograd, its gradient put in the logits.
        (
            CE.format(
                "        with torch.enable_grad():\n"
                "            z = torch.tensor([v.data for v in logits], dtype=torch.float64,\n"
                "                             requires_grad=True)\n"
                "            loss_t = torch.nn.functional.cross_entropy(\n"
                "                z.unsqueeze(0), torch.tensor([target]))\n"
                "            (g,) = torch.autograd.grad(loss_t, z)\n"
                "        for v, gi in zip(logits, g.tolist()):\n"
                "            v.grad += gi * loss.grad"
            ),
            "enable_grad",
        ),
        # Finite differences of the loss, one logit at a time.
        (
            CE.format(
                "        def f(zs):\n"
                "            m = sum(math.exp(v) for v in zs)\n"
                "            return -math.log(math.exp(zs[target]) / m)\n"
                "        zs, h = [v.data for v in logits], 1e-6\n"
                "        for i, v in enumerate(logits):\n"
                "            up = [z + h * (j == i) for j, z in enumerate(zs)]\n"
                "            down = [z - h * (j == i) for j, z in enumerate(zs)]\n"
                "            v.grad += (f(up) - f(down)) / (2 * h) * loss.grad"
            ),
            "numerical estimate",
        ),
        # The package's finite differences of F.cross_entropy.
        (
            CE.format(
                "        z = torch.tensor([v.data for v in logits], dtype=torch.float64)\n"
                "        (g,) = bl.numerical_grad(lambda t: torch.nn.functional.cross_entropy(\n"
                "            t.unsqueeze(0), torch.tensor([target])), z)\n"
                "        for v, gi in zip(logits, g.tolist()):\n"
                "            v.grad += gi * loss.grad"
            ),
            "numerical_grad",
        ),
        # torch's own backward kernel for log_softmax.
        (
            CE.format(
                "        z = torch.tensor([[v.data for v in logits]], dtype=torch.float64)\n"
                "        up = torch.zeros_like(z)\n"
                "        up[0, target] = -1.0\n"
                "        g = torch.ops.aten._log_softmax_backward_data(\n"
                "            up, torch.log_softmax(z, 1), 1, torch.float64)\n"
                "        for v, gi in zip(logits, g[0].tolist()):\n"
                "            v.grad += gi * loss.grad"
            ),
            "backward kernels",
        ),
    ],
    "l03-paths": [
        # The count is the leaf's gradient when every local derivative is 1: torch's
        # backward over a copy of the graph made of additions (grad mode switched back on,
        # since the check runs the answer with it off).
        (
            "def count_paths(root, leaf):\n"
            "    made = {}\n"
            "    with torch.enable_grad():\n"
            "        for node in topo_order(root):\n"
            "            made[id(node)] = (sum(made[id(p)] for p in node.parents) if node.parents\n"
            "                              else torch.zeros((), dtype=torch.float64,\n"
            "                                               requires_grad=True))\n"
            "        made[id(root)].backward()\n"
            "    return int(made[id(leaf)].grad)\n",
            "enable_grad",
        ),
        # The same as a function of the leaf's value, differentiated by torch.func.grad.
        (
            "def count_paths(root, leaf):\n"
            "    order = topo_order(root)\n\n"
            "    def total(x):\n"
            "        made = {}\n"
            "        for node in order:\n"
            "            made[id(node)] = (sum(made[id(p)] for p in node.parents) if node.parents\n"
            "                              else x if node is leaf else torch.zeros(()))\n"
            "        return made[id(root)]\n\n"
            "    return int(torch.func.grad(total)(torch.zeros(())))\n",
            "torch.func.grad",
        ),
    ],
}
