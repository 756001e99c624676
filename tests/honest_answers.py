"""Honest answers in the many styles a learner writes them, each right.

Every one must pass its check in the kernel (feedback never refuses honest code)
and get every point from ``backproplab grade`` (tests/course/test_grade.py).
Entries: ``Honest(key, style, source, earlier, later)``: ``source`` replaces the
solution cell; ``earlier``, when given, is a cell of the learner's own put just above it
(helpers defined in an earlier cell); ``later``, a cell of theirs put between it and
the check (a scratch cell that imports torch again, say).
"""

from __future__ import annotations

from typing import NamedTuple


class Honest(NamedTuple):
    key: str
    style: str
    source: str
    earlier: str | None = None
    later: str | None = None


# A scratch cell between an answer and its check: the latest ``import torch`` is below
# the answer, so what the answer reads while its cell runs must come from above it.
SCRATCH = "import torch\n\nprint(torch.__version__)\n"
# Lesson 03's topo_order (section 3), as the notebook defines it above its exercises: the
# kernel test runs an answer without the lesson's cells, so one that uses it brings it along.
LESSON_03_SORT = (
    "def topo_order(root):\n"
    "    order, seen = [], set()\n"
    "    stack = [(root, False)]\n"
    "    while stack:\n"
    "        node, parents_done = stack.pop()\n"
    "        if parents_done:\n"
    "            order.append(node)\n"
    "        elif id(node) not in seen:\n"
    "            seen.add(id(node))\n"
    "            stack.append((node, True))\n"
    "            stack.extend((p, False) for p in node.parents if id(p) not in seen)\n"
    "    return order\n"
)


