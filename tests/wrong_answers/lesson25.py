"""Plausible wrong answers for the exercises of 25-compiled-backward.ipynb."""

BACKWARD = "def min_cut_backward(y, x_t, w_t, g):\n{}"
COMPILER = (
    "def make_flop_compiler():\n"
    "    counts = []\n"
    "    products = {{torch.ops.aten.mm.default, torch.ops.aten.addmm.default,\n"
    "                torch.ops.aten.bmm.default}}\n\n"
    "    def compiler(gm, example_inputs):\n"
    "{}\n"
    "    return compiler, counts\n"
)
# Exercise 4's solution, with lines to change.
POLICY = (
    "def policy_for(ratio):\n"
    "    products = {{{products}}}\n\n"
    "    def policy(ctx, op, *args, **kwargs):\n"
    "        if op in products:\n"
    "            out = ctx.op_output\n"
    "            flops = {flops}\n"
    "            if {worth}:\n"
    "                return CheckpointPolicy.MUST_SAVE\n"
    "        return CheckpointPolicy.{others}\n\n"
    "    return policy\n"
)
ALL_PRODUCTS = ("torch.ops.aten.mm.default, torch.ops.aten.addmm.default, "
                "torch.ops.aten.bmm.default")


def policy(products=ALL_PRODUCTS, flops="2 * out.numel() * args[-2].shape[-1]",
           worth="flops > ratio * out.nbytes", others="PREFER_RECOMPUTE"):
    return POLICY.format(products=products, flops=flops, worth=worth, others=others)


FROM_GRAPH = (
    "        total = 0\n"
    "        for node in gm.graph.nodes:\n"
    "            if node.target in products:\n"
    "                inner = node.args[-2].meta['val'].shape[-1]\n"
    "                total += {} * node.meta['val'].numel() * inner\n"
)

