"""Shortcuts for the exercises of 25-compiled-backward.ipynb (tests/lessons/test_exercises.py).

The min-cut backward is checked like a gradient by hand, so its shortcuts are the ways of
getting a gradient without deriving it: finite differences on the loss, torch.func, the
compiled backward itself (which needs a backward pass), and a table of the visible check's
inputs. The FLOP compiler's: assuming the backward costs twice the forward instead of reading
its graph.
"""

from cheats.estimates import lesson_plans, with_disguised

CHEATS = {
    "l25-min-cut-backward": [
        # Central differences on the loss, rebuilt from the transposes.
        (
            "def min_cut_backward(y, x_t, w_t, g):\n"
            "    x, w = x_t.T.clone(), w_t.T.clone()\n"
            "    def loss(a, b):\n"
            "        return torch.cos(a @ b).pow(2).mean()\n"
            "    grads = []\n"
            "    for t in (x, w):\n"
            "        d = torch.zeros_like(t)\n"
            "        for i in range(t.numel()):\n"
            "            e = torch.zeros_like(t).flatten()\n"
            "            e[i] = 1e-6\n"
            "            e = e.reshape(t.shape)\n"
            "            plus = loss(x + e, w) if t is x else loss(x, w + e)\n"
            "            minus = loss(x - e, w) if t is x else loss(x, w - e)\n"
            "            d.view(-1)[i] = (plus - minus) / 2e-6\n"
            "        grads.append(g * d)\n"
            "    return tuple(grads)\n",
            "finite differences",
        ),
        # torch.func on the loss.
        (
            "def min_cut_backward(y, x_t, w_t, g):\n"
            "    loss = lambda x, w: torch.cos(x @ w).pow(2).mean() * g\n"
            "    return torch.func.grad(loss, argnums=(0, 1))(x_t.T, w_t.T)\n",
            "by hand",
        ),
        # The compiled min-cut backward itself: it comes only out of a backward pass.
        (
            "def min_cut_backward(y, x_t, w_t, g):\n"
            "    graphs = {}\n"
            "    def keep(gm, example_inputs):\n"
            "        graphs[len(graphs)] = gm\n"
            "        return make_boxed_func(gm.forward)\n"
            "    compiled = aot_function(lambda a, b: torch.cos(a @ b).pow(2).mean(), keep, keep,\n"
            "                            partition_fn=min_cut_rematerialization_partition)\n"
            "    with torch.enable_grad():\n"
            "        x = x_t.T.clone().requires_grad_()\n"
            "        w = w_t.T.clone().requires_grad_()\n"
            "        compiled(x, w).backward()\n"
            "    return graphs[1](y, x_t, w_t, g)\n",
            "by hand",
        ),
        # A table of the visible check's answers: right there, a KeyError on new inputs.
        (
            "TABLE = {}\n"
            "for seed in range(3):  # the visible check's seeds, its input code copied\n"
            "    gen = torch.Generator().manual_seed(seed)\n"
            "    n, k, m = (int(s) for s in torch.randint(2, 9, (3,), generator=gen))\n"
            "    x = torch.randn(n, k, generator=gen, dtype=torch.float64).requires_grad_()\n"
            "    w = torch.randn(k, m, generator=gen, dtype=torch.float64).requires_grad_()\n"
            "    g = torch.randn((), generator=gen, dtype=torch.float64)\n"
            "    loss = torch.cos(x @ w).pow(2).mean()\n"
            "    TABLE[tuple((x @ w).flatten().tolist())] = torch.autograd.grad(\n"
            "        loss, (x, w), grad_outputs=g)\n\n\n"
            "def min_cut_backward(y, x_t, w_t, g):\n"
            "    return TABLE[tuple(y.flatten().tolist())]\n",
            "raised KeyError",
        ),
    ],
    "l25-sac-policy": [
        # the visible check's decisions, looked up by the result's shape: right there, a
        # product of a shape the hidden check draws falls through to recompute
        (
            "import torch\n\n"
            "from backproplab.course.exercises.lesson25.policy import _RIGHT, policy_inputs\n\n"
            "SEEN = {}\n"
            "for case in policy_inputs(torch.Generator().manual_seed(0))['cases']:\n"
            "    SEEN[case['ratio']] = _RIGHT(case['ratio'])\n\n\n"
            "def policy_for(ratio):\n"
            "    return SEEN[ratio]\n",
            "backproplab.course",
        ),
        # the grader's own policy, taken from the package
        (
            "from backproplab.course.exercises.lesson25 import policy as graded\n\n"
            "policy_for = graded._RIGHT\n",
            "backproplab.course",
        ),
    ],
    "l25-flop-compiler": [
        # The backward assumed to cost twice the forward, not read from its graph.
        (
            "def make_flop_compiler():\n"
            "    counts = []\n"
            "    products = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default,\n"
            "                torch.ops.aten.bmm.default}\n\n"
            "    def compiler(gm, example_inputs):\n"
            "        if len(counts) % 2:\n"
            "            counts.append(2 * counts[-1])\n"
            "        else:\n"
            "            counts.append(sum(2 * n.meta['val'].numel()\n"
            "                              * n.args[-2].meta['val'].shape[-1]\n"
            "                              for n in gm.graph.nodes if n.target in products))\n"
            "        return make_boxed_func(gm.forward)\n\n"
            "    return compiler, counts\n",
            "the backward graph",
        ),
    ],
}

# Finite differences in disguise (tests/cheats/estimates.py): one family per exercise.
CHEATS = with_disguised(CHEATS, lesson_plans("25"))