HONEST = [
    # ---------------------------------------------------------------- lesson 02
    Honest("l02-cubic", "other names", "def cubic_slope(t):\n    return 3 * t * t - 8 * t\n"),
    Honest("l02-cubic", "a lambda", "cubic_slope = lambda x: x * (3 * x - 8)\n"),
    Honest("l02-cubic", "torch.no_grad", (
        "def cubic_slope(x):\n    with torch.no_grad():\n        slope = 3 * x.pow(2)\n"
        "        slope -= 8 * x\n    return slope\n")),
    Honest("l02-cubic", "a helper in an earlier cell", "def cubic_slope(x):\n"
           "    return derivative_of_power(x, 3) - 4 * derivative_of_power(x, 2)\n",
           "def derivative_of_power(x, n):\n    return n * x ** (n - 1)\n"),
    Honest("l02-cubic", "a class with __call__", (
        "class Polynomial:\n    def __init__(self, coefficients):\n"
        "        self.coefficients = coefficients\n\n    def __call__(self, x):\n"
        "        return sum(k * c * x ** (k - 1) for k, c in enumerate(self.coefficients)"
        " if k)\n\n\ncubic_slope = Polynomial([5, 0, -4, 1])\n")),
    Honest("l02-cubic", "a bound method", (
        "class Slopes:\n    def cubic(self, x):\n        return 3 * x**2 - 8 * x\n\n\n"
        "cubic_slope = Slopes().cubic\n")),
    Honest("l02-chain", "a residual attribute", (
        "class Layer:\n    def __init__(self):\n        self.residual = None\n\n"
        "    def grads(self, x, w, b):\n        self.residual = 1 - torch.tanh(w * x + b) ** 2\n"
        "        return self.residual * w, self.residual * x, self.residual\n\n\n"
        "def tanh_grads(x, w, b):\n    return Layer().grads(x, w, b)\n")),
    Honest("l02-chain", "in-place ops", (
        "def tanh_grads(x, w, b):\n    outer = torch.tanh(w * x + b)\n    outer.pow_(2)\n"
        "    outer.neg_().add_(1)\n    return outer * w, outer * x, outer.clone()\n")),
    Honest("l02-chain", "cosh", (
        "def tanh_grads(x, w, b):\n    outer = 1 / torch.cosh(w * x + b) ** 2\n"
        "    return outer * w, outer * x, outer\n")),
    Honest("l02-shared", "a dict of partials", (
        "def shared_grads(x, y, z):\n    u = x * y\n"
        "    d = {'u': torch.sin(u) + (u - z) * torch.cos(u)}\n"
        "    return d['u'] * y, d['u'] * x, -torch.sin(u)\n")),
    Honest("l02-cubic", "a decorator that reads torch, torch imported again below", (
        "@torch.no_grad()\ndef cubic_slope(x):\n    return 3 * x**2 - 8 * x\n"), later=SCRATCH),
    Honest("l02-cubic", "a global call counter", (
        "CALLS = 0\n\n\ndef cubic_slope(x):\n    global CALLS\n    CALLS += 1\n"
        "    return 3 * x**2 - 8 * x\n")),
    Honest("l02-cubic", "a table of coefficients filled by a loop in the cell", (
        "SLOPE = {}\nfor power, coefficient in ((3, 1), (2, -4), (0, 5)):\n    if power:\n"
        "        SLOPE[power - 1] = power * coefficient\n\n\ndef cubic_slope(x):\n"
        "    return sum(c * x**k for k, c in SLOPE.items())\n")),
    Honest("l02-cubic", "a help line left at the end of the cell", (
        "def cubic_slope(x):\n    return 3 * x**2 - 8 * x\n\n\ncubic_slope?\n")),
    Honest("l02-cubic", "defined inside if True:", (
        "if True:\n    def cubic_slope(x):\n        return 3 * x**2 - 8 * x\n")),
    Honest("l02-chain", "device boilerplate", (
        "def tanh_grads(x, w, b):\n"
        "    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
        "    x, w, b = x.to(device), w.to(device), b.to(device)\n"
        "    outer = 1 - torch.tanh(w * x + b) ** 2\n"
        "    return (outer * w).cpu(), (outer * x).cpu(), outer.cpu()\n")),
    Honest("l02-shared", "set_grad_enabled(False) and a detach when asked", (
        "def shared_grads(x, y, z):\n    if x.requires_grad:\n        x = x.detach()\n"
        "    with torch.set_grad_enabled(False):\n        u = x * y\n"
        "        df_du = torch.sin(u) + (u - z) * torch.cos(u)\n"
        "    return df_du * y, df_du * x, -torch.sin(u)\n")),
    Honest("l02-shared", "a warning of its own", (
        "import warnings\n\n\ndef shared_grads(x, y, z):\n    if x.dtype != torch.float64:\n"
        "        warnings.warn('shared_grads: float64 inputs give the exact round-off')\n"
        "    u = x * y\n    df_du = torch.sin(u) + (u - z) * torch.cos(u)\n"
        "    return df_du * y, df_du * x, -torch.sin(u)\n")),
    Honest("l02-rule", "a table of rules, one lambda per node", (
        "RULES = {\n"
        "    'AddBackward0': lambda n, g: [g, g],\n"
        "    'SubBackward0': lambda n, g: [g, -g],\n"
        "    'MulBackward0': lambda n, g: [None if n._saved_other is None else g * n._saved_other,\n"
        "                                  None if n._saved_self is None else g * n._saved_self],\n"
        "    'DivBackward0': lambda n, g: [g / n._saved_other,\n"
        "                                  None if n._saved_self is None\n"
        "                                  else -g * n._saved_self / n._saved_other ** 2],\n"
        "    'SinBackward0': lambda n, g: [g * n._saved_self.cos()],\n"
        "    'ExpBackward0': lambda n, g: [g * n._saved_result],\n"
        "    'PowBackward0': lambda n, g: [g * n._saved_exponent\n"
        "                                  * n._saved_self ** (n._saved_exponent - 1)],\n"
        "    'SqrtBackward0': lambda n, g: [0.5 * g / n._saved_result],\n"
        "    'TanhBackward0': lambda n, g: [g - g * n._saved_result * n._saved_result],\n"
        "}\n\n\n"
        "def node_rule(node, grad):\n"
        "    sent = RULES[node.name()](node, grad)\n"
        "    return [s if fn is not None else None for s, (fn, _) in zip(sent, node.next_functions)]\n")),
    Honest("l02-rule", "match on the name, torch functions", (
        "def node_rule(node, grad):\n"
        "    match node.name():\n"
        "        case 'AddBackward0':\n"
        "            out = [grad, grad]\n"
        "        case 'SubBackward0':\n"
        "            out = [grad, torch.neg(grad)]\n"
        "        case 'MulBackward0':\n"
        "            a, b = node._saved_self, node._saved_other\n"
        "            out = [None if b is None else torch.mul(grad, b),\n"
        "                   None if a is None else torch.mul(grad, a)]\n"
        "        case 'DivBackward0':\n"
        "            a, b = node._saved_self, node._saved_other\n"
        "            out = [torch.div(grad, b),\n"
        "                   None if a is None else -torch.div(torch.mul(grad, a), torch.square(b))]\n"
        "        case 'SinBackward0':\n"
        "            out = [grad * torch.cos(node._saved_self)]\n"
        "        case 'ExpBackward0':\n"
        "            out = [torch.mul(grad, node._saved_result)]\n"
        "        case 'PowBackward0':\n"
        "            n = node._saved_exponent\n"
        "            out = [grad * n * torch.pow(node._saved_self, n - 1)]\n"
        "        case 'SqrtBackward0':\n"
        "            out = [grad * torch.reciprocal(2 * node._saved_result)]\n"
        "        case 'TanhBackward0':\n"
        "            out = [grad * (1 - torch.square(node._saved_result))]\n"
        "        case other:\n"
        "            raise ValueError(other)\n"
        "    for k, (fn, _) in enumerate(node.next_functions):\n"
        "        if fn is None:\n"
        "            out[k] = None\n"
        "    return out\n")),
    # ---------------------------------------------------------------- lesson 03
    Honest("l03-paths", "from the leaf up", (
        'def count_paths(root, leaf):\n'
        '    to_leaf = {}\n'
        '    for node in topo_order(root):  # parents first: their counts are ready\n'
        '        to_leaf[id(node)] = 1 if node is leaf else sum(to_leaf[id(p)] for p in node.parents)\n'
        '    return to_leaf[id(root)]\n'
    ), earlier=LESSON_03_SORT),
    Honest("l03-paths", "users counted first", (
        'def count_paths(root, leaf):\n'
        '    users, todo, seen = {}, [root], {id(root)}\n'
        '    while todo:\n'
        '        node = todo.pop()\n'
        '        for p in node.parents:\n'
        '            users[id(p)] = users.get(id(p), 0) + 1\n'
        '            if id(p) not in seen:\n'
        '                seen.add(id(p))\n'
        '                todo.append(p)\n'
        '    paths, ready = {id(root): 1}, [root]\n'
        '    while ready:\n'
        '        node = ready.pop()\n'
        '        for p in node.parents:\n'
        '            paths[id(p)] = paths.get(id(p), 0) + paths[id(node)]\n'
        '            users[id(p)] -= 1\n'
        '            if users[id(p)] == 0:\n'
        '                ready.append(p)\n'
        '    return paths.get(id(leaf), 0)\n'
    )),
    Honest("l03-paths", "a class whose ready list is self.open", (
        'class PathCounter:\n'
        '    """Counts paths with a list of open nodes: those whose users have all handed theirs."""\n'
        '\n'
        '    def __init__(self, root):\n'
        '        self.users, self.paths, self.open = {}, {id(root): 1}, [root]\n'
        '        todo, seen = [root], {id(root)}\n'
        '        while todo:\n'
        '            for p in todo.pop().parents:\n'
        '                self.users[id(p)] = self.users.get(id(p), 0) + 1\n'
        '                if id(p) not in seen:\n'
        '                    seen.add(id(p))\n'
        '                    todo.append(p)\n'
        '\n'
        '    def run(self):\n'
        '        while self.open:\n'
        '            node = self.open.pop()\n'
        '            for p in node.parents:\n'
        '                self.paths[id(p)] = self.paths.get(id(p), 0) + self.paths[id(node)]\n'
        '                self.users[id(p)] -= 1\n'
        '                if self.users[id(p)] == 0:\n'
        '                    self.open.append(p)\n'
        '        return self\n'
        '\n'
        '\n'
        'def count_paths(root, leaf):\n'
        '    return PathCounter(root).run().paths.get(id(leaf), 0)\n'
    )),
    # ---------------------------------------------------------------- lesson 04
    Honest("l04-grads", "a default and a class attribute that read torch, torch imported "
           "again below", (
               "class Residuals:\n    square = torch.square\n\n"
               "    def __init__(self, x, y, w, b):\n        self.r = w * x + b - y\n\n\n"
               "def nll_grads(x, y, w, b, a, c, exp=torch.exp):\n"
               "    r = Residuals(x, y, w, b).r\n    d_r = r * exp(-2 * (a * x + c))\n"
               "    d_u = 1 - Residuals.square(r) * exp(-2 * (a * x + c))\n"
               "    return (d_r * x).mean(), d_r.mean(), (d_u * x).mean(), d_u.mean()\n"),
           later=SCRATCH),
    Honest("l04-grads", "sum divided by len", (
        "def nll_grads(x, y, w, b, a, c):\n    r = w * x + b - y\n    u = a * x + c\n"
        "    n = len(x)\n    d_r = r / torch.exp(2 * u)\n    d_u = 1 - r * d_r\n"
        "    return (d_r * x).sum() / n, d_r.sum() / n, (d_u * x).sum() / n, d_u.sum() / n\n")),
    Honest("l04-grads", "a comprehension", (
        "def nll_grads(x, y, w, b, a, c):\n    n = len(x)\n    parts = []\n"
        "    for xi, yi in zip(x, y):\n        r = w * xi + b - yi\n"
        "        var = torch.exp(2 * (a * xi + c))\n"
        "        parts.append((r / var * xi, r / var, (1 - r**2 / var) * xi, 1 - r**2 / var))\n"
        "    return tuple(sum(p[k] for p in parts) / n for k in range(4))\n")),
    Honest("l04-grads", "dot products", (
        "def nll_grads(x, y, w, b, a, c):\n    r = w * x + b - y\n"
        "    p = torch.exp(-2 * (a * x + c))\n    n = x.numel()\n    d_u = 1 - r * r * p\n"
        "    return torch.dot(r * p, x) / n, torch.dot(r, p) / n, torch.dot(d_u, x) / n, "
        "d_u.mean()\n")),
    Honest("l04-grads", "einsum", (
        "def nll_grads(x, y, w, b, a, c):\n    r = w * x + b - y\n"
        "    p = (-2 * (a * x + c)).exp()\n    d_u = 1 - r.pow(2) * p\n"
        "    return (torch.einsum('i,i,i->', r, p, x) / len(x), torch.einsum('i,i->', r, p) / len(x),\n"
        "            torch.einsum('i,i->', d_u, x) / len(x), torch.einsum('i->', d_u) / len(x))\n")),
    Honest("l04-grads", "a dataclass", (
        "from dataclasses import dataclass\n\n\n@dataclass\nclass NoisyLine:\n    w: torch.Tensor\n"
        "    b: torch.Tensor\n    a: torch.Tensor\n    c: torch.Tensor\n\n"
        "    def residual(self, x, y):\n        return self.w * x + self.b - y\n\n"
        "    def log_sd(self, x):\n        return self.a * x + self.c\n\n\n"
        "def nll_grads(x, y, w, b, a, c):\n    line = NoisyLine(w, b, a, c)\n"
        "    r, u = line.residual(x, y), line.log_sd(x)\n"
        "    d_r, d_u = r * torch.exp(-2 * u), 1 - r**2 * torch.exp(-2 * u)\n"
        "    return (d_r * x).mean(), d_r.mean(), (d_u * x).mean(), d_u.mean()\n")),
    Honest("l04-huber", "an empty class as a namespace", (
        "class Box:\n    pass\n\n\ndef huber_grads(x, y, w, b, delta):\n    parts = Box()\n"
        "    parts.r = w * x + b - y\n    parts.pull = parts.r.clamp(-delta, delta)\n"
        "    return (parts.pull * x).mean(), parts.pull.mean()\n")),
    Honest("l04-huber", "torch.where", (
        "def huber_grads(x, y, w, b, delta):\n    r = w * x + b - y\n"
        "    pull = torch.where(r.abs() <= delta, r, delta * torch.sign(r))\n"
        "    return (pull * x).mean(), pull.mean()\n")),
    Honest("l04-huber", "a helper in an earlier cell", (
        "def huber_grads(x, y, w, b, delta):\n    pull = clipped(w * x + b - y, delta)\n"
        "    return (pull * x).mean(), pull.mean()\n"),
        "def clipped(r, limit):\n    return torch.minimum(torch.maximum(r, -limit + 0 * r), "
        "limit + 0 * r)\n"),
    Honest("l04-huber", "a loop with masks", (
        "def huber_grads(x, y, w, b, delta):\n    r = w * x + b - y\n    pull = r.clone()\n"
        "    pull[r > delta] = delta\n    pull[r < -delta] = -delta\n"
        "    return (pull * x).mean(), pull.mean()\n")),
    # ---------------------------------------------------------------- lesson 05, 06
    Honest("l05-tied", "a loop over the steps", (
        "def rnn_grad(W, h0, x1, x2, y):\n    hs = [h0]\n    for x in (x1, x2):\n"
        "        hs.append(torch.tanh(hs[-1] @ W + x))\n"
        "    dh, dW = 2 * (hs[-1] - y), torch.zeros_like(W)\n"
        "    for step in (2, 1):\n        dpre = dh * (1 - hs[step] ** 2)\n"
        "        dW += torch.outer(hs[step - 1], dpre)\n        dh = W @ dpre\n    return dW\n")),
    Honest("l05-tied", "einsum outer products", (
        "def rnn_grad(W, h0, x1, x2, y):\n    h1 = torch.tanh(h0 @ W + x1)\n"
        "    h2 = torch.tanh(h1 @ W + x2)\n    d2 = 2 * (h2 - y) * (1 - h2 * h2)\n"
        "    d1 = (W @ d2) * (1 - h1 * h1)\n"
        "    return torch.einsum('i,j->ij', h1, d2) + torch.einsum('i,j->ij', h0, d1)\n")),
    Honest("l06-momentum", "running sums in lists", (
        "def forgot_with_momentum(x, y, w, b, lr, beta, steps):\n"
        "    held, velocity = [0 * w, 0 * b], [0 * w, 0 * b]\n"
        "    for _ in range(steps):\n        r = w * x + b - y\n"
        "        grads = [2 * (r * x).sum() / x.numel(), 2 * r.sum() / x.numel()]\n"
        "        held = [h + g for h, g in zip(held, grads)]\n"
        "        velocity = [beta * v + h for v, h in zip(velocity, held)]\n"
        "        w, b = w - lr * velocity[0], b - lr * velocity[1]\n    return w, b\n")),
    Honest("l06-where", "weights put back and the step run again", (
        "import copy\n\n\n"
        "def gradient_at(model, X, y):\n    twin = copy.deepcopy(model)\n"
        "    F.mse_loss(twin(X), y).backward()\n"
        "    return torch.cat([p.grad.flatten() for p in twin.parameters()])\n\n\n"
        "def where_zeroed(step, model, X, y, k):\n"
        "    flat = lambda: torch.cat([p.detach().flatten() for p in model.parameters()])\n"
        "    grads = lambda: [p.grad for p in model.parameters()]\n"
        "    start, wanted = flat(), gradient_at(model, X, y)\n    step()\n"
        "    if torch.equal(flat(), start):\n        return 'before step'\n"
        "    if all(g is None or (g == 0).all() for g in grads()):\n        return 'end'\n"
        "    first = torch.cat([g.flatten() for g in grads()])\n"
        "    if not torch.allclose(first, wanted):\n        return 'each micro-batch'\n"
        "    with torch.no_grad():\n        for p, s in zip(model.parameters(), start.split("
        "[p.numel() for p in model.parameters()])):\n            p.copy_(s.view_as(p))\n"
        "    step()\n    again = torch.cat([g.flatten() for g in grads()])\n"
        "    return 'never' if torch.allclose(again, 2 * first) else 'start'\n")),
    # ---------------------------------------------------------------- lesson 01
    Honest("l01-formula", "a dict of templates", (
        "TEMPLATES = {'AddBackward0': '({} + {})', 'SubBackward0': '({} - {})',\n"
        "             'MulBackward0': '({} * {})', 'SinBackward0': 'torch.sin({})',\n"
        "             'ExpBackward0': 'torch.exp({})'}\n\n\n"
        "def formula(out, names):\n    by_id = {id(t): n for n, t in names.items()}\n\n"
        "    def read(node):\n        if node.name().endswith('AccumulateGrad'):\n"
        "            return by_id[id(node.variable)]\n"
        "        inputs = [fn for fn, _ in node.next_functions]\n"
        "        if node.name() == 'PowBackward0':\n"
        "            return '({} ** {})'.format(read(inputs[0]), node._saved_exponent)\n"
        "        parts = []\n        for position, fn in enumerate(inputs):\n"
        "            if fn is not None:\n                parts.append(read(fn))\n"
        "            elif position == 0:\n"
        "                parts.append(repr(node._saved_self.item()))\n"
        "            else:\n                parts.append(repr(node._saved_other.item()))\n"
        "        return TEMPLATES[node.name()].format(*parts)\n\n"
        "    return read(out.grad_fn)\n")),
    # ---------------------------------------------------------------- lesson 08
    Honest("l08-shares-vjp", "a helper", (
        "def shares_vjp(x, v):\n    total = x.sum()\n    return (v - weighted(v, x) / total) / total\n"),
        "def weighted(v, x):\n    return (v * x).sum()\n"),
    # ---------------------------------------------------------------- lesson 09
    Honest("l09-softmax-vjp", "matmul form", (
        "def softmax_vjp(p, g):\n    inner = (g.unsqueeze(-2) @ p.unsqueeze(-1)).squeeze(-1)\n"
        "    return p * (g - inner)\n")),
    Honest("l09-softmax-vjp", "einsum", (
        "def softmax_vjp(p, g):\n    inner = torch.einsum('...i,...i->...', g, p)[..., None]\n"
        "    return p * g - p * inner\n")),
    Honest("l09-normalize", "x and r, the quotient rule written out", (
        "def normalize_vjp(x, g):\n    r = torch.sqrt((x * x).sum(-1, keepdim=True))\n"
        "    return g / r - x * (g * x).sum(-1, keepdim=True) / r ** 3\n")),
    Honest("l09-normalize", "torch.nn.functional.normalize for y, einsum for the sum", (
        "def normalize_vjp(x, g):\n    y = torch.nn.functional.normalize(x, dim=-1)\n"
        "    along = torch.einsum('...i,...i->...', g, y).unsqueeze(-1)\n"
        "    return (g - along * y) / x.norm(dim=-1, keepdim=True)\n")),
    Honest("l09-bilinear", "einsum", (
        "def bilinear_grads(x, W, y, g):\n"
        "    return (torch.einsum('n,nd,cd->nc', g, y, W), torch.einsum('n,nc,nd->cd', g, x, y),\n"
        "            torch.einsum('n,nc,cd->nd', g, x, W))\n")),
    Honest("l09-bilinear", "a loop over the examples", (
        "def bilinear_grads(x, W, y, g):\n    dx, dW, dy = torch.zeros_like(x), torch.zeros_like(W), torch.zeros_like(y)\n"
        "    for n in range(x.shape[0]):\n"
        "        dx[n] = g[n] * (W @ y[n])\n"
        "        dy[n] = g[n] * (x[n] @ W)\n"
        "        dW += g[n] * torch.outer(x[n], y[n])\n"
        "    return dx, dW, dy\n")),
    Honest("l09-gather", "index_put with accumulate", (
        "def gather_grad(x, dim, index, g):\n    out = torch.zeros_like(x)\n"
        "    return out.scatter_add(dim, index, g)\n")),
    Honest("l08-mean-gradient", "new_zeros", (
        "def last_row_mean_vector(y):\n    v = y.new_zeros(y.shape)\n"
        "    v[-1, :] = 1.0 / y.size(1)\n    return v\n")),
    # ---------------------------------------------------------------- lesson 10
    Honest("l10-bce", "1 / (1 + exp)", (
        "def dlogits_bce(z, y):\n    return (1 / (1 + torch.exp(-z)) - y) / z.numel()\n")),
    Honest("l10-dlogits", "math and a helper", (
        "def dlogits_sigmoid_mse(z, y):\n    p = sigmoid(z)\n"
        "    return 2 * (p - y) * p * (1 - p) / math.prod(z.shape)\n"),
        "import math\n\n\ndef sigmoid(t):\n    return torch.special.expit(t)\n"),
    Honest("l10-mlp", "a class of layers", (
        "class Dense:\n    def __init__(self, W, b):\n        self.W, self.b = W, b\n\n"
        "    def forward(self, x):\n        self.x = x\n        return x @ self.W + self.b\n\n"
        "    def backward(self, dout):\n        self.dW, self.db = self.x.T @ dout, dout.sum(0)\n"
        "        return dout @ self.W.T\n\n\n"
        "def mlp_backward(xs, ys, W1, b1, W2, b2):\n    first, second = Dense(W1, b1), Dense(W2, b2)\n"
        "    hidden = torch.tanh(first.forward(xs))\n    logits = second.forward(hidden)\n"
        "    dhidden = second.backward((torch.sigmoid(logits) - ys) / logits.numel())\n"
        "    first.backward(dhidden * (1 - hidden**2))\n"
        "    return first.dW, first.db, second.dW, second.db\n")),
    # ---------------------------------------------------------------- lesson 12
    Honest("l12-pick-log", "one_hot and reciprocal", (
        "def pick_log_backward(probs, y):\n"
        "    picked = F.one_hot(y, probs.shape[1]).to(probs.dtype)\n"
        "    dlogprobs = -picked / probs.shape[0]\n"
        "    return dlogprobs, dlogprobs * probs.reciprocal()\n")),
    Honest("l12-pick-log", "sizes captured by match (d: a name of the lesson's too)", (
        "def pick_log_backward(probs, y):\n    match probs.shape:\n        case (n, d):\n"
        "            dlogprobs = probs.new_zeros(n, d)\n"
        "            dlogprobs[torch.arange(n), y] = -1 / n\n"
        "    return dlogprobs, dlogprobs / probs\n")),
    Honest("l12-pick-log", "a loop over the rows", (
        "def pick_log_backward(probs, y):\n    n = probs.shape[0]\n"
        "    dlogprobs = probs.new_zeros(probs.shape)\n"
        "    for i in range(n):\n        dlogprobs[i, y[i]] = -1 / n\n"
        "    return dlogprobs, dlogprobs / probs\n")),
    Honest("l12-normalise", "reciprocal and expand_as", (
        "def normalise_backward(counts, counts_sum, dprobs):\n    inv = counts_sum.reciprocal()\n"
        "    dinv = torch.sum(counts * dprobs, dim=1, keepdim=True)\n"
        "    dsum = -dinv * inv ** 2\n"
        "    return dinv, dsum, dprobs * inv + dsum.expand_as(counts)\n")),
    Honest("l12-scale-normalise", "unsqueeze instead of keepdim", (
        "def scale_normalise_backward(diff, invstd, gain, dhbn):\n"
        "    dxhat = dhbn * gain\n"
        "    dgain = torch.sum(dhbn * (diff * invstd), dim=0)\n"
        "    dbias = torch.sum(dhbn, dim=0)\n"
        "    dinvstd = torch.sum(diff * dxhat, dim=0).unsqueeze(0)\n"
        "    return dxhat, dgain, dbias, dinvstd\n")),
    Honest("l12-centre", "einsum and a helper", (
        "def centre_backward(diff, var, eps, dxhat, dinvstd):\n    n = diff.shape[0]\n"
        "    dvar = power_slope(var + eps, -0.5) * dinvstd\n"
        "    ddiff2 = torch.ones_like(diff) * dvar / n\n"
        "    ddiff = dxhat * power(var + eps, -0.5) + 2 * diff * ddiff2\n"
        "    dmean = -torch.einsum('nh->h', ddiff).unsqueeze(0)\n"
        "    return dvar, ddiff2, ddiff, dmean, ddiff + dmean / n\n"),
        "def power(t, k):\n    return t ** k\n\n\ndef power_slope(t, k):\n    return k * t ** (k - 1)\n"),
    Honest("l12-layernorm", "var with unbiased=False", (
        "def layernorm_backward(dout, x, gain, eps):\n    n = x.shape[-1]\n"
        "    xhat = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, "
        "keepdim=True) + eps)\n    g = dout * gain\n"
        "    inv = 1 / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps)\n"
        "    return inv * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, "
        "keepdim=True))\n")),
    Honest("l12-shift", "scatter instead of one_hot", (
        "def shift_backward(logits, counts, dcounts):\n    dshifted = dcounts * counts\n"
        "    dmax = -dshifted.sum(1, keepdim=True)\n"
        "    largest = torch.zeros_like(logits).scatter_(1, logits.argmax(1, keepdim=True), 1.0)\n"
        "    return dshifted, dmax, dshifted + largest * dmax\n")),
    Honest("l12-weighted", "softmax written out, torch.no_grad", (
        "def weighted_dlogits(logits, y, weight):\n    with torch.no_grad():\n"
        "        e = (logits - logits.max(1, keepdim=True).values).exp()\n"
        "        p = e / e.sum(1, keepdim=True)\n"
        "        p[torch.arange(len(y)), y] -= 1\n"
        "        return p * weight[y].unsqueeze(1) / weight[y].sum()\n")),
    Honest("l12-embedding", "a loop with +=", (
        "def embedding_backward(dxin, tokens, num_rows):\n    n, t = tokens.shape\n"
        "    demb = dxin[:, 2:].view(n, t, -1)\n"
        "    dC = dxin.new_zeros(num_rows, demb.shape[2])\n"
        "    for i in range(n):\n        for j in range(t):\n"
        "            dC[tokens[i, j]] += demb[i, j]\n    return demb, dC\n")),
    # ---------------------------------------------------------------- lessons 17, 18, 24, 26
    Honest("l17-hvp-by-hand", "named steps", (
        "def hvp(x, W, a, V):\n    pre = x @ W\n    th = pre.tanh()\n    slope = 1 - th * th\n"
        "    d_slope = -2 * th * slope * (x @ V)\n    return x.t() @ (d_slope * a)\n")),
    Honest("l18-jvp-by-hand", "a dual pair as a tuple", (
        "def tangent(W, b, x, v):\n    def tanh_pair(u, du):\n        h = torch.tanh(u)\n"
        "        return h, (1 - h * h) * du\n"
        "    h, dh = tanh_pair(W @ x + b, W @ v)\n    s, ds = (x * x).sum(), 2 * (x * v).sum()\n"
        "    return dh * s + h * ds\n")),
    Honest("l27-rms-norm-jvp", "the inverse square root as a power, sums over the row", (
        "def rms_norm_jvp(x, w, eps, x_t, w_t):\n    d = x.shape[1]\n"
        "    m = (x ** 2).sum(1, keepdim=True) / d\n    m_t = 2 * (x * x_t).sum(1, keepdim=True) / d\n"
        "    r = (m + eps) ** -0.5\n    r_t = -0.5 * (m + eps) ** -1.5 * m_t\n"
        "    return x_t * r * w + x * r_t * w + x * r * w_t\n")),
    Honest("l27-rms-norm-jvp", "a dual pair per step", (
        "def rms_norm_jvp(x, w, eps, x_t, w_t):\n"
        "    def times(a, a_t, b, b_t):\n        return a * b, a_t * b + a * b_t\n"
        "    m, m_t = (x * x).mean(-1, keepdim=True), (2 * x * x_t).mean(-1, keepdim=True)\n"
        "    r = 1 / torch.sqrt(m + eps)\n    r_t = -0.5 * r / (m + eps) * m_t\n"
        "    xr, xr_t = times(x, x_t, r, r_t)\n    return times(xr, xr_t, w, w_t)[1]\n")),
    Honest("l24-scale-range", "math.log2", (
        "import math\n\n\ndef scale_range(x, W, b, t):\n    r = x @ W.T + b - t\n    dy = 2 * r / r.numel()\n"
        "    dW, db = dy.T @ x, dy.sum(0)\n    tiny = torch.finfo(torch.float16).tiny\n"
        "    big = torch.finfo(torch.float16).max\n    small = dy.abs()[dy != 0].min().item()\n"
        "    large = max(dW.abs().max().item(), db.abs().max().item())\n"
        "    return (torch.tensor(2.0 ** math.ceil(math.log2(tiny / small)), dtype=x.dtype),\n"
        "            torch.tensor(2.0 ** math.floor(math.log2(big / large)), dtype=x.dtype))\n")),
    Honest("l26-heads", "einsum and transpose(-2, -1)", (
        "def attention_backward(Q, K, V, lse, dO):\n    d = Q.size(-1)\n"
        "    keep = torch.ones(Q.size(-2), Q.size(-2)).tril().bool()\n"
        "    P = torch.where(keep, torch.exp(torch.einsum('bhid,bhjd->bhij', Q, K) / d**0.5"
        " - lse), 0.0)\n"
        "    dP = torch.einsum('bhid,bhjd->bhij', dO, V)\n"
        "    dS = P * dP - P * (P * dP).sum(-1, keepdim=True)\n"
        "    return (torch.matmul(dS, K) / d**0.5, torch.matmul(dS.transpose(-2, -1), Q) / d**0.5,"
        "\n            torch.matmul(P.transpose(-2, -1), dO))\n")),
    Honest("l26-flash", "query and key blocks, FlashAttention-2's order", (
        "def flash_backward(Q, K, V, O, lse, dO, block):\n    T = Q.shape[-2]\n"
        "    scale = 1 / math.sqrt(Q.shape[-1])\n    delta = (O * dO).sum(-1, keepdim=True)\n"
        "    dQ, dK, dV = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)\n"
        "    for j in range(0, T, block):\n        keys = slice(j, j + block)\n"
        "        for i in range(j, T, block):  # earlier queries see none of these keys\n"
        "            rows = slice(i, i + block)\n"
        "            q_pos = torch.arange(T)[rows].unsqueeze(-1)\n"
        "            k_pos = torch.arange(T)[keys].unsqueeze(0)\n"
        "            S = Q[..., rows, :] @ K[..., keys, :].transpose(-1, -2) * scale\n"
        "            P = torch.exp(S - lse[..., rows, :]) * (k_pos <= q_pos)\n"
        "            dV[..., keys, :] += P.transpose(-1, -2) @ dO[..., rows, :]\n"
        "            dP = dO[..., rows, :] @ V[..., keys, :].transpose(-1, -2)\n"
        "            dS = P * (dP - delta[..., rows, :]) * scale\n"
        "            dQ[..., rows, :] += dS @ K[..., keys, :]\n"
        "            dK[..., keys, :] += dS.transpose(-1, -2) @ Q[..., rows, :]\n"
        "    return dQ, dK, dV\n")),
    # ---------------------------------------------------------------- method exercises
    Honest("l19-softplus-in-place", "the ctx form, x recovered from y", (
        "class SoftplusInPlace(torch.autograd.Function):\n    @staticmethod\n"
        "    def forward(ctx, x):\n        ctx.mark_dirty(x)\n"
        "        torch.where(x > 0, x + torch.log1p(torch.exp(-x)), torch.log1p(torch.exp(x)),"
        " out=x)\n"
        "        ctx.save_for_backward(x)\n        return x\n\n    @staticmethod\n"
        "    def backward(ctx, grad_output):\n        (y,) = ctx.saved_tensors\n"
        "        x = torch.log(torch.expm1(y))  # softplus is invertible\n"
        "        return grad_output / (1 + torch.exp(-x))\n")),
    Honest("l19-power-mix", "torch imported again below the class", (
        "class PowerMix(torch.autograd.Function):\n    @staticmethod\n"
        "    def forward(ctx, x, y, p):\n        ctx.save_for_backward(x, y)\n"
        "        ctx.p = p\n        return x**p * y\n\n    @staticmethod\n"
        "    def backward(ctx, grad_output):\n        x, y = ctx.saved_tensors\n"
        "        slope = ctx.p * x ** (ctx.p - 1)\n"
        "        return grad_output * slope * y, grad_output * x**ctx.p, None\n"),
           later=SCRATCH),
    Honest("l05-microbatch", "an index loop", (
        "def accumulate(w, X, t, sizes):\n    start = 0\n    for size in sizes:\n"
        "        part = slice(start, start + size)\n"
        "        loss = ((X[part] @ w - t[part]) ** 2).sum() / len(X)\n        loss.backward()\n"
        "        start += size\n")),
    Honest("l07-one-backward", "a detached weight", (
        "def one_backward(main, aux):\n    weight = 1 / main.detach()\n"
        "    total = weight * main + aux\n    total.backward()\n")),
    Honest("l16-checkpoint-by-hooks", "a class holding the recomputation", (
        "class Recompute:\n    def __init__(self, block, x):\n"
        "        self.block, self.x = block, x\n"
        "        self.state = torch.random.get_rng_state()\n"
        "        self.count, self.tensors = 0, None\n\n    def pack(self, t):\n"
        "        self.count += 1\n        return self.count - 1\n\n"
        "    def unpack(self, i):\n        if self.tensors is None:\n"
        "            self.tensors = []\n            after = torch.random.get_rng_state()\n"
        "            torch.random.set_rng_state(self.state)\n"
        "            with torch.set_grad_enabled(True):\n"
        "                with saved_tensors_hooks(self.keep, lambda t: t):\n"
        "                    self.block(self.x.detach().requires_grad_(self.x.requires_grad))\n"
        "            torch.random.set_rng_state(after)\n        return self.tensors[i]\n\n"
        "    def keep(self, t):\n        self.tensors.append(t)\n        return t\n\n\n"
        "def checkpoint_by_hooks(block, x):\n    again = Recompute(block, x)\n"
        "    with saved_tensors_hooks(again.pack, again.unpack):\n"
        "        out = block(x)\n    return out\n"),
    "from torch.autograd.graph import saved_tensors_hooks\n"),
    Honest("l16-checkpoint-by-hooks", "a dict of slots filled by position", (
        "def checkpoint_by_hooks(block, x):\n    seed_state = torch.get_rng_state()\n"
        "    slots = {}\n\n    def pack(t):\n        key = len(slots)\n"
        "        slots[key] = None\n        return key\n\n    def unpack(key):\n"
        "        if slots[key] is None:\n            order = []\n"
        "            with torch.random.fork_rng():\n"
        "                torch.set_rng_state(seed_state)\n"
        "                with torch.enable_grad(), saved_tensors_hooks(\n"
        "                        lambda t: order.append(t) or t, lambda t: t):\n"
        "                    block(x.detach().requires_grad_(x.requires_grad))\n"
        "            slots.update(enumerate(order))\n        return slots[key]\n\n"
        "    with saved_tensors_hooks(pack, unpack):\n        return block(x)\n"),
    "from torch.autograd.graph import saved_tensors_hooks\n"),
    Honest("l14-windows", "each window recomputed from its entering state", (
        "def tbptt_gradients(W, xs, k1, k2):\n    with torch.no_grad():\n"
        "        states = [torch.zeros(len(W), dtype=W.dtype)]\n        for x in xs:\n"
        "            states.append(torch.tanh(W @ states[-1] + x))\n    result = []\n"
        "    for t in range(k1, len(xs) + 1, k1):\n        first = max(t - k2, 0)\n"
        "        weight = W.detach().requires_grad_(True)\n        h = states[first]\n"
        "        losses = []\n        for s in range(first, t):\n"
        "            h = torch.tanh(weight @ h + xs[s])\n"
        "            if s >= t - k1:\n                losses.append(h.pow(2).sum())\n"
        "        torch.stack(losses).sum().backward()\n        result.append(weight.grad)\n"
        "    return result\n")),
    Honest("l14-windows", "a class with a deque of steps", (
        "from collections import deque\n\n\nclass Windows:\n"
        "    def __init__(self, W, k2):\n        self.W = W.detach().clone().requires_grad_()\n"
        "        self.steps = deque(maxlen=k2)\n\n    def step(self, h, x):\n"
        "        h_in = h.detach().requires_grad_()\n"
        "        h_out = torch.tanh(self.W @ h_in + x)\n"
        "        self.steps.append((h_in, h_out))\n        return h_out\n\n"
        "    def gradient(self, k1):\n        self.W.grad = None\n        later = None\n"
        "        for i, (h_in, h_out) in reversed(list(enumerate(self.steps))):\n"
        "            upstream = torch.zeros_like(h_out) if later is None else later\n"
        "            if i >= len(self.steps) - k1:\n"
        "                upstream = upstream + 2 * h_out.detach()\n"
        "            h_in.grad = None\n"
        "            torch.autograd.backward(h_out, upstream, retain_graph=True)\n"
        "            later = h_in.grad\n        return self.W.grad.clone()\n\n\n"
        "def tbptt_gradients(W, xs, k1, k2):\n    loop = Windows(W, k2)\n"
        "    h, out = torch.zeros(W.shape[0], dtype=W.dtype), []\n"
        "    for t in range(1, len(xs) + 1):\n        h = loop.step(h, xs[t - 1])\n"
        "        if t % k1 == 0:\n            out.append(loop.gradient(k1))\n"
        "    return out\n")),
    # ---------------------------------------------------------------- lesson 28
    Honest("l28-ops-by-node", "closures and nonlocal, no class state", (
        "import torch.utils._python_dispatch as pd\n\n\n"
        "def ops_by_node(loss):\n"
        "    report, current = [], None\n\n"
        "    class Mode(pd.TorchDispatchMode):\n"
        "        def __torch_dispatch__(self, func, types, args=(), kwargs=None):\n"
        "            if current is not None:\n"
        "                current.append(str(func))\n"
        "            return func(*args, **(kwargs or {}))\n\n"
        "    def start(node):\n"
        "        nonlocal current\n"
        "        current = []\n"
        "        report.append((node.name(), current))\n\n"
        "    def stop(*_):\n"
        "        nonlocal current\n"
        "        current = None\n\n"
        "    nodes, stack = [], [loss.grad_fn]\n"
        "    while stack:\n"
        "        node = stack.pop()\n"
        "        if node is not None and all(node is not n for n in nodes):\n"
        "            nodes.append(node)\n"
        "            stack += [f for f, _ in node.next_functions]\n"
        "    handles = [n.register_prehook(lambda g, n=n: start(n)) for n in nodes]\n"
        "    handles += [n.register_hook(stop) for n in nodes]\n"
        "    try:\n"
        "        with Mode():\n"
        "            loss.backward()\n"
        "    finally:\n"
        "        for h in handles:\n"
        "            h.remove()\n"
        "    return report\n")),
    Honest("l28-ops-by-node", "a mode from an earlier cell, a scratch cell after", (
        "def ops_by_node(loss):\n"
        "    mode = NodeLog()\n"
        "    seen = set()\n\n"
        "    def visit(node):\n"
        "        if node is None or node in seen:\n"
        "            return\n"
        "        seen.add(node)\n"
        "        mode.handles.append(node.register_prehook(mode.starter(node.name())))\n"
        "        mode.handles.append(node.register_hook(mode.stopper))\n"
        "        for child, _ in node.next_functions:\n"
        "            visit(child)\n\n"
        "    visit(loss.grad_fn)\n"
        "    with mode:\n"
        "        loss.backward()\n"
        "    for handle in mode.handles:\n"
        "        handle.remove()\n"
        "    return [(name, list(ops)) for name, ops in mode.rows]\n"),
        "from torch.utils._python_dispatch import TorchDispatchMode\n\n\n"
        "class NodeLog(TorchDispatchMode):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.rows, self.handles, self.live = [], [], False\n\n"
        "    def starter(self, name):\n"
        "        def start(grads):\n"
        "            self.rows.append((name, []))\n"
        "            self.live = True\n"
        "        return start\n\n"
        "    def stopper(self, grads_in, grads_out):\n"
        "        self.live = False\n\n"
        "    def __torch_dispatch__(self, func, types, args=(), kwargs=None):\n"
        "        if self.live:\n"
        "            self.rows[-1][1].append(f\"{func}\")\n"
        "        return func(*args, **(kwargs or {}))\n",
        SCRATCH),
    Honest("l28-cumprod", "a loop over positions, in place", (
        "def cumprod_backward(x, dim, g):\n"
        "    x, g = x.movedim(dim, -1), g.movedim(dim, -1)\n"
        "    out = torch.empty_like(x)\n"
        "    for k in range(x.shape[-1]):\n"
        "        without = x.clone()\n"
        "        without[..., k] = 1.0\n"
        "        terms = without.cumprod(-1)[..., k:] * g[..., k:]\n"
        "        out[..., k] = terms.sum(-1)\n"
        "    return out.movedim(-1, dim)\n")),
    Honest("l28-cumprod", "prefix and suffix products, no division", (
        "def cumprod_backward(x, dim, g):\n"
        "    with torch.no_grad():\n"
        "        n = x.shape[dim]\n"
        "        pieces = []\n"
        "        for k in range(n):\n"
        "            before = x.narrow(dim, 0, k).prod(dim, keepdim=True)\n"
        "            after = torch.cat([torch.ones_like(x.narrow(dim, 0, 1)),\n"
        "                               x.narrow(dim, k + 1, n - k - 1)], dim).cumprod(dim)\n"
        "            pieces.append((before * after * g.narrow(dim, k, n - k)).sum(dim, "
        "keepdim=True))\n"
        "        return torch.cat(pieces, dim)\n")),
    Honest("l28-atan2", "through arctan(y / x)", (
        "def atan2_backward(y, x, g):\n"
        "    u = y / x\n"
        "    slope = 1 / (1 + u * u)\n"
        "    dy = g * slope / x\n"
        "    dx = g * slope * (-y / (x * x))\n"
        "    return dy, dx.sum(0)\n")),
    # ---------------------------------------------------------------- by hand, other styles
    Honest("l13-dropout", 'a conditional expression, the scale as a reciprocal', (
        'def dropout_backward(dout, mask, p, training):\n'
        '    scale = 1.0 / (1.0 - p)\n'
        '    return dout * mask * scale if training else dout * 1.0\n'
    )),
    Honest("l13-conv-dx", 'the transposed convolution, its output padding worked out', (
        'def conv2d_dx(x, w, dout, stride, padding):\n'
        '    k = w.shape[-1]\n'
        '    H, W = x.shape[-2:]\n'
        '    h_out, w_out = dout.shape[-2:]\n'
        '    extra = (H - ((h_out - 1) * stride - 2 * padding + k),\n'
        '             W - ((w_out - 1) * stride - 2 * padding + k))\n'
        '    return F.conv_transpose2d(dout, w, stride=stride, padding=padding, output_padding=extra)\n'
    )),
    Honest("l13-conv-dw", "a loop over the kernel's positions, einsum for each", (
        'def conv2d_dw_db(x, w, dout, stride, padding):\n'
        '    xp = F.pad(x, (padding, padding, padding, padding))\n'
        '    k = w.shape[-1]\n'
        '    h_out, w_out = dout.shape[-2:]\n'
        '    dw = torch.zeros_like(w)\n'
        '    for i in range(k):\n'
        '        for j in range(k):\n'
        '            seen = xp[:, :, i:i + stride * (h_out - 1) + 1:stride,\n'
        '                      j:j + stride * (w_out - 1) + 1:stride]\n'
        "            dw[:, :, i, j] = torch.einsum('nohw,nchw->oc', dout, seen)\n"
        '    return dw, dout.sum(dim=(0, 2, 3))\n'
    )),
    Honest("l16-bytes-formula", 'a loop over the layers', (
        'def bytes_formula(batch, widths, activation):\n'
        '    kept = widths[0]  # the input, kept by the first Linear\n'
        '    for width in widths[1:-1]:\n'
        "        kept += width  # the activation's output, the next Linear's input\n"
        "        if activation == 'gelu':\n"
        '            kept += width  # GELU keeps its input too\n'
        '    return batch * kept * 4  # float32\n'
    )),
    Honest("l17-newton-step", 'torch.func.grad twice', (
        'def newton_step(f, x):\n'
        '    slope = torch.func.grad(lambda t: f(t).sum())\n'
        '    curvature = torch.func.grad(lambda t: slope(t).sum())\n'
        '    return -slope(x) / curvature(x)\n'
    )),
    Honest("l17-weight-penalty", 'torch.func.grad of a torch.func.grad', (
        'def penalty_grad(f, x, w):\n'
        '    def penalty(w):\n'
        '        grad_x = torch.func.grad(f, argnums=0)(x, w)\n'
        '        return (grad_x * grad_x).sum()\n'
        '    return torch.func.grad(penalty)(w)\n'
    )),
    Honest("l22-complex-linear", 'conj().T and a sum over rows written out', (
        'def complex_linear_backward(x, W, b, G):\n'
        '    dx = G @ W.conj().transpose(0, 1)\n'
        '    dW = x.conj().transpose(0, 1) @ G\n'
        '    db = torch.sum(G, 0)\n'
        '    return dx, dW, db\n'
    )),
    Honest("l25-min-cut-backward", 'the double angle, sin 2y', (
        'def min_cut_backward(y, x_t, w_t, g):\n'
        '    dy = -g * torch.sin(2 * y) / y.numel()  # 2 cos(y) sin(y) = sin(2y)\n'
        '    return torch.matmul(dy, w_t), torch.matmul(x_t, dy)\n'
    )),
    Honest("l24-compensated-step", "Kahan's names, the error in float32", (
        'def compensated_step(w, comp, update):\n'
        '    y = comp.float() + update\n'
        '    t = w.float() + y\n'
        '    rounded = t.to(w.dtype)\n'
        '    return rounded, (t - rounded.float()).to(comp.dtype)\n'
    )),
    Honest("l19-broadcast-function", 'the broadcast summed away by a helper of its own', (
        'def summed_to(grad, shape):\n'
        '    while grad.dim() > len(shape):  # dimensions broadcasting put in front\n'
        '        grad = grad.sum(0)\n'
        '    for d, size in enumerate(shape):  # dimensions stretched from size 1\n'
        '        if size == 1 and grad.shape[d] != 1:\n'
        '            grad = grad.sum(d, keepdim=True)\n'
        '    return grad\n'
        '\n'
        '\n'
        'class SquaredGap(torch.autograd.Function):\n'
        '    @staticmethod\n'
        '    def forward(ctx, a, b):\n'
        '        diff = a - b\n'
        '        ctx.save_for_backward(a, b)\n'
        '        ctx.shapes = a.shape, b.shape\n'
        '        return diff * diff\n'
        '\n'
        '    @staticmethod\n'
        '    def backward(ctx, grad_output):\n'
        '        a, b = ctx.saved_tensors\n'
        '        twice = 2 * grad_output * (a - b)\n'
        '        return summed_to(twice, ctx.shapes[0]), summed_to(-twice, ctx.shapes[1])\n'
    )),
    Honest("l19-logsumexp", 'torch.softmax for the weights, recomputed in backward', (
        'class LogSumExp(torch.autograd.Function):\n'
        '    @staticmethod\n'
        '    def forward(ctx, x):\n'
        '        top = x.max(dim=-1, keepdim=True).values\n'
        '        ctx.save_for_backward(x)\n'
        '        return (top + (x - top).exp().sum(-1, keepdim=True).log()).squeeze(-1)\n'
        '\n'
        '    @staticmethod\n'
        '    def backward(ctx, grad_output):\n'
        '        (x,) = ctx.saved_tensors\n'
        '        return torch.softmax(x, dim=-1) * grad_output[..., None]\n'
    )),
    Honest("l22-complex-vjps", 'conj written as torch.conj, |z|² through its real and imaginary parts', (
        'def complex_vjps(z, w, g, r):\n'
        '    dz = g * torch.conj(w)\n'
        '    dw = g * torch.conj(z)\n'
        '    d_abs2 = 2 * r * torch.complex(z.real, z.imag)\n'
        '    d_exp = g * torch.conj(torch.exp(z))\n'
        '    return dz, dw, d_abs2, d_exp\n'
    )),
    Honest("l26-dscores", 'the future masked by triu and masked_fill', (
        'def dscores(S, lse, dP):\n'
        '    future = torch.ones(len(S), len(S), dtype=torch.bool).triu(1)\n'
        "    masked = S.masked_fill(future, float('-inf'))\n"
        '    P = torch.exp(masked - lse)  # exp(-inf) is 0 where the future is\n'
        '    return P * dP - P * (P * dP).sum(-1, keepdim=True)\n'
    )),
    Honest("l13-pool", 'a loop over the windows', (
        'def maxpool_backward(x, dout, kernel, stride):\n'
        '    dx = torch.zeros_like(x)\n'
        '    N, C, H_out, W_out = dout.shape\n'
        '    for i in range(H_out):\n'
        '        for j in range(W_out):\n'
        '            window = x[:, :, i * stride:i * stride + kernel, j * stride:j * stride + kernel]\n'
        '            flat = window.reshape(N, C, -1)\n'
        '            first = flat.argmax(dim=-1)  # the first maximum, as torch picks it\n'
        '            rows, cols = first // kernel, first % kernel\n'
        '            for n in range(N):\n'
        '                for c in range(C):\n'
        '                    r, q = i * stride + rows[n, c], j * stride + cols[n, c]\n'
        '                    dx[n, c, r, q] += dout[n, c, i, j]\n'
        '    return dx\n'
    )),
    Honest("l01-find-leaves", 'a queue, and a list of nodes seen compared by identity', (
        'def find_leaves(out):\n'
        '    found, done, queue = [], [], [out.grad_fn]\n'
        '    while queue:\n'
        '        node = queue.pop(0)\n'
        '        if node is None or any(node is d for d in done):\n'
        '            continue\n'
        '        done.append(node)\n'
        "        if node.name() == 'torch::autograd::AccumulateGrad':\n"
        '            found.append(node.variable)\n'
        '        for fn, _ in node.next_functions:\n'
        '            queue.append(fn)\n'
        '    return found\n'
    )),
    Honest("l15-vanishing", 'a dict of handles, the norms kept in a list by layer order', (
        'def first_vanishing_layer(model, x, threshold):\n'
        '    names = [name for name, _ in model.named_children()]\n'
        '    seen = {}\n'
        '\n'
        '    def noting(name):\n'
        '        def hook(module, grad_input, grad_output):\n'
        '            seen[name] = float(grad_input[0].norm())\n'
        '        return hook\n'
        '\n'
        '    handles = {name: layer.register_full_backward_hook(noting(name))\n'
        '               for name, layer in model.named_children()}\n'
        '    try:\n'
        '        model(x).sum().backward()\n'
        '    finally:\n'
        '        for handle in handles.values():\n'
        '            handle.remove()\n'
        '    for name in names[::-1]:\n'
        '        if seen[name] < threshold:\n'
        '            return name\n'
        '    return None\n'
    )),
    Honest("l22-hinge-kinks", 'masks from comparisons, the zero pair by an explicit test', (
        'def hinge_grad(X, y, w, lam):\n'
        '    s = X @ w\n'
        '    clipped = s.clamp(-2.0, 2.0)\n'
        '    inside = (s > -2.0) & (s < 2.0)  # hardtanh passes the gradient strictly inside\n'
        "    hinge_on = y * clipped < 1  # relu's slope is 0 at its kink, margin exactly 0\n"
        '    d_s = torch.where(inside & hinge_on, -y, torch.zeros_like(y))\n'
        '    pairs = w.reshape(-1, 2)\n'
        '    norms = torch.sqrt((pairs ** 2).sum(1, keepdim=True))\n'
        '    safe = torch.where(norms == 0, torch.ones_like(norms), norms)\n'
        '    unit = torch.where(norms == 0, torch.zeros_like(pairs), pairs / safe)\n'
        '    return X.T @ d_s + lam * unit.reshape(-1)\n'
    )),
    Honest("l07-two-players", 'all gradients in one call, the steps in a loop after', (
        'def two_player_step(loss_a, loss_b, A, B, lr):\n'
        '    grads = torch.autograd.grad(loss_a, A, retain_graph=True) + \\\n'
        '        torch.autograd.grad(loss_b, B)\n'
        '    with torch.no_grad():\n'
        '        for p, g in zip([*A, *B], grads):\n'
        '            p.sub_(lr * g)\n'
    )),
    # ---------------------------------------------------------------- lesson 19
    Honest("l19-gate-jvp", "sigmoid through exp, x and g saved", (
        'class Gate(torch.autograd.Function):\n'
        '    generate_vmap_rule = True\n'
        '\n'
        '    @staticmethod\n'
        '    def forward(x, g):\n'
        '        return x / (1 + torch.exp(-g))\n'
        '\n'
        '    @staticmethod\n'
        '    def setup_context(ctx, inputs, output):\n'
        '        x, g = inputs\n'
        '        ctx.save_for_backward(x, g)\n'
        '        ctx.save_for_forward(x, g)\n'
        '\n'
        '    @staticmethod\n'
        '    def backward(ctx, grad_output):\n'
        '        x, g = ctx.saved_tensors\n'
        '        e = torch.exp(-g)\n'
        '        return grad_output / (1 + e), grad_output * x * e / (1 + e) ** 2\n'
        '\n'
        '    @staticmethod\n'
        '    def jvp(ctx, x_t, g_t):\n'
        '        x, g = ctx.saved_tensors\n'
        '        e = torch.exp(-g)\n'
        '        return x_t / (1 + e) + g_t * x * e / (1 + e) ** 2\n'
    )),
    Honest("l19-gate-jvp", "the output saved, jvp from it", (
        'class Gate(torch.autograd.Function):\n'
        '    generate_vmap_rule = True\n'
        '\n'
        '    @staticmethod\n'
        '    def forward(x, g):\n'
        '        return x * torch.sigmoid(g)\n'
        '\n'
        '    @staticmethod\n'
        '    def setup_context(ctx, inputs, output):\n'
        '        x, g = inputs\n'
        '        ctx.save_for_forward(g, output)\n'
        '        ctx.save_for_backward(g, output)\n'
        '\n'
        '    @staticmethod\n'
        '    def backward(ctx, grad_output):\n'
        '        g, y = ctx.saved_tensors\n'
        '        s = torch.sigmoid(g)\n'
        '        return grad_output * s, grad_output * y * (1 - s)\n'
        '\n'
        '    @staticmethod\n'
        '    def jvp(ctx, x_t, g_t):\n'
        '        g, y = ctx.saved_tensors\n'
        '        s = torch.sigmoid(g)\n'
        '        return x_t * s + g_t * y * (1 - s)\n'
    )),
    # ---------------------------------------------------------------- lesson 22
    Honest("l22-safe-softplus", "F.softplus under the where (its own threshold keeps exp tame)", (
        "def safe_soft_relu(x, beta):\n    bx = beta * x\n"
        "    return torch.where(bx > 20, x, F.softplus(bx) / beta)\n")),
    # ---------------------------------------------------------------- lesson 28
    Honest("l28-atan2", "a helper in an earlier cell", (
        "def atan2_backward(y, x, g):\n"
        "    return turn(g, x, y), sum_to(turn(g, -y, x), x)\n"),
        "def turn(g, along, other):\n"
        "    return g * along / (along**2 + other**2)\n\n\n"
        "def sum_to(t, like):\n"
        "    while t.dim() > like.dim():\n"
        "        t = t.sum(0)\n"
        "    return t\n"),
]