WRONG = {
    "l25-predict-min-cut": [
        ("min_cut_bytes = 8192\n", "not quite"),  # what the default partitioner keeps
        ("min_cut_bytes = 14336\n", "not quite"),  # x and w counted as well
    ],
    "l25-predict-branch": [
        ("backward_graphs = 2\n", "not quite"),  # the second branch forgotten
        ("backward_graphs = 4\n", "not quite"),  # nothing reused by the second call
    ],
    "l25-predict-break": [
        ('breaking_change = "d"\n', "not quite"),  # an if on the number of dimensions
        ('breaking_change = "e"\n', "not one of the choices"),
    ],
    "l25-min-cut-backward": [
        # The mean's 1/N forgotten.
        (BACKWARD.format("    dy = -2 * g * torch.cos(y) * torch.sin(y)\n"
                         "    return dy @ w_t, x_t @ dy\n"), "1/N is missing"),
        # The mean taken over the rows of y, not over all its entries.
        (BACKWARD.format("    dy = -2 * g * torch.cos(y) * torch.sin(y) / y.shape[0]\n"
                         "    return dy @ w_t, x_t @ dy\n"), "not over its rows"),
        # The mean's N read from x (n * k entries), not from y (n * m): right only if k == m.
        (BACKWARD.format("    dy = -2 * g * torch.cos(y) * torch.sin(y) / x_t.numel()\n"
                         "    return dy @ w_t, x_t @ dy\n"), "no single common mistake"),
        # The incoming gradient left out: right only when g = 1.
        (BACKWARD.format("    dy = -2 * torch.cos(y) * torch.sin(y) / y.numel()\n"
                         "    return dy @ w_t, x_t @ dy\n"), "incoming gradient g is missing"),
        # cos' derivative taken as +sin.
        (BACKWARD.format("    dy = 2 * g * torch.cos(y) * torch.sin(y) / y.numel()\n"
                         "    return dy @ w_t, x_t @ dy\n"), "sign is flipped"),
        # The square's 2 cos(y) forgotten.
        (BACKWARD.format("    dy = -g * torch.sin(y) / y.numel()\n"
                         "    return dy @ w_t, x_t @ dy\n"), "square's derivative is missing"),
        # The chain stopped at the square.
        (BACKWARD.format("    dy = 2 * g * torch.cos(y) / y.numel()\n"
                         "    return dy @ w_t, x_t @ dy\n"), "cos' derivative is missing"),
        # The two gradients swapped.
        (BACKWARD.format("    dy = -2 * g * torch.cos(y) * torch.sin(y) / y.numel()\n"
                         "    return x_t @ dy, dy @ w_t\n"), "wrong order"),
        # Zeros of the right shapes: the same number whatever the inputs.
        (BACKWARD.format("    return torch.zeros_like(x_t.T), torch.zeros_like(w_t.T)\n"),
         "hard-coded"),
        # Autograd on the loss rebuilt from the transposes.
        (BACKWARD.format("    x, w = x_t.T.clone().requires_grad_(), w_t.T.clone().requires_grad_()\n"
                         "    loss = torch.cos(x @ w).pow(2).mean() * g\n"
                         "    return torch.autograd.grad(loss, (x, w))\n"), "by hand"),
        # Section 2's function, copied: its backward, not this one's.
        (BACKWARD.format("    dy = -g * torch.sin(torch.sin(y)) * torch.cos(y)\n"
                         "    return dy @ w_t, x_t @ dy\n"), "mismatch"),
    ],
    "l25-sac-policy": [
        # addmm's inner size read from the bias
        (policy(flops="2 * out.numel() * args[0].shape[-1]"), "first argument, the bias"),
        # bmm forgotten
        (policy(products="torch.ops.aten.mm.default, torch.ops.aten.addmm.default"),
         "bmm was never kept"),
        # bmm counted without its batch: (m, n) read from the result's last two sizes
        (policy(flops="2 * out.shape[-2] * out.shape[-1] * args[-2].shape[-1]"),
         "without the batch"),
        # numbers, not bytes
        (policy(worth="flops > ratio * out.numel()"), "bytes were counted as numbers"),
        # 4 bytes a number, float32's, whatever the dtype
        (policy(worth="flops > ratio * out.numel() * 4"), "4 a number"),
        # a product exactly at the ratio kept too
        (policy(worth="flops >= ratio * out.nbytes"), "exactly at the ratio"),
        # multiply-adds, not FLOPs
        (policy(flops="out.numel() * args[-2].shape[-1]"), "counted as multiply-adds"),
        # section 5's policy: every product kept
        (policy(worth="True"), "every product was kept"),
        # the comparison turned round
        (policy(worth="flops < ratio * out.nbytes"), "wrong way round"),
        # everything else kept too
        (policy(others="MUST_SAVE"), "the element-wise ones too"),
        # the inner size taken from the result (its last size, n) instead of the factor's
        (policy(flops="2 * out.numel() * out.shape[-1]"), "should keep"),
        # the policy itself returned, not a function that makes it
        ("def policy_for(ctx, op, *args, **kwargs):\n"
         "    return CheckpointPolicy.PREFER_RECOMPUTE\n", "raised TypeError"),
        # the ratio forgotten: a function that returns a decision
        ("def policy_for(ratio):\n    return CheckpointPolicy.MUST_SAVE\n",
         "it must return a policy"),
    ],
    "l25-flop-compiler": [
        # Multiply-adds, not FLOPs.
        (COMPILER.format(FROM_GRAPH.format(1) + "        counts.append(total)\n"
                         "        return make_boxed_func(gm.forward)\n"), "multiply-adds"),
        # Only mm: a Linear's addmm and torch.bmm are products too.
        (COMPILER.format(FROM_GRAPH.format(2).replace(
            "node.target in products", "node.target == torch.ops.aten.mm.default")
            + "        counts.append(total)\n        return make_boxed_func(gm.forward)\n"),
         "Exactly the FLOPs of its"),
        # The number of products, not their FLOPs.
        (COMPILER.format("        counts.append(sum(n.target in products for n in gm.graph.nodes))\n"
                         "        return make_boxed_func(gm.forward)\n"), "FlopCounterMode measured"),
        # Measured by running the graph on the example inputs.
        (COMPILER.format("        with FlopCounterMode(display=False) as counter:\n"
                         "            gm(*example_inputs)\n"
                         "        counts.append(counter.get_total_flops())\n"
                         "        return make_boxed_func(gm.forward)\n"),
         "ran the graph while compiling"),
        # Counted, but never appended.
        (COMPILER.format(FROM_GRAPH.format(2) + "        return make_boxed_func(gm.forward)\n"),
         "0 numbers were appended"),
        # A callable that does not run the graph it was handed.
        (COMPILER.format(FROM_GRAPH.format(2) + "        counts.append(total)\n"
                         "        return make_boxed_func(lambda *args: [a * 0 if a is not None "
                         "else a for a in gm(*args)])\n"), "gradients changed"),
    ],
}