# ---------------------------------------------------------------- lesson 20
# The engine's two cells, for an answer checked outside the notebook (the kernel's test).
from backproplab.course.exercises.lesson20.engine_source import ENGINE_CELLS  # noqa: E402

HONEST += [
    Honest("l20-two-writes", "entry by entry loops", (
        "def window_grads(x, a, b, i, j, g):\n    k = len(a)\n    gy = g.clone()\n"
        "    for t in range(k):\n        gy[j + t] = 0.0\n    for t in range(k):\n"
        "        gy[i + t] = gy[i + t] + b[t] * g[j + t]\n    dx = gy.clone()\n"
        "    da, db = torch.zeros_like(a), torch.zeros_like(b)\n    for t in range(k):\n"
        "        dx[i + t] = gy[i + t] * a[t]\n        da[t] = gy[i + t] * x[i + t]\n"
        "        db[t] = g[j + t] * a[t] * x[i + t]\n    return dx, da, db\n")),
    Honest("l20-two-writes", "a helper in an earlier cell", (
        "def window_grads(x, a, b, i, j, g):\n    k = a.numel()\n"
        "    before_second = undo_overwrite(g, j, k)\n"
        "    before_second[i:i + k] += b * g[j:j + k]\n    dx = before_second.clone()\n"
        "    dx[i:i + k] *= a\n"
        "    return dx, before_second[i:i + k] * x[i:i + k], g[j:j + k] * (a * x[i:i + k])\n"),
        "def undo_overwrite(grad, start, k):\n    out = grad.clone()\n"
        "    out[start:start + k] = 0\n    return out\n"),
    Honest("l20-engine-views", "a class for a view's facts, torch.no_grad", (
        "class ViewInfo:\n    def __init__(self, base, where):\n"
        "        self.base, self.where, self.node_at = base, where, -1\n\n\n"
        "def view(a, f):\n    v = Var(f(a.data))\n    v.version = a.version\n"
        "    if a.base is None:\n        v.base, v.info = a, ViewInfo(a, f)\n    else:\n"
        "        v.base, v.info = a.base, ViewInfo(a.base, lambda t: f(a.info.where(t)))\n"
        "    return v\n\n\n"
        "def grad_fn(a):\n    if a.base is None:\n        return a.node\n    info = a.info\n"
        "    if info.node_at != a.version.value:\n        below = grad_fn(info.base)\n\n"
        "        def rule(g):\n            full = torch.zeros_like(info.base.data)\n"
        "            info.where(full).copy_(g)\n            return (full,)\n\n"
        "        a.node = None if below is None else Node('ViewBackward', (below,), rule)\n"
        "        info.node_at = a.version.value\n    return a.node\n\n\n"
        "def _write(a, b, overwrite):\n    owner = a if a.base is None else a.base\n"
        "    if owner.node is not None and owner.node.name == 'AccumulateGrad':\n"
        "        raise RuntimeError('cannot write into a leaf that requires grad')\n"
        "    old, new = grad_fn(owner), grad_fn(b)\n    with torch.no_grad():\n"
        "        if overwrite:\n            a.data[...] = b.data\n        else:\n"
        "            a.data += b.data\n    a.version.value += 1\n"
        "    if old is None and new is None:\n        return a\n"
        "    where = (lambda t: t) if a.base is None else a.info.where\n\n"
        "    def rule(g):\n        keep = g.clone()\n        to_b = where(keep).clone()\n"
        "        if overwrite:\n            where(keep).fill_(0)\n        return keep, to_b\n\n"
        "    owner.node = Node('CopySlices', (old, new), rule)\n    return a\n\n\n"
        "def add_(a, b):\n    return _write(a, b, False)\n\n\n"
        "def copy_(a, b):\n    return _write(a, b, True)\n"),
        "\n\n".join(ENGINE_CELLS)),
]

# ---------------------------------------------------------------- lesson 11
# The engine's cells (Tensor, the rules, the operators, backward), read from the lesson,
# for an answer checked outside the notebook (the kernel's test).
import json  # noqa: E402
from pathlib import Path  # noqa: E402

_LESSON_11 = json.loads((Path(__file__).parents[1] / "notebooks"
                         / "11-a-tensor-engine-of-your-own.ipynb").read_text())
LESSON_11_ENGINE = "\n\n".join(
    "".join(cell["source"]) for cell in _LESSON_11["cells"]
    if cell["id"] in ("l11-03", "l11-05", "l11-07", "l11-09", "l11-11", "l11-13"))

HONEST += [
    Honest("l11-matmul", "loops that sum the broadcast dimensions away", (
        "def broadcast_matmul(a, b):\n"
        "    A, B = a.data, b.data\n"
        "\n"
        "    def rule(g):\n"
        "        A2 = A.unsqueeze(0) if A.dim() == 1 else A\n"
        "        B2 = B.unsqueeze(-1) if B.dim() == 1 else B\n"
        "        if B.dim() == 1:\n"
        "            g = g.unsqueeze(-1)\n"
        "        if A.dim() == 1:\n"
        "            g = g.unsqueeze(-2)\n"
        "        ga, gb = g @ B2.transpose(-1, -2), A2.transpose(-1, -2) @ g\n"
        "        while ga.dim() > A2.dim():\n"
        "            ga = ga.sum(0)\n"
        "        while gb.dim() > B2.dim():\n"
        "            gb = gb.sum(0)\n"
        "        for i, n in enumerate(A2.shape):\n"
        "            if n == 1 and ga.shape[i] != 1:\n"
        "                ga = ga.sum(i, keepdim=True)\n"
        "        for i, n in enumerate(B2.shape):\n"
        "            if n == 1 and gb.shape[i] != 1:\n"
        "                gb = gb.sum(i, keepdim=True)\n"
        "        return ga.reshape(A.shape), gb.reshape(B.shape)\n"
        "\n"
        "    return Tensor(A @ B, (a, b), 'matmul', rule)\n"), LESSON_11_ENGINE),
    Honest("l11-cumsum", "the total minus what came before", (
        "def cumsum(a, dim):\n"
        "    def rule(g):\n"
        "        return (g.sum(dim, keepdim=True) - g.cumsum(dim) + g,)\n"
        "\n"
        "    return Tensor(torch.cumsum(a.data, dim=dim), (a,), 'cumsum', rule)\n"),
        LESSON_11_ENGINE),
    Honest("l11-cumsum", "a loop over the positions, from the end", (
        "def cumsum(a, dim):\n"
        "    out = a.data.cumsum(dim)\n"
        "\n"
        "    def rule(g):\n"
        "        grad = torch.zeros_like(g)\n"
        "        running = torch.zeros_like(g.select(dim, 0))\n"
        "        for j in reversed(range(g.shape[dim])):\n"
        "            running = running + g.select(dim, j)\n"
        "            grad.select(dim, j).copy_(running)\n"
        "        return (grad,)\n"
        "\n"
        "    return Tensor(out, (a,), 'cumsum', rule)\n"), LESSON_11_ENGINE),
    Honest("l11-cumsum", "a triangular matrix", (
        "def cumsum(a, dim):\n"
        "    n = a.shape[dim]\n"
        "    later = torch.triu(torch.ones(n, n, dtype=a.data.dtype))  # [j, k]: k >= j\n"
        "\n"
        "    def rule(g):\n"
        "        moved = g.movedim(dim, -1)\n"
        "        return ((moved @ later.T).movedim(-1, dim),)\n"
        "\n"
        "    return Tensor(a.data.cumsum(dim), (a,), 'cumsum', rule)\n"), LESSON_11_ENGINE),
    Honest("l11-amax", "a mask and where", (
        "def amax(a, dim, keepdim=False):\n"
        "    out = a.data.amax(dim, keepdim=keepdim)\n"
        "\n"
        "    def rule(g):\n"
        "        top = out if keepdim else out.unsqueeze(dim)\n"
        "        g = g if keepdim else g.unsqueeze(dim)\n"
        "        mask = a.data == top\n"
        "        shares = g / mask.sum(dim, keepdim=True)\n"
        "        return (torch.where(mask, shares, torch.zeros_like(a.data)),)\n"
        "\n"
        "    return Tensor(out, (a,), 'amax', rule)\n"), LESSON_11_ENGINE),
]

# ---------------------------------------------------------------- lesson 25
HONEST += [
    Honest("l25-sac-policy", "which argument is the left factor, per op", (
        "def policy_for(ratio):\n"
        "    aten = torch.ops.aten\n"
        "    left = {aten.mm.default: 0, aten.bmm.default: 0, aten.addmm.default: 1}\n"
        "\n"
        "    def policy(ctx, op, *args, **kwargs):\n"
        "        if op not in left:\n"
        "            return CheckpointPolicy.PREFER_RECOMPUTE\n"
        "        out = ctx.op_output\n"
        "        flops = 2 * out.numel() * args[left[op]].shape[-1]\n"
        "        per_byte = flops / (out.numel() * out.element_size())\n"
        "        if per_byte > ratio:\n"
        "            return CheckpointPolicy.MUST_SAVE\n"
        "        return CheckpointPolicy.PREFER_RECOMPUTE\n"
        "\n"
        "    return policy\n"),
        "from torch.utils.checkpoint import CheckpointPolicy\n"),
    Honest("l25-sac-policy", "a class, ops by name, PREFER_SAVE", (
        "import math\n"
        "\n"
        "\n"
        "class WorthKeeping:\n"
        "    \"\"\"Keeps a product when computing it again costs more than ratio FLOPs a byte.\"\"\"\n"
        "\n"
        "    def __init__(self, ratio):\n"
        "        self.ratio = ratio\n"
        "\n"
        "    def __call__(self, ctx, op, *args, **kwargs):\n"
        "        if str(op) in ('aten.mm.default', 'aten.bmm.default', 'aten.addmm.default'):\n"
        "            a, out = args[-2], ctx.op_output\n"
        "            if 2 * math.prod(out.shape) * a.shape[-1] > self.ratio * out.nbytes:\n"
        "                return CheckpointPolicy.PREFER_SAVE\n"
        "        return CheckpointPolicy.PREFER_RECOMPUTE\n"
        "\n"
        "\n"
        "def policy_for(ratio):\n"
        "    return WorthKeeping(ratio)\n"),
        "from torch.utils.checkpoint import CheckpointPolicy\n"),
]

# ---------------------------------------------------------------- lesson 27
# The lesson's numpy forward, for an answer checked outside the notebook (the kernel's test).
LESSON_27_FORWARD = (
    "import numpy as np\n\n\n"
    "def rms_norm_forward(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:\n"
    "    a, b = x.detach().numpy(), w.detach().numpy()\n"
    "    r = 1.0 / np.sqrt((a * a).mean(axis=-1, keepdims=True) + eps)\n"
    "    return torch.from_numpy(a * r * b)\n")

HONEST += [
    Honest("l27-rms-norm-vmap", "every input brought to the batch size at the front", (
        "def rms_norm_vmap(info, in_dims, x, w, eps):\n"
        "    def front(t, dim):\n"
        "        if dim is None:\n"
        "            return t.expand(info.batch_size, *t.shape)\n"
        "        return t.movedim(dim, 0)\n"
        "\n"
        "    xs, ws = front(x, in_dims[0]), front(w, in_dims[1])\n"
        "    return rms_norm_forward(xs, ws[:, None, :], eps), 0\n"), LESSON_27_FORWARD),
    Honest("l27-rms-norm-vmap", "permute, and the batch left where x had it", (
        "def rms_norm_vmap(info, in_dims, x, w, eps):\n"
        "    x_dim, w_dim = in_dims[0], in_dims[1]\n"
        "    if w_dim is None:  # one w for all: the batch can stay where it is\n"
        "        return rms_norm_forward(x, w, eps), x_dim\n"
        "    w = w.movedim(w_dim, 0).reshape(info.batch_size, 1, -1)\n"
        "    if x_dim is not None:\n"
        "        order = [x_dim] + [k for k in range(x.dim()) if k != x_dim]\n"
        "        x = x.permute(order)\n"
        "    return rms_norm_forward(x, w, eps), 0\n"), LESSON_27_FORWARD),
]


# ---------------------------------------------------------------- lessons 03, 07, 08
# Lesson 03's engine, as the notebook defines it above its exercises (sections 1 to 3:
# Value, add, mul, tanh, the operators, the sort and backward): the kernel test runs an
# answer without the lesson's cells, so an answer that uses them brings them along.
LESSON_03_ENGINE = (
    "class Value:\n"
    '    """A number that remembers how it was made."""\n'
    "\n"
    '    def __init__(self, data, parents=(), op="", name=""):\n'
    "        self.data = float(data)\n"
    "        self.grad = 0.0\n"
    "        self.parents = parents\n"
    "        self.op = op\n"
    "        self.name = name\n"
    "        self.backward_rule = lambda: None\n"
    "\n"
    "    def __repr__(self):\n"
    '        return f"Value({self.data:.4g}, grad={self.grad:.4g})"\n'
    "\n\n"
    "def as_value(x):\n"
    "    return x if isinstance(x, Value) else Value(x)\n"
    "\n\n"
    "def add(a, b):\n"
    "    a, b = as_value(a), as_value(b)\n"
    '    out = Value(a.data + b.data, (a, b), "+")\n'
    "\n"
    "    def rule():\n"
    "        a.grad += out.grad\n"
    "        b.grad += out.grad\n"
    "\n"
    "    out.backward_rule = rule\n"
    "    return out\n"
    "\n\n"
    "def mul(a, b):\n"
    "    a, b = as_value(a), as_value(b)\n"
    '    out = Value(a.data * b.data, (a, b), "*")\n'
    "\n"
    "    def rule():\n"
    "        a.grad += b.data * out.grad\n"
    "        b.grad += a.data * out.grad\n"
    "\n"
    "    out.backward_rule = rule\n"
    "    return out\n"
    "\n\n"
    "def tanh(a):\n"
    '    out = Value(math.tanh(a.data), (a,), "tanh")\n'
    "\n"
    "    def rule():\n"
    "        a.grad += (1 - out.data**2) * out.grad\n"
    "\n"
    "    out.backward_rule = rule\n"
    "    return out\n"
    "\n\n"
    "Value.__add__ = Value.__radd__ = add\n"
    "Value.__mul__ = Value.__rmul__ = mul\n"
    "Value.__neg__ = lambda a: a * -1\n"
    "Value.__sub__ = lambda a, b: a + (-as_value(b))\n"
    "Value.__rsub__ = lambda a, b: as_value(b) + (-a)\n"
    "Value.__truediv__ = lambda a, b: a * (1 / b)\n"
    "\n\n"
    + LESSON_03_SORT + "\n\n"
    "def backward(root):\n"
    "    order = topo_order(root)\n"
    "    for node in order:\n"
    "        if node.parents:\n"
    "            node.grad = 0.0\n"
    "    root.grad += 1.0\n"
    "    for node in reversed(order):\n"
    "        node.backward_rule()\n"
)

# Exercise 1 of lesson 03 as its solution cell writes it: Exercise 2's answers use it.
LESSON_03_OPS = (
    "def exp(a):\n"
    '    out = Value(math.exp(a.data), (a,), "exp")\n'
    "\n"
    "    def rule():\n"
    "        a.grad += out.data * out.grad\n"
    "\n"
    "    out.backward_rule = rule\n"
    "    return out\n"
    "\n\n"
    "def log(a):\n"
    '    out = Value(math.log(a.data), (a,), "log")\n'
    "\n"
    "    def rule():\n"
    "        a.grad += (1 / a.data) * out.grad\n"
    "\n"
    "    out.backward_rule = rule\n"
    "    return out\n"
    "\n\n"
    "def power(a, k):\n"
    '    out = Value(a.data**k, (a,), f"**{k:g}")\n'
    "\n"
    "    def rule():\n"
    "        a.grad += k * a.data ** (k - 1) * out.grad\n"
    "\n"
    "    out.backward_rule = rule\n"
    "    return out\n"
)
LESSON_03_BOTH = LESSON_03_ENGINE + "\n\n" + LESSON_03_OPS


HONEST += [
    # ---------------------------------------------------------------- l03-ops
    Honest("l03-ops", "micrograd-style _backward, the slope kept from the forward", (
        "def exp(a):\n"
        "    e = math.exp(a.data)\n"
        "    out = Value(e, (a,), 'exp')\n"
        "\n"
        "    def _backward():\n"
        "        a.grad += e * out.grad  # (e^a)' = e^a\n"
        "\n"
        "    out.backward_rule = _backward\n"
        "    return out\n"
        "\n\n"
        "def log(a):\n"
        "    out = Value(math.log(a.data), (a,), 'log')\n"
        "\n"
        "    def _backward():\n"
        "        a.grad += out.grad / a.data  # (ln a)' = 1/a\n"
        "\n"
        "    out.backward_rule = _backward\n"
        "    return out\n"
        "\n\n"
        "def power(a, k):\n"
        "    out = Value(a.data ** k, (a,), f'^{k}')\n"
        "\n"
        "    def _backward():\n"
        "        a.grad += out.grad * k * a.data ** (k - 1)\n"
        "\n"
        "    out.backward_rule = _backward\n"
        "    return out\n"
    ), earlier=LESSON_03_ENGINE),
    Honest("l03-ops", "a class with __call__: one object per operation", (
        "class Unary:\n"
        "    def __init__(self, name, f, slope):\n"
        "        self.name, self.f, self.slope = name, f, slope\n"
        "\n"
        "    def __call__(self, a, *extra):\n"
        "        out = Value(self.f(a.data, *extra), (a,), self.name)\n"
        "\n"
        "        def rule():\n"
        "            a.grad += self.slope(a.data, *extra) * out.grad\n"
        "\n"
        "        out.backward_rule = rule\n"
        "        return out\n"
        "\n\n"
        "exp = Unary('exp', math.exp, math.exp)\n"
        "log = Unary('log', math.log, lambda x: 1 / x)\n"
        "power = Unary('pow', lambda x, k: x**k, lambda x, k: k * x ** (k - 1))\n"
    ), earlier=LESSON_03_ENGINE),
    Honest("l03-ops", "a helper for one-input nodes in an earlier cell", (
        "def exp(a):\n"
        "    y = math.exp(a.data)\n"
        "    return one_input_node(a, y, lambda: y, 'exp')\n"
        "\n\n"
        "def log(a):\n"
        "    return one_input_node(a, math.log(a.data), lambda: 1.0 / a.data, 'log')\n"
        "\n\n"
        "def power(a, k):  # k is a plain number\n"
        "    return one_input_node(a, pow(a.data, k), lambda: k * pow(a.data, k - 1), 'pow')\n"
    ), earlier=LESSON_03_ENGINE + "\n\n" + (
        "def one_input_node(a, value, local_slope, op):\n"
        "    out = Value(value, (a,), op)\n"
        "\n"
        "    def rule():\n"
        "        a.grad = a.grad + local_slope() * out.grad\n"
        "\n"
        "    out.backward_rule = rule\n"
        "    return out\n"
    )),
    # ---------------------------------------------------------------- l03-softmax-ce
    Honest("l03-softmax-ce", "log-sum-exp minus the target's logit", (
        "def cross_entropy(logits, target):\n"
        "    # -ln(e^z_t / S) = ln S - z_t\n"
        "    s = exp(logits[0]) + exp(logits[1]) + exp(logits[2])\n"
        "    return log(s) - logits[target]\n"
    ), earlier=LESSON_03_BOTH),
    Honest("l03-softmax-ce", "a loop for the sum, the probabilities listed", (
        "def cross_entropy(logits, target):\n"
        "    exps = []\n"
        "    for z in logits:\n"
        "        exps.append(exp(z))\n"
        "    denom = sum(exps)\n"
        "    inv = power(denom, -1)\n"
        "    probs = [e * inv for e in exps]\n"
        "    return -1 * log(probs[target])\n"
    ), earlier=LESSON_03_BOTH),
    Honest("l03-softmax-ce", "the largest logit subtracted first, for stability", (
        "def cross_entropy(logits, target):\n"
        "    m = max(z.data for z in logits)  # a plain number: the loss does not change\n"
        "    shifted = [z - m for z in logits]\n"
        "    counts = [exp(s) for s in shifted]\n"
        "    p_t = counts[target] * power(counts[0] + counts[1] + counts[2], -1)\n"
        "    return -log(p_t)\n"
    ), earlier=LESSON_03_BOTH),
    # ---------------------------------------------------------------- l07-engine-frees
    Honest("l07-engine-frees", "a freed flag, other names, slicing for the reverse order", (
        "class Saved:\n"
        "    def __init__(self, tensor):\n"
        "        self._t = tensor\n"
        "        self._saved_at = tensor._version\n"
        "        self.freed = False\n"
        "\n"
        "    def unpack(self):\n"
        "        if self.freed:\n"
        "            raise RuntimeError('Trying to backward through the graph a second time: '\n"
        "                               'the saved tensors were already freed')\n"
        "        if self._t._version > self._saved_at:\n"
        "            raise RuntimeError('one of the tensors needed for the gradient was modified '\n"
        "                               f'by an inplace operation (version {self._t._version}, '\n"
        "                               f'expected {self._saved_at})')\n"
        "        return self._t\n"
        "\n"
        "    def free(self):\n"
        "        self._t = None\n"
        "        self.freed = True\n"
        "\n\n"
        "def backward(root, retain_graph=False):\n"
        "    nodes = topo_order(root)\n"
        "    for n in nodes:\n"
        "        if len(n.parents) > 0:\n"
        "            n.grad = torch.zeros_like(n.data)\n"
        "    root.grad = root.grad + torch.ones_like(root.data)\n"
        "    for n in nodes[::-1]:\n"
        "        n.rule()\n"
        "        if retain_graph:\n"
        "            continue\n"
        "        for box in n.saved:\n"
        "            box.free()\n"
    ), earlier=LESSON_03_SORT),
    Honest("l07-engine-frees", "a dict in the box, its own sort by counting users", (
        "class Saved:\n"
        "    def __init__(self, tensor):\n"
        "        self.slot = {'tensor': tensor, 'version': tensor._version}\n"
        "\n"
        "    def unpack(self):\n"
        "        if 'tensor' not in self.slot:\n"
        "            raise RuntimeError('saved tensor already freed: pass retain_graph=True to '\n"
        "                               'backward through this graph twice')\n"
        "        t, v = self.slot['tensor'], self.slot['version']\n"
        "        if t._version != v:\n"
        "            raise RuntimeError(f'saved tensor modified in place (saved at version {v}, '\n"
        "                               f'now {t._version})')\n"
        "        return t\n"
        "\n"
        "    def free(self):\n"
        "        self.slot.pop('tensor', None)\n"
        "\n\n"
        "def backward(root, retain_graph=False):\n"
        "    # count each node's users, then run a node once all its users have run\n"
        "    users, todo, seen = {}, [root], {id(root)}\n"
        "    while todo:\n"
        "        node = todo.pop()\n"
        "        if node.parents:\n"
        "            node.grad = torch.zeros_like(node.data)\n"
        "        for p in node.parents:\n"
        "            users[id(p)] = users.get(id(p), 0) + 1\n"
        "            if id(p) not in seen:\n"
        "                seen.add(id(p))\n"
        "                todo.append(p)\n"
        "    root.grad += 1\n"
        "    ready = [root]\n"
        "    while ready:\n"
        "        node = ready.pop()\n"
        "        node.rule()\n"
        "        if not retain_graph:\n"
        "            for box in node.saved:\n"
        "                box.free()\n"
        "        for p in node.parents:\n"
        "            users[id(p)] -= 1\n"
        "            if users[id(p)] == 0:\n"
        "                ready.append(p)\n"
    )),
    Honest("l07-engine-frees", "__slots__, and the frees gathered in a helper", (
        "class Saved:\n"
        "    __slots__ = ('data', 'version')\n"
        "\n"
        "    def __init__(self, tensor):\n"
        "        self.data, self.version = tensor, tensor._version\n"
        "\n"
        "    def unpack(self):\n"
        "        if self.data is None:\n"
        "            raise RuntimeError('freed: this box was emptied by a backward without '\n"
        "                               'retain_graph')\n"
        "        now = self.data._version\n"
        "        if now != self.version:\n"
        "            raise RuntimeError(f'changed in place: version {now}, saved at {self.version}')\n"
        "        return self.data\n"
        "\n"
        "    def free(self):\n"
        "        self.data = None\n"
        "\n\n"
        "def release(node):\n"
        "    for box in node.saved:\n"
        "        box.free()\n"
        "\n\n"
        "def backward(root, retain_graph=False):\n"
        "    order = topo_order(root)\n"
        "    for node in filter(lambda n: n.parents, order):\n"
        "        node.grad = torch.zeros_like(node.data)\n"
        "    root.grad = 1 + root.grad\n"
        "    while order:\n"
        "        node = order.pop()\n"
        "        node.rule()\n"
        "        if not retain_graph:\n"
        "            release(node)\n"
    ), earlier=LESSON_03_SORT),
    # ---------------------------------------------------------------- l08-band-jacobian
    Honest("l08-band-jacobian", "loops: a fresh leaf per pass, the band filled entry by entry", (
        "def band_jacobian(g, x):\n"
        "    n = len(x)\n"
        "    J = torch.zeros(n, n, dtype=x.dtype)\n"
        "    for start in range(3):\n"
        "        v = torch.zeros(n, dtype=x.dtype)\n"
        "        v[start::3] = 1.0  # rows start, start + 3, ...: no two read the same x[j]\n"
        "        leaf = x.detach().clone().requires_grad_(True)\n"
        "        g(leaf).backward(v)\n"
        "        for i in range(start, n, 3):\n"
        "            for j in range(max(0, i - 1), min(n, i + 2)):\n"
        "                J[i, j] = leaf.grad[j]\n"
        "    return J\n"
    )),
    Honest("l08-band-jacobian", "one leaf, .grad set to None, read column by column", (
        "def band_jacobian(g, x):\n"
        "    x = x.detach().requires_grad_()\n"
        "    n = x.shape[0]\n"
        "    J = x.new_zeros(n, n)\n"
        "    for c in range(3):\n"
        "        x.grad = None\n"
        "        seed = torch.tensor([1.0 if i % 3 == c else 0.0 for i in range(n)], dtype=x.dtype)\n"
        "        g(x).backward(gradient=seed)\n"
        "        for j in range(n):\n"
        "            # of the rows j - 1, j, j + 1 that read x[j], exactly one is in pass c\n"
        "            i = j - 1 + (c - (j - 1)) % 3\n"
        "            if 0 <= i < n:\n"
        "                J[i, j] = x.grad[j]\n"
        "    return J\n"
    )),
    Honest("l08-band-jacobian", "torch.autograd.backward, the passes stacked, diagonals by torch.diag", (
        "def band_jacobian(g, x):\n"
        "    n = x.numel()\n"
        "    passes = []\n"
        "    for c in range(3):\n"
        "        xc = x.detach().clone().requires_grad_()\n"
        "        weights = torch.zeros_like(xc)\n"
        "        weights[c::3] = 1\n"
        "        torch.autograd.backward(g(xc), weights)\n"
        "        passes.append(xc.grad)\n"
        "    P = torch.stack(passes)  # P[c, j]: column j of the row of pass c that reads x[j]\n"
        "    J = torch.zeros(n, n, dtype=x.dtype)\n"
        "    for d in (-1, 0, 1):  # J[i, i + d] = P[i % 3, i + d]\n"
        "        rows = torch.arange(max(0, -d), min(n, n - d))\n"
        "        J = J + torch.diag(P[rows % 3, rows + d], d)\n"
        "    return J\n"
    )),
]


# Exercise 2 over an Exercise 1 written with a class or with a shared helper: the lesson's
# own cross-entropy must pass whatever wrote the exp and log nodes (the check tells them
# by their values, not by the name of the function that made their rule).
_CE_STORED = ("def cross_entropy(logits, target):\n"
              "    counts = [exp(z) for z in logits]\n"
              "    total = counts[0] + counts[1] + counts[2]\n"
              "    prob = counts[target] * power(total, -1)\n"
              "    return -log(prob)\n")
HONEST += [
    Honest("l03-softmax-ce", f"the lesson's loss over ops written as: {ops.style}", _CE_STORED,
           (ops.earlier or "") + "\n\n" + ops.source)
    for ops in HONEST if ops.key == "l03-ops" and ops.style.startswith(("a class", "a helper"))
]

# ---------------------------------------------------------------- lessons 13, 16, 18
# ---------------------------------------------------------------- lesson 13
# The lesson's lstm_step (section 5, as the notebook defines it above its exercises) and a
# learner's own lstm_step_backward (Exercise 5): the kernel's test runs an answer without the
# lesson's cells, so an answer to Exercise 6, which uses both, brings them along.
LESSON_13_STEP = '''\
def lstm_step(x, h, c, W, b):
    """One LSTM step, one named intermediate per line; returns them all."""
    z = torch.cat([x, h], dim=1) @ W + b
    zi, zf, zg, zo = z.chunk(4, dim=1)
    i = torch.sigmoid(zi)
    f = torch.sigmoid(zf)
    g = torch.tanh(zg)
    o = torch.sigmoid(zo)
    c_new = f * c + i * g
    h_new = o * torch.tanh(c_new)
    return {"z": z, "i": i, "f": f, "g": g, "o": o, "c_new": c_new, "h_new": h_new}


def lstm_step_backward(i, f, g, o, c, c_new, dh_new, dc_new):
    t = torch.tanh(c_new)
    dc_total = dc_new + dh_new * o * (1 - t * t)
    dz = torch.cat([dc_total * g * i * (1 - i), dc_total * c * f * (1 - f),
                    dc_total * i * (1 - g * g), dh_new * t * o * (1 - o)], dim=1)
    return dz, dc_total * f
'''

STEP_SLOPES = '''\
def sigmoid_slope(s):
    """d sigmoid / d z, written with the sigmoid's output s."""
    return s * (1 - s)


def tanh_slope(t):
    """d tanh / d z, written with the tanh's output t."""
    return 1 - t * t
'''

# ---------------------------------------------------------------- lesson 16
# Section 3's helpers, as the notebook defines them above Exercise 4.
LESSON_16_HELPERS = '''\
from torch.autograd.graph import saved_tensors_hooks


def multiply_adds(block):
    "Multiply-adds per example that recomputing a block runs: its Linear layers but the last."
    linears = [m for m in block.modules() if isinstance(m, nn.Linear)]
    return sum(m.in_features * m.out_features for m in linears[:-1])


def kept_inside(block, h):
    "The block's output, and the bytes it keeps for backward besides its input and weights."
    skip = {p.untyped_storage().data_ptr() for p in block.parameters()}
    skip.add(h.untyped_storage().data_ptr())
    seen = {}

    def pack(t):
        if t.untyped_storage().data_ptr() not in skip:
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with saved_tensors_hooks(pack, lambda t: t):
        out = block(h)
    return out, sum(seen.values())
'''

# ---------------------------------------------------------------- lesson 18
LESSON_18_IMPORTS = "from torch.func import functional_call, grad, vmap\n"


HONEST += [
    # ------------------------------------------------------------ l13-lstm-step
    Honest("l13-lstm-step", "slope helpers in an earlier cell, dz filled block by block", '''\
def lstm_step_backward(i, f, g, o, c, c_new, dh_new, dc_new):
    H = i.shape[1]
    tc = torch.tanh(c_new)
    # h_new = o * tanh(c_new): its gradient reaches o and c_new
    d_o = dh_new * tc
    dc = dc_new + dh_new * o * tanh_slope(tc)
    # c_new = f * c + i * g
    d_f, d_c, d_i, d_g = dc * c, dc * f, dc * g, dc * i
    dz = torch.zeros(i.shape[0], 4 * H, dtype=i.dtype)
    dz[:, 0:H] = d_i * sigmoid_slope(i)
    dz[:, H:2 * H] = d_f * sigmoid_slope(f)
    dz[:, 2 * H:3 * H] = d_g * tanh_slope(g)
    dz[:, 3 * H:] = d_o * sigmoid_slope(o)
    return dz, d_c
''', earlier=STEP_SLOPES),
    Honest("l13-lstm-step", "a dict of gates, lambdas for the slopes, the cell's gradient last", '''\
def lstm_step_backward(i, f, g, o, c, c_new, dh_new, dc_new):
    sig = lambda s: s - s ** 2
    th = lambda t: 1.0 - t ** 2
    tanh_c = c_new.tanh()
    grad_c_new = dh_new * o * th(tanh_c) + dc_new
    grads = {
        "i": grad_c_new * g * sig(i),
        "f": grad_c_new * c * sig(f),
        "g": grad_c_new * i * th(g),
        "o": dh_new * tanh_c * sig(o),
    }
    dz = torch.hstack([grads[gate] for gate in "ifgo"])
    dc = f * grad_c_new
    return dz, dc
'''),
    Honest("l13-lstm-step", "a class with __call__, the sigmoid's gradient through the gate's pre-activation", '''\
class StepBack:
    """One LSTM step's backward: the gradient at each gate, then at its pre-activation."""

    def gates(self, i, f, g, o, c, tc, dh, dc):
        return [dc * g, dc * c, dc * i, dh * tc]

    def __call__(self, i, f, g, o, c, c_new, dh_new, dc_new):
        tc = torch.tanh(c_new)
        dc = dc_new + dh_new * o * (1 - tc) * (1 + tc)
        di, df, dg, do = self.gates(i, f, g, o, c, tc, dh_new, dc)
        pre = [di * i * (1 - i), df * f * (1 - f), dg * (1 - g) * (1 + g), do * o * (1 - o)]
        return torch.cat(pre, dim=-1), dc * f


lstm_step_backward = StepBack()
'''),
    # ------------------------------------------------------------ l13-lstm-bptt
    Honest("l13-lstm-bptt", "W split into its x rows and h rows, += into the gradients", '''\
def lstm_bptt(xs, h0, c0, W, b, dhs):
    n_in = xs.shape[-1]
    W_x, W_h = W[:n_in], W[n_in:]
    steps = []
    h, c = h0, c0
    for t in range(xs.shape[0]):
        out = lstm_step(xs[t], h, c, W, b)
        steps.append({"x": xs[t], "h": h, "c": c, **out})
        h, c = out["h_new"], out["c_new"]
    dW_x, dW_h = torch.zeros_like(W_x), torch.zeros_like(W_h)
    db = torch.zeros_like(b)
    dh_next = torch.zeros_like(h0)
    dc_next = torch.zeros_like(c0)
    for t in range(xs.shape[0] - 1, -1, -1):
        s = steps[t]
        dz, dc_next = lstm_step_backward(s["i"], s["f"], s["g"], s["o"], s["c"], s["c_new"],
                                         dhs[t] + dh_next, dc_next)
        dW_x += s["x"].T @ dz
        dW_h += s["h"].T @ dz
        db += dz.sum(dim=0)
        dh_next = dz @ W_h.T
    return torch.cat([dW_x, dW_h], dim=0), db, dh_next, dc_next
''', earlier=LESSON_13_STEP),
    Honest("l13-lstm-bptt", "a stack of caches popped from the end, einsum for the outer products", '''\
def lstm_bptt(xs, h0, c0, W, b, dhs):
    cache = []
    h, c = h0, c0
    for x in xs:
        step = lstm_step(x, h, c, W, b)
        cache.append((torch.cat([x, h], dim=1), c, step))
        h, c = step["h_new"], step["c_new"]
    dW = W.new_zeros(W.shape)
    db = b.new_zeros(b.shape)
    dh = h0.new_zeros(h0.shape)
    dc = c0.new_zeros(c0.shape)
    t = len(cache)
    while cache:
        t -= 1
        xh, c_prev, step = cache.pop()
        dz, dc = lstm_step_backward(step["i"], step["f"], step["g"], step["o"], c_prev,
                                    step["c_new"], dh + dhs[t], dc)
        dW = dW + torch.einsum("ni,nj->ij", xh, dz)
        db = db + torch.einsum("nj->j", dz)
        dxh = torch.einsum("nj,ij->ni", dz, W)
        dh = dxh[:, xs.shape[2]:]
    return dW, db, dh, dc
''', earlier=LESSON_13_STEP),
    Honest("l13-lstm-bptt", "a class that records the tape forward and walks it back", '''\
class Tape:
    def __init__(self, W, b):
        self.W, self.b, self.records = W, b, []

    def forward(self, xs, h, c):
        for x in xs:
            out = lstm_step(x, h, c, self.W, self.b)
            self.records.append((x, h, c, out))
            h, c = out["h_new"], out["c_new"]

    def backward(self, dhs, dh, dc):
        dW, db = 0 * self.W, 0 * self.b
        for t in reversed(range(len(self.records))):
            x, h, c, out = self.records[t]
            dz, dc = lstm_step_backward(out["i"], out["f"], out["g"], out["o"], c,
                                        out["c_new"], dhs[t] + dh, dc)
            inputs = torch.cat((x, h), 1)
            dW = dW + inputs.t() @ dz
            db = db + dz.sum(0)
            dh = (dz @ self.W.t())[:, x.shape[1]:]
        return dW, db, dh, dc


def lstm_bptt(xs, h0, c0, W, b, dhs):
    tape = Tape(W, b)
    tape.forward(xs, h0, c0)
    return tape.backward(dhs, torch.zeros_like(h0), torch.zeros_like(c0))
''', earlier=LESSON_13_STEP),
    # ------------------------------------------------------------ l16-checkpoint
    Honest("l16-checkpoint", "itertools.combinations, the best so far kept, integer budget", '''\
import itertools


def choose_checkpoints(blocks, x):
    saves, costs = [], []
    h = x
    for block in blocks:
        h, inside = kept_inside(block, h)
        saves.append(inside)
        costs.append(multiply_adds(block))
    n = len(blocks)
    # Plainly the stack keeps every block's input (each shaped like x) and what it keeps inside.
    plain = n * x.numel() * x.element_size() + sum(saves)
    best, best_cost = None, None
    for r in range(n + 1):
        for combo in itertools.combinations(range(n), r):
            kept = plain - sum(saves[i] for i in combo)
            cost = sum(costs[i] for i in combo)
            if 100 * kept <= 60 * plain and (best_cost is None or cost < best_cost):
                best, best_cost = list(combo), cost
    return best
''', earlier=LESSON_16_HELPERS),
    Honest("l16-checkpoint", "the plain stack measured with its own hook, a recursive search", '''\
def choose_checkpoints(blocks, x):
    # What the plain stack keeps: every saved storage that is not a weight, counted once.
    weights = {p.untyped_storage().data_ptr() for p in blocks.parameters()}
    storages = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in weights:
            storages[ptr] = t.untyped_storage().nbytes()
        return t

    with saved_tensors_hooks(pack, lambda t: t):
        h = x
        for block in blocks:
            h = block(h)
    plain = sum(storages.values())
    budget = 0.6 * plain

    saved, cost = [], []
    h = x
    for block in blocks:
        h, nbytes = kept_inside(block, h)
        saved.append(nbytes)
        cost.append(multiply_adds(block))

    def search(k, kept, chosen):
        """The cheapest choice among blocks k.. once ``chosen`` is decided: (cost, list)."""
        if k == len(blocks):
            return (sum(cost[i] for i in chosen), chosen) if kept <= budget else None
        options = [search(k + 1, kept, chosen), search(k + 1, kept - saved[k], chosen + [k])]
        options = [o for o in options if o is not None]
        return min(options, key=lambda o: o[0]) if options else None

    return search(0, plain, [])[1]
''', earlier=LESSON_16_HELPERS),
    Honest("l16-checkpoint", "itertools.product over keep/checkpoint flags, sorted by cost", '''\
from itertools import product


def choose_checkpoints(blocks, x):
    per_block = []
    out = x
    for b in blocks:
        out, inside = kept_inside(b, out)
        per_block.append((inside, multiply_adds(b)))
    input_bytes = x.untyped_storage().nbytes()
    plain = sum(input_bytes + inside for inside, _ in per_block)
    candidates = []
    for flags in product([False, True], repeat=len(blocks)):
        picked = [i for i, on in enumerate(flags) if on]
        kept = plain - sum(per_block[i][0] for i in picked)
        if kept / plain <= 0.6:
            candidates.append((sum(per_block[i][1] for i in picked), picked))
    candidates.sort(key=lambda pair: pair[0])
    return candidates[0][1]
''', earlier=LESSON_16_HELPERS),
    # ------------------------------------------------------------ l16-tbptt
    Honest("l16-tbptt", "torch.autograd.grad, the losses stacked, a tensor returned", '''\
def loop_grad(W, xs, k=None):
    W = W.detach().requires_grad_(True)
    h = W.new_zeros(W.shape[0])
    losses = []
    for t in range(len(xs)):
        if k is not None and t % k == 0:
            h = h.detach()
        h = torch.tanh(W @ h + xs[t])
        losses.append((h ** 2).sum())
    (g,) = torch.autograd.grad(torch.stack(losses).sum(), W)
    return g


def truncation_error(W, xs, k):
    g = loop_grad(W, xs)
    g_k = loop_grad(W, xs, k)
    return torch.linalg.norm(g_k - g) / torch.linalg.norm(g)
'''),
    Honest("l16-tbptt", "a class with __call__, a flag for truncating, sqrt of sums", '''\
class LoopGradient:
    def __init__(self, W, xs):
        self.W, self.xs = W, xs

    def __call__(self, k=0):
        W = self.W.clone().requires_grad_()
        h = torch.zeros(W.shape[0], dtype=W.dtype)
        loss = torch.zeros((), dtype=W.dtype)
        for t, x in enumerate(self.xs):
            truncate = k > 0 and t % k == 0
            if truncate:
                h = h.detach()
            h = (W @ h + x).tanh()
            loss = loss + h.pow(2).sum()
        loss.backward()
        return W.grad


def truncation_error(W, xs, k):
    gradient = LoopGradient(W, xs)
    full = gradient()
    cut = gradient(k)
    diff = ((cut - full) ** 2).sum().sqrt()
    return float(diff / (full ** 2).sum().sqrt())
'''),
    Honest("l16-tbptt", "backpropagation through time written out, detach as a cut in the recurrence", '''\
def bptt_grad(W, xs, k=None):
    # forward: keep every state, and whether the step started from a detached h
    hs = [torch.zeros(W.shape[0], dtype=W.dtype)]
    cut = []
    for t, x in enumerate(xs):
        cut.append(k is not None and t % k == 0)
        hs.append(torch.tanh(W @ hs[-1] + x))
    # backward: dL/dh_t = 2 h_t from its own loss, plus what step t + 1 sends back
    dW = torch.zeros_like(W)
    dh = torch.zeros(W.shape[0], dtype=W.dtype)
    for t in range(len(xs) - 1, -1, -1):
        h_t, h_prev = hs[t + 1], hs[t]
        da = (2 * h_t + dh) * (1 - h_t ** 2)   # at the pre-activation W h_prev + x_t
        dW += torch.outer(da, h_prev)
        dh = torch.zeros_like(dh) if cut[t] else W.T @ da   # a detached h passes nothing back
    return dW


def truncation_error(W, xs, k):
    g = bptt_grad(W, xs)
    g_k = bptt_grad(W, xs, k)
    return ((g_k - g).norm() / g.norm()).item()
'''),
    # ------------------------------------------------------------ l18-clip-per-example
    Honest("l18-clip-per-example", "torch.where for the scale, einsum for the weighted mean", '''\
def clipped_mean_gradient(model, X, Y, max_norm):
    params = {name: p.detach() for name, p in model.named_parameters()}

    def loss_of_one(params, x, y):
        pred = functional_call(model, params, (x[None],))
        return ((pred - y[None]) ** 2).mean()

    per_example = vmap(grad(loss_of_one), in_dims=(None, 0, 0))(params, X, Y)
    squares = torch.stack([g.reshape(g.shape[0], -1).pow(2).sum(dim=1)
                           for g in per_example.values()])
    norm = squares.sum(dim=0).sqrt()
    factor = torch.where(norm > max_norm, max_norm / norm, torch.ones_like(norm))
    n = X.shape[0]
    return {name: torch.einsum("n,n...->...", factor, g) / n
            for name, g in per_example.items()}
''', earlier=LESSON_18_IMPORTS),
    Honest("l18-clip-per-example", "one long vector per example, split back by the shapes", '''\
import torch.nn.functional as F


def clipped_mean_gradient(model, X, Y, max_norm):
    names = [name for name, _ in model.named_parameters()]
    values = tuple(p.detach() for _, p in model.named_parameters())

    def example_loss(values, xi, yi):
        out = functional_call(model, dict(zip(names, values)), (xi.unsqueeze(0),))
        return F.mse_loss(out, yi.unsqueeze(0))

    grads = vmap(grad(example_loss), in_dims=(None, 0, 0))(values, X, Y)
    flat = torch.cat([g.reshape(len(X), -1) for g in grads], dim=1)   # (N, all parameters)
    norms = flat.norm(dim=1, keepdim=True)
    flat = flat * torch.clamp(max_norm / norms, max=1.0)
    mean = flat.mean(dim=0)
    result, start = {}, 0
    for name, p in zip(names, values):
        result[name] = mean[start:start + p.numel()].view_as(p)
        start += p.numel()
    return result
''', earlier=LESSON_18_IMPORTS),
    Honest("l18-clip-per-example", "torch.func spelt out, a loop over the examples' scales", '''\
import math


def clipped_mean_gradient(model, X, Y, max_norm):
    params = dict(model.named_parameters())

    def loss(params, x, y):
        return ((torch.func.functional_call(model, params, x.unsqueeze(0))
                 - y.unsqueeze(0)) ** 2).mean()

    grads = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))(params, X, Y)
    grads = {name: g.detach() for name, g in grads.items()}  # params require grad: so do these
    total = {name: torch.zeros_like(p) for name, p in params.items()}
    for i in range(len(X)):
        norm = math.sqrt(sum(float((g[i] ** 2).sum()) for g in grads.values()))
        scale = min(1.0, max_norm / norm)
        for name, g in grads.items():
            total[name] += scale * g[i]
    return {name: t / len(X) for name, t in total.items()}
'''),
]


# ---------------------------------------------------------------- lesson 23
HONEST += [
    # ------------------------------------------------------- l23-fp16-hook
    Honest("l23-fp16-hook", "a named callback, .half() and .float()", (
        "def fp16_average(state, bucket):\n"
        "    world_size = dist.get_world_size()\n"
        "    compressed = bucket.buffer().div(world_size).half()\n"
        "    work = dist.all_reduce(compressed, async_op=True)\n"
        "\n"
        "    def decompress(fut):\n"
        "        return fut.value()[0].float()\n"
        "\n"
        "    return work.get_future().then(decompress)\n")),
    Honest("l23-fp16-hook", "in place in the bucket's buffer, the average copied back into it", (
        "def fp16_average(state, bucket):\n"
        "    buf = bucket.buffer()\n"
        "    buf.div_(dist.get_world_size())  # first, so the float16 sum cannot overflow\n"
        "    small = buf.to(dtype=torch.float16)\n"
        "    fut = dist.all_reduce(small, async_op=True).get_future()\n"
        "\n"
        "    def back_to_float32(f):\n"
        "        buf.copy_(f.value()[0])\n"
        "        return buf\n"
        "\n"
        "    return fut.then(back_to_float32)\n")),
    Honest("l23-fp16-hook", "a blocking all-reduce, then a Future filled by hand", (
        "def fp16_average(state, bucket):\n"
        "    n = dist.get_world_size()\n"
        "    as_half = (bucket.buffer() * (1.0 / n)).to(torch.float16)\n"
        "    dist.all_reduce(as_half)\n"
        "    done = torch.futures.Future()\n"
        "    done.set_result(as_half.to(torch.float32))\n"
        "    return done\n")),
    # --------------------------------------------------------- l23-buckets
    Honest("l23-buckets", "a class with __call__ as the hook, torch.cat and split", (
        "def bucketed_averaging(model, cap):\n"
        "    class Bucketer:\n"
        "        def __init__(self, params, cap):\n"
        "            self.total = len(params)\n"
        "            self.cap = cap\n"
        "            self.pending = []\n"
        "            self.nbytes = 0\n"
        "            self.arrived = 0\n"
        "\n"
        "        def __call__(self, p):\n"
        "            self.pending.append(p)\n"
        "            self.nbytes += p.grad.numel() * p.grad.element_size()\n"
        "            self.arrived += 1\n"
        "            last = self.arrived == self.total\n"
        "            if self.nbytes >= self.cap or last:\n"
        "                self.flush()\n"
        "            if last:\n"
        "                self.arrived = 0\n"
        "\n"
        "        def flush(self):\n"
        "            grads = [p.grad for p in self.pending]\n"
        "            flat = torch.cat([g.reshape(-1) for g in grads])\n"
        "            dist.all_reduce(flat)\n"
        "            flat.div_(dist.get_world_size())\n"
        "            for g, piece in zip(grads, flat.split([g.numel() for g in grads])):\n"
        "                g.copy_(piece.view_as(g))\n"
        "            self.pending = []\n"
        "            self.nbytes = 0\n"
        "\n"
        "    params = list(model.parameters())\n"
        "    hook = Bucketer(params, cap)\n"
        "    for p in params:\n"
        "        p.register_post_accumulate_grad_hook(hook)\n")),
    Honest("l23-buckets", "closures with nonlocal, parameters_to_vector and vector_to_parameters", (
        "def bucketed_averaging(model, cap):\n"
        "    from torch.nn.utils import parameters_to_vector, vector_to_parameters\n"
        "\n"
        "    n_params = sum(1 for _ in model.parameters())\n"
        "    waiting = []\n"
        "    filled = 0\n"
        "    seen = 0\n"
        "\n"
        "    def all_reduce_bucket():\n"
        "        nonlocal filled\n"
        "        grads = [q.grad for q in waiting]\n"
        "        vec = parameters_to_vector(grads)\n"
        "        dist.all_reduce(vec, op=dist.ReduceOp.SUM)\n"
        "        vector_to_parameters(vec / dist.get_world_size(), grads)\n"
        "        waiting.clear()\n"
        "        filled = 0\n"
        "\n"
        "    def on_grad(param):\n"
        "        nonlocal filled, seen\n"
        "        waiting.append(param)\n"
        "        filled += 4 * param.numel()  # float32: 4 bytes a value\n"
        "        seen += 1\n"
        "        if filled >= cap:\n"
        "            all_reduce_bucket()\n"
        "        if seen == n_params:  # the last gradient of this backward\n"
        "            if waiting:\n"
        "                all_reduce_bucket()\n"
        "            seen = 0\n"
        "\n"
        "    for param in model.parameters():\n"
        "        param.register_post_accumulate_grad_hook(on_grad)\n")),
    # ------------------------------------------------------ l23-shard-mean
    Honest("l23-shard-mean", "blocking send/recv pair by pair, the lower rank sending first", (
        "def shard_mean(grad):\n"
        "    me = dist.get_rank()\n"
        "    world = dist.get_world_size()\n"
        "    size = math.ceil(grad.shape[0] / world)\n"
        "    mine = grad[me * size:(me + 1) * size]\n"
        "    total = mine.clone()\n"
        "    for peer in range(world):\n"
        "        if peer == me:\n"
        "            continue\n"
        "        theirs = grad[peer * size:(peer + 1) * size].contiguous()\n"
        "        incoming = torch.zeros_like(mine)\n"
        "        if me < peer:\n"
        "            dist.send(theirs, dst=peer)\n"
        "            dist.recv(incoming, src=peer)\n"
        "        else:\n"
        "            dist.recv(incoming, src=peer)\n"
        "            dist.send(theirs, dst=peer)\n"
        "        total += incoming\n"
        "    return total / world\n")),
    Honest("l23-shard-mean", "a ring: partial sums passed to the next rank in world - 1 rounds", (
        "def shard_mean(grad):\n"
        "    rank, world = dist.get_rank(), dist.get_world_size()\n"
        "    size = math.ceil(grad.shape[0] / world)\n"
        "\n"
        "    def chunk(i):\n"
        "        return grad[i * size:(i + 1) * size]\n"
        "\n"
        "    right, left = (rank + 1) % world, (rank - 1) % world\n"
        "    outgoing = chunk((rank - 1) % world).clone()\n"
        "    for step in range(world - 1):\n"
        "        k = (rank - step - 2) % world  # the chunk arriving from the left\n"
        "        incoming = torch.empty_like(chunk(k))\n"
        "        send = dist.isend(outgoing.contiguous(), right)\n"
        "        dist.recv(incoming, left)\n"
        "        send.wait()\n"
        "        outgoing = incoming + chunk(k)\n"
        "    return outgoing / world\n")),
    Honest("l23-shard-mean", "grad.split(size) padded with empty shards, P2POp and batch_isend_irecv", (
        "def shard_mean(grad):\n"
        "    rank = dist.get_rank()\n"
        "    world = dist.get_world_size()\n"
        "    rows_each = -(-grad.shape[0] // world)\n"
        "    shards = list(grad.split(rows_each))\n"
        "    while len(shards) < world:\n"
        "        shards.append(grad[:0])\n"
        "    buffers = {r: torch.empty_like(shards[rank]) for r in range(world) if r != rank}\n"
        "    ops = []\n"
        "    for r in buffers:\n"
        "        ops.append(dist.P2POp(dist.isend, shards[r].contiguous(), r))\n"
        "        ops.append(dist.P2POp(dist.irecv, buffers[r], r))\n"
        "    for req in dist.batch_isend_irecv(ops) if ops else []:\n"
        "        req.wait()\n"
        "    return (shards[rank] + sum(buffers.values())) / world\n")),
]


# ---------------------------------------------------------------- lessons 21, 25, 27
HONEST += [
    Honest('l21-executor', "the lesson's Waiting class from an earlier cell, memoised pruning, one delivery loop", (
        'def run_backward(roots, grads, inputs):\n'
        '    """torch.autograd.backward(roots, grads, inputs=inputs), node by node; returns the\n'
        '    nodes in the order they ran."""\n'
        "    # dependencies: one per edge into a node, the invisible root's edges included\n"
        '    deps = {}\n'
        '    for r in roots:\n'
        '        deps[r.grad_fn] = deps.get(r.grad_fn, 0) + 1\n'
        '    visited, stack = [], [r.grad_fn for r in roots]\n'
        '    while stack:\n'
        '        node = stack.pop()\n'
        '        if node in visited:\n'
        '            continue\n'
        '        visited.append(node)\n'
        '        for fn, _ in node.next_functions:\n'
        '            if fn is not None:\n'
        '                deps[fn] = deps.get(fn, 0) + 1\n'
        '                stack.append(fn)\n'
        '\n'
        "    # a node is kept when some path from it ends at an input's AccumulateGrad node\n"
        '    targets = [get_gradient_edge(t).node for t in inputs]\n'
        '    leads = {}\n'
        '\n'
        '    def leads_to_input(node):\n'
        '        if node not in leads:\n'
        '            leads[node] = node in targets or any(\n'
        '                leads_to_input(fn) for fn, _ in node.next_functions if fn is not None)\n'
        '        return leads[node]\n'
        '\n'
        '    buffers = {n: [None] * len(n._input_metadata) for n in visited if leads_to_input(n)}\n'
        '    queue, ran = [], []\n'
        '    delivered = [(r.grad_fn, r.output_nr, g) for r, g in zip(roots, grads)]\n'
        '    while True:\n'
        '        for fn, slot, g in delivered:\n'
        '            if fn in buffers and g is not None:\n'
        '                g = g.sum_to_size(fn._input_metadata[slot].shape)\n'
        '                old = buffers[fn][slot]\n'
        '                buffers[fn][slot] = g if old is None else old + g\n'
        '            deps[fn] -= 1\n'
        '            if deps[fn] == 0 and fn in buffers:\n'
        '                heapq.heappush(queue, Waiting(fn._sequence_nr(), fn))\n'
        '        if not queue:\n'
        '            return ran\n'
        '        node = heapq.heappop(queue).label\n'
        '        ran.append(node)\n'
        '        out = node(*buffers[node])\n'
        '        if isinstance(out, torch.Tensor):\n'
        '            out = (out,)\n'
        '        delivered = [(fn, slot, g) for (fn, slot), g in zip(node.next_functions, out)\n'
        '                     if fn is not None]\n'
    ), earlier=(
        'import heapq\n'
        '\n'
        'from torch.autograd.graph import get_gradient_edge\n'
        '\n'
        '\n'
        'class Waiting:\n'
        '    """An item on a heap, compared by its key alone, as the engine compares its tasks."""\n'
        '\n'
        '    def __init__(self, key, label):\n'
        '        self.key, self.label = key, label\n'
        '\n'
        '    def __lt__(self, other):\n'
        '        return self.key > other.key  # heapq gives the smallest first: the largest key here\n'
    )),
    Honest('l21-executor', 'an Engine class with __call__, defaultdicts and a breadth-first count', (
        'import heapq\n'
        'from collections import defaultdict, deque\n'
        '\n'
        'from torch.autograd.graph import get_gradient_edge\n'
        '\n'
        '\n'
        'class Task:\n'
        '    """A ready node; the heap pops the smallest key, so the key is minus its number."""\n'
        '\n'
        '    def __init__(self, node):\n'
        '        self.key = -node._sequence_nr()\n'
        '        self.node = node\n'
        '\n'
        '    def __lt__(self, other):\n'
        '        return self.key < other.key\n'
        '\n'
        '\n'
        'class Engine:\n'
        '    def __init__(self, roots, grads, inputs):\n'
        '        self.roots, self.grads = roots, grads\n'
        '        self.dependencies = defaultdict(int)\n'
        '        self.consumers = defaultdict(list)\n'
        '        self.count_dependencies()\n'
        '        self.live = self.mark_live([get_gradient_edge(t).node for t in inputs])\n'
        '        self.inbox = {}\n'
        '        self.ready = []\n'
        '\n'
        '    def count_dependencies(self):\n'
        '        frontier, visited = deque(), set()\n'
        '        for root in self.roots:\n'
        '            self.dependencies[root.grad_fn] += 1  # the edge from the graph root\n'
        '            frontier.append(root.grad_fn)\n'
        '        while frontier:\n'
        '            node = frontier.popleft()\n'
        '            if node in visited:\n'
        '                continue\n'
        '            visited.add(node)\n'
        '            for fn, _ in node.next_functions:\n'
        '                if fn is None:\n'
        '                    continue\n'
        '                self.dependencies[fn] += 1\n'
        '                self.consumers[fn].append(node)\n'
        '                frontier.append(fn)\n'
        '\n'
        '    def mark_live(self, targets):\n'
        '        live, frontier = set(targets), deque(targets)\n'
        '        while frontier:\n'
        '            for user in self.consumers[frontier.popleft()]:\n'
        '                if user not in live:\n'
        '                    live.add(user)\n'
        '                    frontier.append(user)\n'
        '        return live\n'
        '\n'
        '    def deliver(self, fn, input_nr, g):\n'
        '        if fn in self.live:\n'
        '            if g is not None:\n'
        '                shape = fn._input_metadata[input_nr].shape\n'
        '                if g.shape != shape:\n'
        '                    g = g.sum_to_size(shape)\n'
        '                slots = self.inbox.setdefault(fn, [None] * len(fn._input_metadata))\n'
        '                slots[input_nr] = g if slots[input_nr] is None else torch.add(slots[input_nr], g)\n'
        '        self.dependencies[fn] -= 1\n'
        '        if self.dependencies[fn] == 0 and fn in self.live:\n'
        '            heapq.heappush(self.ready, Task(fn))\n'
        '\n'
        '    def __call__(self):\n'
        '        for root, g in zip(self.roots, self.grads):\n'
        '            self.deliver(root.grad_fn, root.output_nr, g)\n'
        '        order = []\n'
        '        while self.ready:\n'
        '            node = heapq.heappop(self.ready).node\n'
        '            order.append(node)\n'
        '            slots = self.inbox.pop(node, [None] * len(node._input_metadata))\n'
        '            results = node(*slots)\n'
        '            if not isinstance(results, (tuple, list)):\n'
        '                results = [results]\n'
        '            for (fn, input_nr), g in zip(node.next_functions, results):\n'
        '                if fn is not None:\n'
        '                    self.deliver(fn, input_nr, g)\n'
        '        return order\n'
        '\n'
        '\n'
        'def run_backward(roots, grads, inputs):\n'
        '    return Engine(roots, grads, inputs)()\n'
    )),
    Honest('l21-layers', "a callback factory instead of default arguments, mode='all' written out", (
        'from torch.autograd.graph import register_multi_grad_hook\n'
        '\n'
        '\n'
        'def make_callback(report, name, keys):\n'
        '    def callback(grads):\n'
        '        report(name, {key: g for key, g in zip(keys, grads)})\n'
        '    return callback\n'
        '\n'
        '\n'
        'def watch_layers(model, report):\n'
        '    handles = []\n'
        '    for name, module in model.named_modules():\n'
        '        own = list(module.named_parameters(recurse=False))\n'
        '        if len(own) == 0:\n'
        '            continue\n'
        '        keys = [key for key, _ in own]\n'
        '        tensors = [p for _, p in own]\n'
        '        handles.append(register_multi_grad_hook(tensors, make_callback(report, name, keys),\n'
        '                                                mode="all"))\n'
        '    return handles\n'
    )),
    Honest('l21-layers', 'a class with __call__, the modules walked recursively by named_children', (
        'class LayerReport:\n'
        '    """Called once per pass with the grads of one module\'s own parameters."""\n'
        '\n'
        '    def __init__(self, name, keys, report):\n'
        '        self.name, self.keys, self.report = name, keys, report\n'
        '\n'
        '    def __call__(self, grads):\n'
        '        out = {}\n'
        '        for i, key in enumerate(self.keys):\n'
        '            out[key] = grads[i]\n'
        '        self.report(self.name, out)\n'
        '\n'
        '\n'
        'def watch_layers(model, report):\n'
        '    handles = []\n'
        '\n'
        '    def visit(module, prefix):\n'
        '        params = dict(module.named_parameters(recurse=False))\n'
        '        if params:\n'
        '            hook = LayerReport(prefix, list(params.keys()), report)\n'
        '            handles.append(torch.autograd.graph.register_multi_grad_hook(\n'
        '                list(params.values()), hook))\n'
        '        for child_name, child in module.named_children():\n'
        '            visit(child, child_name if prefix == "" else prefix + "." + child_name)\n'
        '\n'
        '    visit(model, "")\n'
        '    return handles\n'
    )),
    Honest('l25-flop-compiler', 'a class with __call__, graph.find_nodes, m k n from the factors', (
        'from functorch.compile import make_boxed_func\n'
        '\n'
        '\n'
        'class FlopCompiler:\n'
        '    """Counts the FLOPs of mm, addmm and bmm in each graph it is handed."""\n'
        '\n'
        '    def __init__(self):\n'
        '        self.counts = []\n'
        '\n'
        '    def product_flops(self, left, right):\n'
        '        # left (..., m, k) @ right (..., k, n): 2 m k n per pair, times the batch\n'
        '        *batch, m, k = left.shape\n'
        '        n = right.shape[-1]\n'
        '        pairs = 1\n'
        '        for b in batch:\n'
        '            pairs *= b\n'
        '        return 2 * pairs * m * k * n\n'
        '\n'
        '    def __call__(self, gm, example_inputs):\n'
        '        flops = 0\n'
        '        for target in (torch.ops.aten.mm.default, torch.ops.aten.bmm.default):\n'
        '            for node in gm.graph.find_nodes(op="call_function", target=target):\n'
        '                a, b = node.args[0], node.args[1]\n'
        '                flops += self.product_flops(a.meta["val"], b.meta["val"])\n'
        '        for node in gm.graph.find_nodes(op="call_function", target=torch.ops.aten.addmm.default):\n'
        '            bias, a, b = node.args[:3]  # the bias is added, not multiplied: no FLOPs counted\n'
        '            flops += self.product_flops(a.meta["val"], b.meta["val"])\n'
        '        self.counts.append(flops)\n'
        '        return make_boxed_func(gm.forward)\n'
        '\n'
        '\n'
        'def make_flop_compiler():\n'
        '    compiler = FlopCompiler()\n'
        '    return compiler, compiler.counts\n'
    )),
    Honest('l25-flop-compiler', "a table of lambdas over the arguments' shapes, make_boxed_compiler", (
        'from functorch.compile import make_boxed_compiler\n'
        '\n'
        "# FLOPs of each product from its arguments' shapes, by the name the graph prints for it:\n"
        '# 2 * m * k * n per (m, k) @ (k, n)\n'
        'RULES = {\n'
        '    "aten.mm.default": lambda a, b: 2 * a[0] * a[1] * b[1],\n'
        '    "aten.addmm.default": lambda bias, a, b: 2 * a[0] * a[1] * b[1],\n'
        '    "aten.bmm.default": lambda a, b: 2 * a[0] * a[1] * a[2] * b[2],\n'
        '}\n'
        '\n'
        '\n'
        'def make_flop_compiler():\n'
        '    flops_per_graph = []\n'
        '\n'
        '    @make_boxed_compiler\n'
        '    def count_flops(gm, example_inputs):\n'
        '        total = 0\n'
        '        for node in gm.graph.nodes:\n'
        '            rule = RULES.get(str(node.target)) if node.op == "call_function" else None\n'
        '            if rule is not None:\n'
        '                shapes = [arg.meta["val"].shape for arg in node.args]\n'
        '                total += rule(*shapes)\n'
        '        flops_per_graph.append(total)\n'
        '        return gm  # run as it is\n'
        '\n'
        '    return count_flops, flops_per_graph\n'
    )),
    Honest('l27-rms-norm-op', 'r computed in setup_context and saved, new_empty', (
        'def rms_norm_fake(x, w, eps):\n'
        '    return x.new_empty(x.shape)\n'
        '\n'
        '\n'
        'def rms_norm_setup_context(ctx, inputs, output):\n'
        '    x, w, eps = inputs\n'
        '    r = 1.0 / torch.sqrt((x * x).mean(dim=1, keepdim=True) + eps)  # kept: backward needs it\n'
        '    ctx.save_for_backward(x, w, r)\n'
        '\n'
        '\n'
        'def rms_norm_backward(ctx, grad):\n'
        '    x, w, r = ctx.saved_tensors\n'
        '    # y = (x * r) * w; r = (m + eps)^(-1/2), m = mean(x^2): dr/dx_j = -r^3 x_j / d\n'
        '    upstream = grad * w\n'
        '    along_row = (upstream * x).mean(dim=1, keepdim=True)\n'
        '    grad_x = r * (upstream - x * r * r * along_row)\n'
        '    grad_w = torch.sum(grad * x * r, dim=0)\n'
        '    return grad_x, grad_w, None\n'
    ), earlier=LESSON_27_FORWARD, later=(
        'pieces = {"fake": rms_norm_fake, "setup_context": rms_norm_setup_context,\n'
        '          "backward": rms_norm_backward}\n'
    )),
    Honest('l27-rms-norm-op', 'the chain through the mean square step by step, einsum for dw', (
        'def rms_norm_fake(x, w, eps):\n'
        '    return torch.empty(x.shape, dtype=x.dtype, device=x.device)\n'
        '\n'
        '\n'
        'def rms_norm_setup_context(ctx, inputs, output):\n'
        '    ctx.save_for_backward(inputs[0], inputs[1])\n'
        '    ctx.eps = inputs[2]\n'
        '\n'
        '\n'
        'def rms_norm_backward(ctx, grad):\n'
        '    x, w = ctx.saved_tensors\n'
        '    n, d = x.shape\n'
        '    mean_square = (x ** 2).sum(-1, keepdim=True) / d\n'
        '    inv = (mean_square + ctx.eps) ** -0.5\n'
        '    # y_ij = x_ij * inv_i * w_j: the direct path, then the path through inv_i\n'
        '    direct = grad * w * inv\n'
        '    dinv = (grad * w * x).sum(-1, keepdim=True)  # dL/dinv_i\n'
        '    dmean = dinv * (-0.5) * (mean_square + ctx.eps) ** -1.5  # dL/dmean_square_i\n'
        '    dx = direct + dmean * 2 * x / d\n'
        '    dw = torch.einsum("ij,ij->j", grad, x * inv)\n'
        '    return dx, dw, None\n'
    ), earlier=LESSON_27_FORWARD, later=(
        'pieces = {"fake": rms_norm_fake, "setup_context": rms_norm_setup_context,\n'
        '          "backward": rms_norm_backward}\n'
    )),
]

# Operator objects held in a constant or a table (the kernel's reading names them as
# code does, torch.ops.aten...; it once named them by torch's private module).
HONEST += [
    Honest('l25-flop-compiler', 'a table of lambdas keyed by the ops themselves', (
        'from functorch.compile import make_boxed_compiler\n'
        '\n'
        'aten = torch.ops.aten\n'
        "# FLOPs of each product from its arguments' shapes: 2 * m * k * n per (m, k) @ (k, n)\n"
        'RULES = {\n'
        '    aten.mm.default: lambda a, b: 2 * a[0] * a[1] * b[1],\n'
        '    aten.addmm.default: lambda bias, a, b: 2 * a[0] * a[1] * b[1],\n'
        '    aten.bmm.default: lambda a, b: 2 * a[0] * a[1] * a[2] * b[2],\n'
        '}\n'
        '\n'
        '\n'
        'def make_flop_compiler():\n'
        '    flops_per_graph = []\n'
        '\n'
        '    @make_boxed_compiler\n'
        '    def count_flops(gm, example_inputs):\n'
        '        total = 0\n'
        '        for node in gm.graph.nodes:\n'
        '            rule = RULES.get(node.target) if node.op == "call_function" else None\n'
        '            if rule is not None:\n'
        '                shapes = [arg.meta["val"].shape for arg in node.args]\n'
        '                total += rule(*shapes)\n'
        '        flops_per_graph.append(total)\n'
        '        return gm  # run as it is\n'
        '\n'
        '    return count_flops, flops_per_graph\n'
    )),
    Honest('l25-flop-compiler', 'the ops in a module-level tuple', (
        'from functorch.compile import make_boxed_func\n'
        '\n'
        'PRODUCTS = (torch.ops.aten.mm.default, torch.ops.aten.addmm.default,\n'
        '            torch.ops.aten.bmm.default)\n'
        '\n'
        '\n'
        'def make_flop_compiler():\n'
        '    counts = []\n'
        '\n'
        '    def compiler(gm, example_inputs):\n'
        '        total = 0\n'
        '        for node in gm.graph.nodes:\n'
        '            if node.target in PRODUCTS:\n'
        '                inner = node.args[-2].meta["val"].shape[-1]  # k\n'
        '                total += 2 * node.meta["val"].numel() * inner\n'
        '        counts.append(total)\n'
        '        return make_boxed_func(gm.forward)\n'
        '\n'
        '    return compiler, counts\n'
    )),
]
