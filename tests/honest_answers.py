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
        "    if w_dim is None and x_dim != x.dim() - 1:  # one w for all, the rows intact:\n"
        "        return rms_norm_forward(x, w, eps), x_dim  # the batch can stay where it is\n"
        "    if w_dim is not None:\n"
        "        w = w.movedim(w_dim, 0).reshape(info.batch_size, 1, -1)\n"
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
    Honest("l23-buckets", "async all-reduces, each polled with is_completed() before its copy", (
        "def bucketed_averaging(model, cap):\n"
        "    params = list(model.parameters())\n"
        "    bucket, size, arrived = [], 0, 0\n"
        "\n"
        "    def send(grads):\n"
        "        flat = torch.cat([g.flatten() for g in grads])\n"
        "        work = dist.all_reduce(flat, async_op=True)\n"
        "        while not work.is_completed():\n"
        "            pass\n"
        "        flat /= dist.get_world_size()\n"
        "        start = 0\n"
        "        for g in grads:\n"
        "            g.copy_(flat[start:start + g.numel()].view_as(g))\n"
        "            start += g.numel()\n"
        "\n"
        "    def hook(p):\n"
        "        nonlocal bucket, size, arrived\n"
        "        bucket.append(p.grad)\n"
        "        size += p.grad.numel() * p.grad.element_size()\n"
        "        arrived += 1\n"
        "        if size >= cap or arrived == len(params):\n"
        "            send(bucket)\n"
        "            bucket, size = [], 0\n"
        "        if arrived == len(params):\n"
        "            arrived = 0\n"
        "\n"
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
    Honest("l23-buckets", "hooks on each parameter's AccumulateGrad node, as DDP's reducer does", (
        "def bucketed_averaging(model, cap):\n"
        "    accumulators = []  # the AccumulateGrad nodes: kept alive, or their hooks are lost\n"
        "    bucket, count = [], [0]\n"
        "\n"
        "    def send():\n"
        "        flat = torch.cat([q.grad.flatten() for q in bucket])\n"
        "        dist.all_reduce(flat)\n"
        "        flat /= dist.get_world_size()\n"
        "        for q, part in zip(bucket, flat.split([q.numel() for q in bucket])):\n"
        "            q.grad.copy_(part.view_as(q))\n"
        "        bucket.clear()\n"
        "\n"
        "    def make_hook(p):\n"
        "        def hook(grad_inputs, grad_outputs):\n"
        "            bucket.append(p)\n"
        "            count[0] += 1\n"
        "            last = count[0] == len(accumulators)\n"
        "            if sum(q.numel() * 4 for q in bucket) >= cap or last:\n"
        "                send()\n"
        "            if last:\n"
        "                count[0] = 0\n"
        "        return hook\n"
        "\n"
        "    for p in model.parameters():\n"
        "        acc = p.view_as(p).grad_fn.next_functions[0][0]\n"
        "        acc.register_hook(make_hook(p))\n"
        "        accumulators.append(acc)\n")),
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


# ---------------------------------------------------------------- a second round of styles
# Two more styles for every exercise that had one, and the honest answers that were once
# refused (each refusal fixed at its cause: the kernel's reading of dataclasses, named
# tuples, namespace classes, torch's functions held as values, functools and operator,
# F.sigmoid and F.tanh, conjugate views sent to the grader, torch.autograd.backward).
HONEST += [
    Honest('l01-find-leaves',
           'recursion, leaves kept in a dict by id',
           '''\
def find_leaves(out):
    leaves = {}
    visited = {}  # id -> node: holding the node keeps its id its own

    def visit(node):
        if node is None or id(node) in visited:
            return
        visited[id(node)] = node
        if type(node).__name__ == 'AccumulateGrad':
            leaves[id(node.variable)] = node.variable
            return
        for parent, _ in node.next_functions:
            visit(parent)

    visit(out.grad_fn)
    return list(leaves.values())
'''),
    Honest('l01-find-leaves',
           'a class with __call__ and a deque',
           '''\
from collections import deque


class LeafFinder:
    def __call__(self, out):
        self.seen, self.found = [], []
        todo = deque([out.grad_fn])
        while todo:
            node = todo.popleft()
            if node is None or any(node is s for s in self.seen):
                continue
            self.seen.append(node)
            if not node.next_functions and hasattr(node, 'variable'):
                self.found.append(node.variable)
            todo.extend(fn for fn, _ in node.next_functions)
        return self.found


find_leaves = LeafFinder()
'''),
    Honest('l01-formula',
           'a match statement, powers written out as products',
           '''\
def formula(out, names):
    leaf_name = {id(t): n for n, t in names.items()}

    def write(node):
        kids = [fn for fn, _ in node.next_functions]
        match node.name():
            case 'torch::autograd::AccumulateGrad':
                return leaf_name[id(node.variable)]
            case 'SinBackward0':
                return 'torch.sin(' + write(kids[0]) + ')'
            case 'ExpBackward0':
                return 'torch.exp(' + write(kids[0]) + ')'
            case 'PowBackward0':
                base = write(kids[0])
                return '(' + ' * '.join([base] * int(node._saved_exponent)) + ')'
            case 'AddBackward0':
                return '(' + write(kids[0]) + ' + ' + write(kids[1]) + ')'
            case 'SubBackward0':
                return '(' + write(kids[0]) + ' - ' + write(kids[1]) + ')'
            case 'MulBackward0':
                left = str(float(node._saved_self)) if kids[0] is None else write(kids[0])
                right = str(float(node._saved_other)) if kids[1] is None else write(kids[1])
                return '(' + left + ' * ' + right + ')'
        raise ValueError(node.name())

    return write(out.grad_fn)
'''),
    Honest('l01-formula',
           'a class of static writers, torch.mul and torch.pow',
           '''\
class Writer:
    @staticmethod
    def leaf(node, names):
        return next(k for k, v in names.items() if v is node.variable)

    @staticmethod
    def const(node, first):
        saved = node._saved_self if first else node._saved_other
        return f'{saved.item()!r}'

    @classmethod
    def write(cls, node, names):
        if node.next_functions == ():
            return cls.leaf(node, names)
        kind = node.name().removesuffix('Backward0')
        args = [cls.write(fn, names) if fn is not None else cls.const(node, i == 0)
                for i, (fn, _) in enumerate(node.next_functions)]
        if kind == 'Pow':
            return f'torch.pow({args[0]}, {node._saved_exponent})'
        return f'torch.{kind.lower()}({", ".join(args)})'


def formula(out, names):
    return Writer.write(out.grad_fn, names)
'''),
    Honest('l05-microbatch',
           "the share as backward's gradient argument",
           '''\
def accumulate(w, X, t, sizes):
    pieces = zip(X.split(sizes), t.split(sizes))
    for X_part, t_part in pieces:
        piece_mean = (X_part @ w - t_part).pow(2).mean()
        piece_mean.backward(torch.tensor(len(X_part) / len(X), dtype=piece_mean.dtype))
'''),
    Honest('l05-microbatch',
           "F.mse_loss with reduction='sum', a helper in an earlier cell",
           '''\
def accumulate(w, X, t, sizes):
    for X_part, t_part in zip(torch.split(X, sizes), torch.split(t, sizes)):
        piece_loss(w, X_part, t_part, total=len(t)).backward()
''',
           earlier='''\
import torch.nn.functional as F


def piece_loss(w, X_part, t_part, total):
    """This piece's part of the full batch's mean squared error."""
    return F.mse_loss(X_part @ w, t_part, reduction='sum') / total
'''),
    Honest('l06-momentum',
           'the sums of x, y, xy, x² worked out once',
           '''\
def forgot_with_momentum(x, y, w, b, lr, beta, steps):
    n = x.numel()
    sx, sy, sxx, sxy = x.sum(), y.sum(), (x * x).sum(), (x * y).sum()
    grad_w = grad_b = vel_w = vel_b = 0.0
    for step in range(steps):
        # dL/dw = 2/N * sum (w x + b - y) x, dL/db = 2/N * sum (w x + b - y)
        grad_w = grad_w + 2 * (w * sxx + b * sx - sxy) / n
        grad_b = grad_b + 2 * (w * sx + b * n - sy) / n
        vel_w = beta * vel_w + grad_w
        vel_b = beta * vel_b + grad_b
        w = w - lr * vel_w
        b = b - lr * vel_b
    return w, b
'''),
    Honest('l06-momentum',
           'w and b stacked in one vector, a design matrix',
           '''\
def forgot_with_momentum(x, y, w, b, lr, beta, steps):
    A = torch.stack([x, torch.ones_like(x)], dim=1)
    theta = torch.stack([w, b])
    grad = torch.zeros_like(theta)
    buf = torch.zeros_like(theta)
    for _ in range(steps):
        grad += 2 * A.T @ (A @ theta - y) / len(y)
        buf = beta * buf + grad
        theta = theta - lr * buf
    return theta[0], theta[1]
'''),
    Honest('l06-momentum',
           'pure Python lists',
           '''\
def forgot_with_momentum(x, y, w, b, lr, beta, steps):
    xs, ys = x.tolist(), y.tolist()
    n = len(xs)
    w, b = float(w), float(b)
    gw = gb = vw = vb = 0.0
    for _ in range(steps):
        rs = [w * xi + b - yi for xi, yi in zip(xs, ys)]
        gw += sum(2 * r * xi for r, xi in zip(rs, xs)) / n
        gb += sum(2 * r for r in rs) / n
        vw, vb = beta * vw + gw, beta * vb + gb
        w, b = w - lr * vw, b - lr * vb
    return torch.tensor(w, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
'''),
    Honest('l06-where',
           'torch.autograd.grad on the model itself, a table of labels',
           '''\
LABELS = {
    (False, None, None): 'before step',
    (True, 'cleared', None): 'end',
    (True, 'part', None): 'each micro-batch',
    (True, 'full', 'replaced'): 'start',
    (True, 'full', 'summed'): 'never',
}


def where_zeroed(step, model, X, y, k):
    params = list(model.parameters())

    def full_grads():
        # autograd.grad returns the gradients and leaves every .grad as it is
        return torch.autograd.grad(F.mse_loss(model(X), y), params)

    def close(a, b):
        return all(torch.allclose(u, v) for u, v in zip(a, b))

    start = [p.detach().clone() for p in params]
    g_start = full_grads()
    step()
    moved = not close([p.detach() for p in params], start)
    held = kind = again = None
    if moved:
        grads = [p.grad for p in params]
        if all(g is None or torch.count_nonzero(g) == 0 for g in grads):
            held = 'cleared'
        elif close(grads, g_start):
            held = 'full'
        else:
            held = 'part'
    if held == 'full':
        first = [p.grad.clone() for p in params]
        g_next = full_grads()
        step()
        now = [p.grad for p in params]
        again = 'summed' if close(now, [a + b for a, b in zip(first, g_next)]) else 'replaced'
    return LABELS[(moved, held, again)]
'''),
    Honest('l06-where',
           'snapshots with parameters_to_vector, a copy that keeps the old weights',
           '''\
import copy
from torch.nn.utils import parameters_to_vector


def grads_of(net):
    return torch.cat([torch.zeros_like(p).flatten() if p.grad is None else p.grad.flatten()
                      for p in net.parameters()])


def where_zeroed(step, model, X, y, k):
    snapshot = copy.deepcopy(model)
    for p in snapshot.parameters():
        p.grad = None
    F.mse_loss(snapshot(X), y).backward()
    expected = grads_of(snapshot)
    step()
    if torch.equal(parameters_to_vector(model.parameters()),
                   parameters_to_vector(snapshot.parameters())):
        return 'before step'
    first = grads_of(model)
    if not first.any():
        return 'end'
    if not torch.allclose(first, expected):
        return 'each micro-batch'
    snapshot = copy.deepcopy(model)
    for p in snapshot.parameters():
        p.grad = None
    F.mse_loss(snapshot(X), y).backward()
    second = grads_of(snapshot)
    step()
    return 'never' if torch.allclose(grads_of(model), first + second) else 'start'
'''),
    Honest('l07-one-backward',
           'torch.autograd.backward with a gradient for each loss',
           '''\
def one_backward(main, aux):
    # main's gradient arrives scaled by 1 / main, aux's as it is: one pass for both
    torch.autograd.backward([main, aux],
                            [main.new_tensor(1.0 / main.item()), torch.ones_like(aux)])
'''),
    Honest('l07-one-backward',
           'the weight under torch.no_grad, a lambda',
           '''\
def one_backward(main, aux):
    with torch.no_grad():
        scale = 1.0 / main
    combined = lambda: main * scale + aux
    combined().backward()
'''),
    Honest('l07-two-players',
           'backward with inputs=, then the steps from .grad',
           '''\
def two_player_step(loss_a, loss_b, A, B, lr):
    loss_a.backward(inputs=A, retain_graph=True)
    loss_b.backward(inputs=B)
    with torch.no_grad():
        for p in [*A, *B]:
            p.add_(p.grad, alpha=-lr)
            p.grad = None
'''),
    Honest('l07-two-players',
           'gradients handed to torch.optim.SGD',
           '''\
def two_player_step(loss_a, loss_b, A, B, lr):
    grads_a = torch.autograd.grad(loss_a, A, retain_graph=True)
    grads_b = torch.autograd.grad(loss_b, B)
    for p, g in zip(A + B, grads_a + grads_b):
        p.grad = g
    torch.optim.SGD(A + B, lr=lr).step()
'''),
    Honest('l08-mean-gradient',
           'F.one_hot and an outer product',
           '''\
import torch.nn.functional as F


def last_row_mean_vector(y):
    rows, cols = y.shape
    last = F.one_hot(torch.tensor(rows - 1), rows).to(y.dtype)
    return torch.outer(last, torch.ones(cols, dtype=y.dtype)) / cols
'''),
    Honest('l08-mean-gradient',
           'torch.where on a row mask',
           '''\
def last_row_mean_vector(y):
    row = torch.arange(y.size(0)).unsqueeze(1).expand_as(y)
    return torch.where(row == y.size(0) - 1, torch.full_like(y, 1 / y.size(1)),
                       torch.zeros_like(y))
'''),
    Honest('l08-mean-gradient',
           'index_fill_ on the last row',
           '''\
def last_row_mean_vector(y):
    last = torch.tensor([y.shape[0] - 1])
    return torch.zeros_like(y).index_fill_(0, last, 1.0 / y.shape[1])
'''),
    Honest('l08-shares-vjp',
           'through the shares y = x / S',
           '''\
def shares_vjp(x, v):
    S = x.sum()
    shares = x / S
    # column j of J: (e_j - shares) / S, so v^T J = (v - v . shares) / S
    return (v - torch.dot(v, shares)) / S
'''),
    Honest('l08-shares-vjp',
           'a loop over the entries',
           '''\
def shares_vjp(x, v):
    S = float(x.sum())
    vx = float((v * x).sum())
    out = torch.empty_like(x)
    for j in range(len(x)):
        out[j] = v[j] / S - vx / S ** 2
    return out
'''),
    Honest('l09-gather',
           'a loop over the positions of index',
           '''\
def gather_grad(x, dim, index, g):
    dx = torch.zeros_like(x)
    rows, cols = index.shape
    for i in range(rows):
        for j in range(cols):
            if dim == 0:
                dx[index[i, j], j] += g[i, j]
            else:
                dx[i, index[i, j]] += g[i, j]
    return dx
'''),
    Honest('l09-gather',
           'F.one_hot and einsum',
           '''\
import torch.nn.functional as F


def gather_grad(x, dim, index, g):
    # hit[i, j, r] = 1 where out[i, j] read entry r along dim
    hit = F.one_hot(index, x.shape[dim]).to(g.dtype)
    dx = torch.zeros_like(x)
    if dim == 0:
        dx[:, :index.shape[1]] = torch.einsum('ijr,ij->rj', hit, g)
    else:
        dx[:index.shape[0], :] = torch.einsum('ijc,ij->ic', hit, g)
    return dx
'''),
    Honest('l09-gather',
           'index_put_ with accumulate and a grid of the other coordinate',
           '''\
def gather_grad(x, dim, index, g):
    i, j = torch.meshgrid(torch.arange(index.shape[0]), torch.arange(index.shape[1]),
                          indexing='ij')
    where = (index, j) if dim == 0 else (i, index)
    return torch.zeros_like(x).index_put_(where, g, accumulate=True)
'''),
    Honest('l10-bce',
           'the chain rule left unsimplified, a class',
           '''\
class BCE:
    @staticmethod
    def dloss_dp(p, y):
        return -(y / p) + (1 - y) / (1 - p)

    @staticmethod
    def dp_dz(p):
        return p * (1 - p)

    def __call__(self, z, y):
        p = torch.sigmoid(z)
        return self.dloss_dp(p, y) * self.dp_dz(p) / z.numel()


dlogits_bce = BCE()
'''),
    Honest('l10-bce',
           'y(1 - p) - (1 - y)p, from math import prod',
           '''\
from math import prod


def dlogits_bce(z, y):
    p = 1 / (1 + (-z).exp())
    return -(y * (1 - p) - (1 - y) * p) / prod(z.shape)
'''),
    Honest('l10-bce',
           'torch.where on the labels',
           '''\
def dlogits_bce(z, y):
    p = torch.sigmoid(z)
    # label 1: d/dz of -log p is p - 1; label 0: d/dz of -log(1 - p) is p
    return torch.where(y == 1, p - 1, p) / z.numel()
'''),
    Honest('l10-bce',
           'from math import exp, a loop over the entries',
           '''\
from math import exp


def dlogits_bce(z, y):
    n = z.numel()
    out = []
    for zi, yi in zip(z.flatten().tolist(), y.flatten().tolist()):
        p = 1 / (1 + exp(-zi))
        out.append((p - yi) / n)
    return torch.tensor(out, dtype=z.dtype).reshape(z.shape)
'''),
    Honest('l10-dlogits',
           'sigmoid(z) * sigmoid(-z) for the slope',
           '''\
def dlogits_sigmoid_mse(z, y):
    p = torch.sigmoid(z)
    slope = torch.sigmoid(z) * torch.sigmoid(-z)
    return 2 * (p - y) * slope / z.numel()
'''),
    Honest('l10-dlogits',
           'p through tanh, the steps as a lambda chain',
           '''\
sigmoid = lambda t: 0.5 * (1 + torch.tanh(t / 2))
dmse_dp = lambda p, y: 2 * (p - y)


def dlogits_sigmoid_mse(z, y):
    p = sigmoid(z)
    return dmse_dp(p, y) * p * (1 - p) / z.nelement()
'''),
    Honest('l10-dlogits',
           'exp written out, in place on a fresh tensor',
           '''\
def dlogits_sigmoid_mse(z, y):
    e = torch.exp(-z)
    grad = (1 / (1 + e) - y)
    grad.mul_(2 * e / (1 + e) ** 2)
    grad.div_(z.numel())
    return grad
'''),
    Honest('l10-mlp',
           'a loop over the points, outer products',
           '''\
def mlp_backward(xs, ys, W1, b1, W2, b2):
    entries = ys.numel()
    dW1, db1 = torch.zeros_like(W1), torch.zeros_like(b1)
    dW2, db2 = torch.zeros_like(W2), torch.zeros_like(b2)
    for x, y in zip(xs, ys):  # one point at a time; the gradients add up
        h = torch.tanh(x @ W1 + b1)
        z = h @ W2 + b2
        dz = (torch.sigmoid(z) - y) / entries
        dW2 += torch.outer(h, dz)
        db2 += dz
        da = (W2 @ dz) * (1 - h * h)
        dW1 += torch.outer(x, da)
        db1 += da
    return dW1, db1, dW2, db2
'''),
    Honest('l10-mlp',
           'addmm, einsum and a lambda',
           '''\
tanh_slope = lambda h: 1 - h.pow(2)


def mlp_backward(xs, ys, W1, b1, W2, b2):
    h = torch.addmm(b1, xs, W1).tanh()
    z = torch.addmm(b2, h, W2)
    dz = (z.sigmoid() - ys).div(z.numel())
    dW2 = torch.einsum("nh,nk->hk", h, dz)
    da = torch.einsum("nk,hk->nh", dz, W2) * tanh_slope(h)
    dW1 = torch.einsum("nd,nh->dh", xs, da)
    return dW1, torch.einsum("nh->h", da), dW2, torch.einsum("nk->k", dz)
'''),
    Honest('l10-mlp',
           "tanh's slope as (1 - h) * (1 + h), sigmoid written out",
           '''\
def mlp_backward(xs, ys, W1, b1, W2, b2):
    h = torch.tanh(xs @ W1 + b1)
    z = h @ W2 + b2
    p = 1 / (1 + torch.exp(-z))
    dz = (p - ys) / z.numel()
    da = (dz @ W2.T) * (1 - h) * (1 + h)
    return xs.T @ da, da.sum(0), h.T @ dz, dz.sum(0)
'''),
    Honest('l10-mlp',
           'F.logsigmoid(z).exp() for the probabilities',
           '''\
def mlp_backward(xs, ys, W1, b1, W2, b2):
    h = torch.tanh(xs @ W1 + b1)
    z = h @ W2 + b2
    dz = (F.logsigmoid(z).exp() - ys) / z.numel()
    da = (dz @ W2.T) * (1 - h**2)
    return xs.T @ da, da.sum(0), h.T @ dz, dz.sum(0)
'''),
    Honest('l11-amax',
           'a loop over the slices with Python lists',
           '''\
def amax(a, dim, keepdim=False):
    moved = a.data.movedim(dim, -1)  # the reduced dimension last
    rows = moved.reshape(-1, moved.shape[-1])

    def rule(g):
        g = g if keepdim else g.unsqueeze(dim)
        g_rows = g.movedim(dim, -1).reshape(-1)
        grad_rows = torch.zeros_like(rows)
        for i, row in enumerate(rows.tolist()):
            top = max(row)
            winners = [j for j, v in enumerate(row) if v == top]
            for j in winners:  # ties share the gradient evenly
                grad_rows[i, j] = g_rows[i] / len(winners)
        return (grad_rows.reshape(moved.shape).movedim(-1, dim),)

    return Tensor(a.data.amax(dim, keepdim=keepdim), (a,), "amax", rule)
''',
           earlier=LESSON_11_ENGINE),
    Honest('l11-amax',
           'a class with __call__, F.normalize(p=1)',
           '''\
import torch.nn.functional as F


class Amax:
    """amax as an object: it keeps the winners' shares for its rule."""

    def __call__(self, a, dim, keepdim=False):
        winners = (a.data == a.data.amax(dim, keepdim=True)).double()
        share = F.normalize(winners, p=1, dim=dim)  # each winner 1 / (number of winners)

        def rule(g):
            return ((g if keepdim else g.unsqueeze(dim)) * share,)

        return Tensor(a.data.amax(dim, keepdim=keepdim), (a,), "amax", rule)


amax = Amax()
''',
           earlier=LESSON_11_ENGINE),
    Honest('l11-amax',
           'max(...).values, in-place /=, registered as Tensor.amax',
           '''\
def amax(a, dim, keepdim=False):
    top = a.data.max(dim, keepdim=True).values
    ties = (a.data == top).double()
    ties /= ties.sum(dim, keepdim=True)

    def rule(g):
        return ((g if keepdim else g.unsqueeze(dim)) * ties,)

    return Tensor(top if keepdim else top.squeeze(dim), (a,), "amax", rule)


Tensor.amax = amax
''',
           earlier=LESSON_11_ENGINE),
    Honest('l11-amax',
           'torch.where(mask, g / count, g * 0) on an expanded g',
           '''\
def amax(a, dim, keepdim=False):
    top = a.data.amax(dim, keepdim=True)
    mask = a.data == top
    count = mask.sum(dim, keepdim=True)

    def rule(g):
        g = (g if keepdim else g.unsqueeze(dim)).expand_as(a.data)
        return (torch.where(mask, g / count, g * 0),)

    return Tensor(a.data.amax(dim, keepdim=keepdim), (a,), "amax", rule)
''',
           earlier=LESSON_11_ENGINE),
    Honest('l11-matmul',
           'einsum with ellipsis and an unbroadcast helper',
           '''\
def broadcast_matmul(a, b):
    A, B = a.data, b.data
    A2 = A if A.dim() > 1 else A.unsqueeze(0)   # a row
    B2 = B if B.dim() > 1 else B.unsqueeze(1)   # a column

    def rule(g):
        if B.dim() == 1:
            g = g.unsqueeze(-1)
        if A.dim() == 1:
            g = g.unsqueeze(-2)
        ga = torch.einsum("...ij,...kj->...ik", g, B2)
        gb = torch.einsum("...ji,...jk->...ik", A2, g)
        return unbroadcast(ga, A2.shape).reshape(A.shape), unbroadcast(gb, B2.shape).reshape(B.shape)

    return Tensor(torch.matmul(A, B), (a, b), "matmul", rule)
''',
           earlier='''\
class Tensor:
    """An array that remembers how it was made: lesson 03's Value, a whole tensor at a time."""

    def __init__(self, data, parents=(), op="", rule=None):
        self.data = torch.as_tensor(data, dtype=torch.float64).detach().clone()  # storage only
        self.grad = None  # a leaf's gradient, shaped like data, once backward has run
        self.parents = parents  # the Tensors this one was computed from
        self.op = op  # "+", "@", "sum"...: for printing and drawing
        self.rule = rule  # g -> one gradient per parent, in order; None for a leaf

    @property
    def shape(self):
        return tuple(self.data.shape)

    def __repr__(self):
        return f"Tensor({self.op or 'leaf'}, shape {self.shape})"


def as_tensor(x):
    return x if isinstance(x, Tensor) else Tensor(x)

def add(a, b):
    a, b = as_tensor(a), as_tensor(b)

    def rule(g):
        return g.sum_to_size(a.shape), g.sum_to_size(b.shape)

    return Tensor(a.data + b.data, (a, b), "+", rule)


def mul(a, b):
    a, b = as_tensor(a), as_tensor(b)

    def rule(g):  # each factor gets g times the other, summed back to its own shape
        return (g * b.data).sum_to_size(a.shape), (g * a.data).sum_to_size(b.shape)

    return Tensor(a.data * b.data, (a, b), "*", rule)

def matmul(a, b):
    if a.data.dim() != 2 or b.data.dim() != 2:
        raise ValueError(f"matmul: expected two 2-D Tensors, got shapes {a.shape} and {b.shape}")

    def rule(g):
        return g @ b.data.T, a.data.T @ g

    return Tensor(a.data @ b.data, (a, b), "@", rule)


def relu(a):
    return Tensor(a.data.clamp(min=0), (a,), "relu", lambda g: (g * (a.data > 0),))


def tanh(a):
    out = Tensor(a.data.tanh(), (a,), "tanh")
    out.rule = lambda g: (g * (1 - out.data**2),)
    return out


def exp(a):
    out = Tensor(a.data.exp(), (a,), "exp")
    out.rule = lambda g: (g * out.data,)
    return out


def log(a):
    return Tensor(a.data.log(), (a,), "log", lambda g: (g / a.data,))

def reduce_sum(a, dim=None, keepdim=False):
    dims = range(a.data.dim()) if dim is None else [dim] if isinstance(dim, int) else dim
    summed = {d % a.data.dim() for d in dims}  # a negative dim counts from the end
    kept = [1 if i in summed else n for i, n in enumerate(a.shape)]

    def rule(g):
        return (g.reshape(kept).expand(a.shape),)

    return Tensor(a.data.sum(dim=dim, keepdim=keepdim), (a,), "sum", rule)


def mean(a, dim=None, keepdim=False):
    total = reduce_sum(a, dim, keepdim)
    return total * (total.data.numel() / a.data.numel())


def reshape(a, *shape):
    return Tensor(a.data.reshape(*shape), (a,), "reshape", lambda g: (g.reshape(a.shape),))


def getitem(a, index):
    came_from = torch.arange(a.data.numel()).reshape(a.shape)[index]

    def rule(g):
        flat = torch.zeros(a.data.numel(), dtype=g.dtype)
        flat.index_add_(0, came_from.reshape(-1), g.reshape(-1))
        return (flat.reshape(a.shape),)

    return Tensor(a.data[index], (a,), "index", rule)

Tensor.__add__ = Tensor.__radd__ = add
Tensor.__mul__ = Tensor.__rmul__ = mul
Tensor.__matmul__ = matmul
Tensor.__getitem__ = getitem
Tensor.__neg__ = lambda a: a * -1.0
Tensor.__sub__ = lambda a, b: a + (-as_tensor(b))
Tensor.__rsub__ = lambda a, b: as_tensor(b) + (-a)
Tensor.__truediv__ = lambda a, b: a * (1 / b)  # b a plain number
Tensor.sum, Tensor.mean, Tensor.reshape = reduce_sum, mean, reshape
Tensor.relu, Tensor.tanh, Tensor.exp, Tensor.log = relu, tanh, exp, log

x = Tensor(torch.arange(6.0).reshape(2, 3))
b = Tensor([10.0, 20.0, 30.0])
y = (x * b + 1).sum(dim=1)
print(y, "=", y.data)
print("made by", y.op, "from", y.parents)
print("torch recorded nothing:", y.data.grad_fn is None and not y.data.requires_grad)

def topo_order(root):  # lesson 03's: every node after its parents
    order, seen = [], set()
    stack = [(root, False)]
    while stack:
        node, parents_done = stack.pop()
        if parents_done:
            order.append(node)  # every parent is already in the order
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append((node, True))
            stack.extend((p, False) for p in node.parents if id(p) not in seen)
    return order


def backward(root):
    if root.data.numel() != 1:
        raise ValueError(f"backward: expected a Tensor holding one number (a loss), got "
                         f"shape {root.shape}")
    grads = {id(root): torch.ones_like(root.data)}  # d root / d root
    for node in reversed(topo_order(root)):
        g = grads.pop(id(node))  # complete: every node that used this one has run
        if node.rule is None:  # a leaf: add to what it holds
            node.grad = g if node.grad is None else node.grad + g
            continue
        for parent, share in zip(node.parents, node.rule(g), strict=True):
            if id(parent) in grads:
                grads[id(parent)] = grads[id(parent)] + share  # paths add up
            else:
                grads[id(parent)] = share

def unbroadcast(t, shape):
    """t summed back to shape: over the dimensions added in front, then where shape has 1."""
    while t.dim() > len(shape):
        t = t.sum(0)
    stretched = [i for i, n in enumerate(shape) if n == 1 and t.shape[i] != 1]
    return t.sum(stretched, keepdim=True) if stretched else t
'''),
    Honest('l11-matmul',
           'a loop over the batch with itertools.product, rule set after',
           '''\
import itertools


def broadcast_matmul(a, b):
    A = a.data if a.data.dim() > 1 else a.data.reshape(1, -1)
    B = b.data if b.data.dim() > 1 else b.data.reshape(-1, 1)
    batch = torch.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    A_full = A.reshape((1,) * (len(batch) + 2 - A.dim()) + tuple(A.shape))  # ones in front
    B_full = B.reshape((1,) * (len(batch) + 2 - B.dim()) + tuple(B.shape))
    out = Tensor(a.data @ b.data, (a, b), "matmul")

    def rule(g):
        G = g.reshape(*batch, A.shape[-2], B.shape[-1])
        ga, gb = torch.zeros_like(A_full), torch.zeros_like(B_full)
        for idx in itertools.product(*(range(n) for n in batch)):  # every matrix product
            ia = tuple(i if n > 1 else 0 for i, n in zip(idx, A_full.shape))
            ib = tuple(i if n > 1 else 0 for i, n in zip(idx, B_full.shape))
            ga[ia] += G[idx] @ B_full[ib].T
            gb[ib] += A_full[ia].T @ G[idx]
        return ga.reshape(a.shape), gb.reshape(b.shape)

    out.rule = rule
    return out
''',
           earlier=LESSON_11_ENGINE),
    Honest('l11-matmul',
           'g reshaped to the broadcast batch, sum_to_size, Tensor.__matmul__ replaced',
           '''\
def broadcast_matmul(a, b):
    A = a.data.unsqueeze(0) if a.data.dim() == 1 else a.data
    B = b.data.unsqueeze(-1) if b.data.dim() == 1 else b.data

    def rule(g):
        g = g.reshape(torch.broadcast_shapes(A.shape[:-2], B.shape[:-2]) + (A.shape[-2], B.shape[-1]))
        return ((g @ B.mT).sum_to_size(A.shape).reshape(a.shape),
                (A.mT @ g).sum_to_size(B.shape).reshape(b.shape))

    return Tensor(a.data @ b.data, (a, b), "@", rule)


Tensor.__matmul__ = broadcast_matmul
''',
           earlier=LESSON_11_ENGINE),
    Honest('l12-centre',
           'a class of @staticmethod steps',
           '''\
class BatchNormSteps:
    """Batch norm's lines, bottom up, one static method per line."""

    @staticmethod
    def invstd(var, eps, dinvstd):
        return -0.5 * (var + eps) ** -1.5 * dinvstd

    @staticmethod
    def mean_over_rows(dout, n):
        return dout.repeat(n, 1) / n

    @staticmethod
    def subtracted(ddiff):
        return -ddiff.sum(dim=0, keepdim=True)


def centre_backward(diff, var, eps, dxhat, dinvstd):
    n = diff.shape[0]
    dvar = BatchNormSteps.invstd(var, eps, dinvstd)
    ddiff2 = BatchNormSteps.mean_over_rows(dvar, n)
    ddiff = dxhat * (var + eps) ** -0.5 + 2 * diff * ddiff2
    dmean = BatchNormSteps.subtracted(ddiff)
    return dvar, ddiff2, ddiff, dmean, ddiff + BatchNormSteps.mean_over_rows(dmean, n)
'''),
    Honest('l12-centre',
           'rsqrt, a module-level axis, += on a fresh tensor',
           '''\
BATCH = 0  # the dimension batch norm averages over


def centre_backward(diff, var, eps, dxhat, dinvstd):
    n = diff.size(BATCH)
    invstd = torch.rsqrt(var + eps)
    dvar = dinvstd * -0.5 * invstd**3
    ddiff2 = torch.ones_like(diff) * (dvar / n)
    ddiff = dxhat * invstd
    ddiff += 2 * diff * ddiff2  # the second use of diff
    dmean = -torch.sum(ddiff, dim=BATCH, keepdim=True)
    dhpre = ddiff + dmean / n
    return dvar, ddiff2, ddiff, dmean, dhpre
'''),
    Honest('l12-centre',
           'sqrt computed twice, expand(...).clone()',
           '''\
def centre_backward(diff, var, eps, dxhat, dinvstd):
    n = len(diff)
    std = torch.sqrt(var + eps)
    dvar = -0.5 * dinvstd / std**3
    ddiff2 = (dvar / n).expand(n, -1).clone()
    ddiff = dxhat / torch.sqrt(var + eps) + 2 * diff * ddiff2
    dmean = -ddiff.sum(0, keepdim=True)
    return dvar, ddiff2, ddiff, dmean, ddiff + dmean / n
'''),
    Honest('l12-centre',
           'tuple-unpacked module-level axes',
           '''\
BATCH, FEATURES = 0, 1


def centre_backward(diff, var, eps, dxhat, dinvstd):
    n = diff.shape[BATCH]
    dvar = -0.5 * (var + eps) ** -1.5 * dinvstd
    ddiff2 = dvar.expand_as(diff) / n
    ddiff = dxhat * (var + eps) ** -0.5 + 2 * diff * ddiff2
    dmean = -ddiff.sum(BATCH, keepdim=True)
    return dvar, ddiff2, ddiff, dmean, ddiff + dmean / n
'''),
    Honest('l12-embedding',
           'one_hot, view and einsum',
           '''\
def embedding_backward(dxin, tokens, num_rows):
    n, T = tokens.shape
    demb = dxin[:, 2:].view(n, T, -1)
    picks = F.one_hot(tokens, num_rows).to(dxin.dtype)  # (n, T, rows): which row each read
    dC = torch.einsum("ntr,nte->re", picks, demb)
    return demb, dC
'''),
    Honest('l12-embedding',
           'split and scatter_add_',
           '''\
def embedding_backward(dxin, tokens, num_rows):
    n, T = tokens.shape
    _, dembcat = torch.split(dxin, [2, dxin.shape[1] - 2], dim=1)
    demb = dembcat.reshape(n, T, -1)
    E = demb.shape[-1]
    index = tokens.reshape(-1, 1).expand(-1, E)
    dC = torch.zeros(num_rows, E, dtype=dxin.dtype).scatter_add_(0, index, demb.reshape(-1, E))
    return demb, dC
'''),
    Honest('l12-embedding',
           'a defaultdict of rows',
           '''\
from collections import defaultdict


def embedding_backward(dxin, tokens, num_rows):
    n, T = tokens.shape
    demb = dxin[:, 2:].reshape(n, T, -1)
    E = demb.shape[2]
    rows = defaultdict(lambda: torch.zeros(E, dtype=dxin.dtype))
    for token, g in zip(tokens.flatten().tolist(), demb.reshape(-1, E)):
        rows[token] = rows[token] + g  # a row read twice gets both gradients
    return demb, torch.stack([rows[r] for r in range(num_rows)])
'''),
    Honest('l12-embedding',
           'bincount with weights, one column at a time',
           '''\
def embedding_backward(dxin, tokens, num_rows):
    n, T = tokens.shape
    demb = dxin[:, 2:].reshape(n, T, -1)
    ids, flat = tokens.flatten(), demb.reshape(n * T, -1)
    columns = [torch.bincount(ids, weights=flat[:, e], minlength=num_rows)
               for e in range(flat.shape[1])]
    return demb, torch.stack(columns, dim=1)
'''),
    Honest('l12-embedding',
           'index_put_ with accumulate=True',
           '''\
def embedding_backward(dxin, tokens, num_rows):
    n, T = tokens.shape
    demb = dxin[:, 2:].reshape(n, T, -1)
    dC = dxin.new_zeros(num_rows, demb.shape[-1])
    dC.index_put_((tokens,), demb, accumulate=True)
    return demb, dC
'''),
    Honest('l12-embedding',
           'functools.reduce over the lookups',
           '''\
import functools


def embedding_backward(dxin, tokens, num_rows):
    n, T = tokens.shape
    demb = dxin[:, 2:].reshape(n, T, -1)
    E = demb.shape[-1]

    def add_lookup(dC, lookup):
        token, g = lookup
        dC[token] += g
        return dC

    lookups = zip(tokens.flatten().tolist(), demb.reshape(-1, E))
    return demb, functools.reduce(add_lookup, lookups, dxin.new_zeros(num_rows, E))
'''),
    Honest('l12-layernorm',
           "batch norm's steps along dim 1",
           '''\
def layernorm_backward(dout, x, gain, eps):
    D = x.shape[1]
    mean = x.mean(1, keepdim=True)
    diff = x - mean
    var = (diff**2).mean(1, keepdim=True)
    invstd = (var + eps) ** -0.5
    dxhat = dout * gain
    dinvstd = (dxhat * diff).sum(1, keepdim=True)
    dvar = -0.5 * (var + eps) ** -1.5 * dinvstd
    ddiff = dxhat * invstd + 2 * diff * dvar / D
    dmean = -ddiff.sum(1, keepdim=True)
    return ddiff + dmean / D
'''),
    Honest('l12-layernorm',
           'a lambda over the transpose, a helper in an earlier cell',
           '''\
# layer norm is batch norm of the transpose: every row's features are a batch of one feature
layernorm_backward = lambda dout, x, gain, eps: normalised_dx_over_rows(
    (dout * gain).T, x.T, eps).T
''',
           earlier='''\
def normalised_dx_over_rows(g, x, eps):
    """Batch norm's compact backward (the statistics over dim 0), for the gradient g at xhat."""
    n = x.shape[0]
    invstd = 1 / torch.sqrt(x.var(0, correction=0) + eps)
    xhat = (x - x.mean(0)) * invstd
    return invstd / n * (n * g - g.sum(0) - xhat * (g * xhat).sum(0))
'''),
    Honest('l12-layernorm',
           'F.layer_norm for xhat, torch.var_mean',
           '''\
def layernorm_backward(dout, x, gain, eps):
    D = x.shape[-1]
    var, _ = torch.var_mean(x, dim=-1, correction=0, keepdim=True)
    xhat = F.layer_norm(x, (D,), eps=eps)
    g = dout * gain
    return (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True)) / torch.sqrt(var + eps)
'''),
    Honest('l12-layernorm',
           'a helper defined in the cell below the answer',
           '''\
def layernorm_backward(dout, x, gain, eps):
    xhat, invstd = row_stats(x, eps)
    g = dout * gain
    return invstd * (g - g.mean(1, keepdim=True) - xhat * (g * xhat).mean(1, keepdim=True))
''',
           earlier=None,
           later='''\
def row_stats(x, eps):
    centred = x - x.mean(1, keepdim=True)
    invstd = (centred.pow(2).mean(1, keepdim=True) + eps) ** -0.5
    return centred * invstd, invstd
'''),
    Honest('l12-normalise',
           'functools.partial of a power-rule lambda, einsum',
           '''\
import functools

power_slope = lambda t, k: k * t ** (k - 1)
inverse_slope = functools.partial(power_slope, k=-1)  # d(s**-1)/ds


def normalise_backward(counts, counts_sum, dprobs):
    counts_sum_inv = counts_sum**-1
    dcounts_sum_inv = torch.einsum("nc,nc->n", dprobs, counts).unsqueeze(1)
    dcounts_sum = inverse_slope(counts_sum) * dcounts_sum_inv
    dcounts = dprobs * counts_sum_inv
    dcounts += dcounts_sum  # the second use of counts, broadcast over the classes
    return dcounts_sum_inv, dcounts_sum, dcounts
'''),
    Honest('l12-normalise',
           'a loop over the rows',
           '''\
def normalise_backward(counts, counts_sum, dprobs):
    dinv = torch.zeros_like(counts_sum)
    dsum = torch.zeros_like(counts_sum)
    dcounts = torch.zeros_like(counts)
    for i in range(len(counts)):  # one row at a time
        s = counts_sum[i, 0]
        dinv[i, 0] = (dprobs[i] * counts[i]).sum()
        dsum[i, 0] = -dinv[i, 0] / s**2
        dcounts[i] = dprobs[i] / s + dsum[i, 0]
    return dinv, dsum, dcounts
'''),
    Honest('l12-normalise',
           'typing.Tuple and torch.Tensor annotations',
           '''\
from typing import Tuple

from torch import Tensor


def normalise_backward(counts: Tensor, counts_sum: Tensor,
                       dprobs: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    dinv = (dprobs * counts).sum(1, keepdim=True)
    dsum = -dinv / counts_sum**2
    return dinv, dsum, dprobs / counts_sum + dsum
'''),
    Honest('l12-scale-normalise',
           'einsum for every sum',
           '''\
def scale_normalise_backward(diff, invstd, gain, dhbn):
    dxhat = torch.einsum("h,nh->nh", gain, dhbn)
    dgain = torch.einsum("nh,nh,oh->h", dhbn, diff, invstd)  # xhat = diff * invstd
    dbias = torch.einsum("nh->h", dhbn)
    dinvstd = torch.einsum("nh,nh->h", dxhat, diff)[None, :]
    return dxhat, dgain, dbias, dinvstd
'''),
    Honest('l12-scale-normalise',
           'a dataclass with a backward method',
           '''\
from dataclasses import dataclass


@dataclass
class Affine:
    gain: torch.Tensor

    def backward(self, xhat, dhbn):
        return dhbn * self.gain, (dhbn * xhat).sum(0), dhbn.sum(0)


def scale_normalise_backward(diff, invstd, gain, dhbn):
    dxhat, dgain, dbias = Affine(gain).backward(diff * invstd, dhbn)
    return dxhat, dgain, dbias, (dxhat * diff).sum(0, keepdim=True)
'''),
    Honest('l12-scale-normalise',
           'an annotated module-level constant',
           '''\
ROWS: int = 0


def scale_normalise_backward(diff, invstd, gain, dhbn):
    dxhat = gain * dhbn
    return (dxhat, (dhbn * diff * invstd).sum(ROWS), dhbn.sum(ROWS),
            (dxhat * diff).sum(ROWS, keepdim=True))
'''),
    Honest('l12-shift',
           'torch.where on an argmax mask',
           '''\
def shift_backward(logits, counts, dcounts):
    dshifted = counts * dcounts
    dlogit_maxes = -torch.sum(dshifted, 1, keepdim=True)
    columns = torch.arange(logits.shape[1]).unsqueeze(0)
    is_max = columns == logits.argmax(1, keepdim=True)
    dlogits = dshifted + torch.where(is_max, dlogit_maxes, torch.zeros_like(dshifted))
    return dshifted, dlogit_maxes, dlogits
'''),
    Honest('l12-shift',
           'a clone and += at the argmax',
           '''\
def shift_backward(logits, counts, dcounts):
    dshifted = dcounts * counts
    dlogit_maxes = -dshifted.sum(dim=1, keepdim=True)
    dlogits = dshifted.clone()
    rows = torch.arange(len(logits))
    dlogits[rows, logits.argmax(dim=1)] += dlogit_maxes.squeeze(1)  # one max per row
    return dshifted, dlogit_maxes, dlogits
'''),
    Honest('l12-shift',
           'torch.where between two copies of dshifted',
           '''\
def shift_backward(logits, counts, dcounts):
    dshifted = dcounts * counts
    dlogit_maxes = -dshifted.sum(1, keepdim=True)
    is_max = torch.arange(logits.shape[1]) == logits.argmax(1, keepdim=True)
    return dshifted, dlogit_maxes, torch.where(is_max, dshifted + dlogit_maxes, dshifted)
'''),
    Honest('l12-weighted',
           'log_softmax, gather, -= on a fresh tensor',
           '''\
def weighted_dlogits(logits, y, weight):
    p = logits.log_softmax(dim=1).exp()
    p[torch.arange(logits.shape[0]), y] -= 1  # p is a fresh tensor: minus the one-hot
    w = weight.gather(0, y)
    return p * w.unsqueeze(-1) / w.sum()
'''),
    Honest('l12-weighted',
           'a loop over the rows',
           '''\
def weighted_dlogits(logits, y, weight):
    total = sum(weight[c] for c in y.tolist())
    rows = []
    for z, c in zip(logits, y.tolist()):
        p = torch.softmax(z, dim=0)
        target = torch.zeros_like(p)
        target[c] = 1
        rows.append(weight[c] * (p - target) / total)
    return torch.stack(rows)
'''),
    Honest('l12-weighted',
           'from torch.nn.functional import softmax, one_hot',
           '''\
from torch.nn.functional import one_hot, softmax


def weighted_dlogits(logits, y, weight):
    w = weight[y].unsqueeze(1)
    return w * (softmax(logits, dim=1) - one_hot(y, logits.shape[1])) / w.sum()
'''),
    Honest('l12-weighted',
           'a typed dict of lambdas',
           '''\
from typing import Callable

STEPS: dict[str, Callable] = {
    "probs": lambda z: torch.softmax(z, dim=1),
    "target": lambda y, classes: F.one_hot(y, classes),
}


def weighted_dlogits(logits, y, weight):
    w = weight[y][:, None]
    probs = STEPS["probs"](logits)
    return w * (probs - STEPS["target"](y, logits.shape[1])) / w.sum()
'''),
    Honest('l12-weighted',
           'torch.special.log_softmax and rows of torch.eye',
           '''\
def weighted_dlogits(logits, y, weight):
    probs = torch.special.log_softmax(logits, 1).exp()
    onehot = torch.eye(logits.shape[1], dtype=logits.dtype)[y]
    w = weight[y].reshape(-1, 1)
    return w * (probs - onehot) / w.sum()
'''),
    Honest('l13-conv-dx',
           "a loop over the kernel's offsets, added into a padded buffer",
           '''\
def conv2d_dx(x, w, dout, stride, padding):
    N, C_in, H, W = x.shape
    k = w.shape[-1]
    h_out, w_out = dout.shape[-2:]
    # out[n, o, p, q] read padded pixel (i + stride*p, j + stride*q) through w[o, c, i, j]
    dx_padded = x.new_zeros(N, C_in, H + 2 * padding, W + 2 * padding)
    for i in range(k):
        for j in range(k):
            share = torch.einsum('nopq,oc->ncpq', dout, w[:, :, i, j])
            dx_padded[:, :, i:i + stride * h_out:stride, j:j + stride * w_out:stride] += share
    return dx_padded[:, :, padding:padding + H, padding:padding + W]
'''),
    Honest('l13-conv-dx',
           'dout spread out by a helper of an earlier cell, a full correlation with the turned kernel',
           '''\
def conv2d_dx(x, w, dout, stride, padding):
    H, W = x.shape[-2:]
    k = w.shape[-1]
    spread = spread_out(dout, stride)
    # the full correlation: every kernel entry meets every dout entry; kernel turned 180
    full = F.conv2d(F.pad(spread, (k - 1, k - 1, k - 1, k - 1)), w.flip(2, 3).transpose(0, 1))
    # full covers the padded image up to the last window; the rest got nothing
    dx_padded = full.new_zeros(x.shape[0], x.shape[1], H + 2 * padding, W + 2 * padding)
    dx_padded[:, :, :full.shape[2], :full.shape[3]] = full
    return dx_padded[:, :, padding:padding + H, padding:padding + W]
''',
           earlier='''\
def spread_out(dout, stride):
    """dout with stride - 1 zeros between its entries, as the forward pass's steps left them."""
    N, C, h, w = dout.shape
    spread = dout.new_zeros(N, C, (h - 1) * stride + 1, (w - 1) * stride + 1)
    spread[:, :, ::stride, ::stride] = dout
    return spread
'''),
    Honest('l13-conv-dw',
           'F.unfold and one einsum, db by three sums',
           '''\
def conv2d_dw_db(x, w, dout, stride, padding):
    cols = F.unfold(x, w.shape[-1], stride=stride, padding=padding)  # (N, C_in*k*k, L)
    dw = torch.einsum('nol,nkl->ok', dout.flatten(2), cols).reshape(w.shape)
    db = dout.sum(0).sum(-1).sum(-1)
    return dw, db
'''),
    Honest('l13-conv-dw',
           'a correlation of the image with dout, dilated by the stride',
           '''\
def conv2d_dw_db(x, w, dout, stride, padding):
    k = w.shape[-1]
    # dw[o, c, i, j] = sum over n, p, q of dout[n, o, p, q] * x_padded[n, c, i + stride*p, j + stride*q]:
    # a correlation of the padded image (the batch as channels) with dout, dilated by the stride
    x_padded = F.pad(x, [padding] * 4).transpose(0, 1)  # (C_in, N, Hp, Wp)
    kernel = dout.transpose(0, 1)                      # (C_out, N, h_out, w_out)
    dw = F.conv2d(x_padded, kernel, dilation=stride)    # (C_in, C_out, >= k, >= k)
    dw = dw[:, :, :k, :k].transpose(0, 1).contiguous()  # past k: pixels no window reached
    return dw, torch.sum(dout, dim=(0, 2, 3))
'''),
    Honest('l13-pool',
           'Tensor.unfold, index arithmetic and scatter_add_',
           '''\
def maxpool_backward(x, dout, kernel, stride):
    N, C, H, W = x.shape
    patches = x.unfold(2, kernel, stride).unfold(3, kernel, stride)  # (N, C, Ho, Wo, k, k)
    Ho, Wo = patches.shape[2], patches.shape[3]
    first = patches.reshape(N, C, Ho, Wo, kernel * kernel).argmax(dim=-1)  # first maximum
    rows = torch.arange(Ho).view(Ho, 1) * stride + first // kernel
    cols = torch.arange(Wo).view(1, Wo) * stride + first % kernel
    where = (rows * W + cols).reshape(N, C, Ho * Wo)
    dx = torch.zeros(N, C, H * W, dtype=x.dtype, device=x.device)
    dx.scatter_add_(2, where, dout.reshape(N, C, Ho * Wo))  # overlapping windows add up
    return dx.view(N, C, H, W)
'''),
    Honest('l13-pool',
           'the first maximum by a cumsum mask, torch.where, added offset by offset',
           '''\
def maxpool_backward(x, dout, kernel, stride):
    Ho, Wo = dout.shape[-2:]
    offsets = [(a, b) for a in range(kernel) for b in range(kernel)]  # a window, row by row

    def at(t, a, b):  # entry (a, b) of every window
        return t[:, :, a:a + stride * (Ho - 1) + 1:stride, b:b + stride * (Wo - 1) + 1:stride]

    stacked = torch.stack([at(x, a, b) for a, b in offsets], dim=-1)  # (N, C, Ho, Wo, k*k)
    is_top = stacked == stacked.amax(dim=-1, keepdim=True)
    first = is_top & (is_top.cumsum(dim=-1) == 1)  # ties: only the first one counts
    dx = torch.zeros_like(x)
    for idx, (a, b) in enumerate(offsets):
        at(dx, a, b).add_(torch.where(first[..., idx], dout, torch.zeros_like(dout)))
    return dx
'''),
    Honest('l13-dropout',
           'torch.where on the mask',
           '''\
def dropout_backward(dout, mask, p, training):
    if training:
        return torch.where(mask, dout / (1 - p), torch.zeros_like(dout))
    return dout.clone()  # eval: dropout was the identity
'''),
    Honest('l13-dropout',
           'a class with __call__, in-place ops on a copy',
           '''\
class DropoutBackward:
    """Backward of F.dropout: the kept entries scaled as forward scaled them."""

    def __call__(self, dout, mask, p, training):
        grad = dout.clone()
        if training:
            grad.masked_fill_(~mask, 0.0)
            grad.div_(1 - p)
        return grad


dropout_backward = DropoutBackward()
'''),
    Honest('l15-vanishing',
           "tensor hooks on each layer's input, placed by forward pre-hooks",
           '''\
def first_vanishing_layer(model, x, threshold):
    norms = {}
    tensor_handles = []

    def watch_input(name):
        def pre_hook(module, inputs):
            def record(grad):
                norms[name] = grad.norm().item()
            tensor_handles.append(inputs[0].register_hook(record))
        return pre_hook

    module_handles = [layer.register_forward_pre_hook(watch_input(name))
                      for name, layer in model.named_children()]
    out = model(x)
    for handle in module_handles:
        handle.remove()
    out.sum().backward()
    for handle in tensor_handles:
        handle.remove()
    names = [name for name, _ in model.named_children()]
    for name in reversed(names):
        if norms[name] < threshold:
            return name
    return None
'''),
    Honest('l15-vanishing',
           'a recorder class making the hooks, torch.autograd.grad, next() over the walk',
           '''\
class NormRecorder:
    def __init__(self):
        self.norms = {}

    def hook_for(self, name):
        def hook(module, grad_input, grad_output):
            self.norms[name] = torch.linalg.vector_norm(grad_input[0]).item()
        return hook


def first_vanishing_layer(model, x, threshold):
    recorder = NormRecorder()
    layers = list(model.named_children())
    handles = [layer.register_full_backward_hook(recorder.hook_for(name)) for name, layer in layers]
    try:
        torch.autograd.grad(model(x).sum(), x)
    finally:
        for handle in handles:
            handle.remove()
    return next((name for name, _ in layers[::-1] if recorder.norms[name] < threshold), None)
'''),
    Honest('l16-bytes-formula',
           'a module-level table of what each activation keeps',
           '''\
# per hidden layer, the tensors of shape (batch, width) kept: the activation's output
# (the next Linear's input), and for GELU its input too
KEPT_PER_HIDDEN = {"relu": 1, "tanh": 1, "sigmoid": 1, "gelu": 2}
FLOAT32_BYTES = 4


def bytes_formula(batch, widths, activation):
    hidden = widths[1:-1]
    numbers = batch * widths[0] + KEPT_PER_HIDDEN[activation] * batch * sum(hidden)
    return FLOAT32_BYTES * numbers
'''),
    Honest('l16-bytes-formula',
           'a lambda, the element size from torch.finfo',
           '''\
FLOAT_BYTES = torch.finfo(torch.float32).bits // 8

bytes_formula = lambda batch, widths, activation: FLOAT_BYTES * batch * (
    widths[0] + (2 if activation == "gelu" else 1) * sum(widths[1:-1]))
'''),
    Honest('l17-hvp-by-hand',
           "einsum throughout, tanh'' through cosh",
           '''\
def hvp(x, W, a, V):
    Z = torch.einsum('nd,dh->nh', x, W)
    Z_dot = torch.einsum('nd,dh->nh', x, V)  # the direction through the layer
    tanh_second = -2 * torch.tanh(Z) / torch.cosh(Z) ** 2  # d/dz sech^2 z
    return torch.einsum('nd,nh,h->dh', x, tanh_second * Z_dot, a)
'''),
    Honest('l17-hvp-by-hand',
           'a loop over the examples, outer products added up',
           '''\
def hvp(x, W, a, V):
    result = torch.zeros_like(W)
    for row in x:  # L is a sum over rows: so are its gradient and Hv
        t = torch.tanh(row @ W)
        z_dot = row @ V
        result += torch.outer(row, -2 * t * (1 - t * t) * z_dot * a)
    return result
'''),
    Honest('l17-newton-step',
           'backward with create_graph, then autograd.grad of x.grad',
           '''\
def newton_step(f, x):
    x = x.detach().clone().requires_grad_(True)
    f(x).sum().backward(create_graph=True)
    slope = x.grad
    (curvature,) = torch.autograd.grad(slope.sum(), x)
    return (-slope / curvature).detach()
'''),
    Honest('l17-newton-step',
           'torch.func.vmap of grad of grad, point by point',
           '''\
def newton_step(f, x):
    d1 = torch.func.grad(f)
    d2 = torch.func.grad(d1)
    return torch.func.vmap(lambda t: -d1(t) / d2(t))(x)
'''),
    Honest('l17-weight-penalty',
           'autograd.grad then backward into w.grad',
           '''\
def penalty_grad(f, x, w):
    x = x.clone().requires_grad_()
    w = w.clone().requires_grad_()
    (grad_x,) = torch.autograd.grad(f(x, w), x, create_graph=True)
    (grad_x * grad_x).sum().backward()
    return w.grad
'''),
    Honest('l17-weight-penalty',
           'torch.func.vjp of the input-gradient, pulled back with 2g',
           '''\
def penalty_grad(f, x, w):
    def input_gradient(w):
        return torch.func.grad(f, argnums=0)(x, w)

    g, pullback = torch.func.vjp(input_gradient, w)
    (result,) = pullback(2 * g)  # d/dw |g|^2 = J_g(w)^T (2 g)
    return result
'''),
    Honest('l18-jvp-by-hand',
           "torch.mv and torch.dot, tanh' as sech squared",
           '''\
def tangent(W, b, x, v):
    u = torch.mv(W, x) + b
    u_dot = torch.mv(W, v)  # b does not move
    h = torch.tanh(u)
    h_dot = u_dot / torch.cosh(u) ** 2
    s = torch.dot(x, x)
    s_dot = torch.dot(v, x) + torch.dot(x, v)  # product rule on x . x
    return h_dot * s + h * s_dot
'''),
    Honest('l18-jvp-by-hand',
           "a loop over the output's entries, written into a fresh tensor",
           '''\
def tangent(W, b, x, v):
    s, s_dot = (x ** 2).sum(), 2 * (x * v).sum()
    out = torch.empty(W.shape[0], dtype=x.dtype)
    for i in range(W.shape[0]):
        u_i, u_i_dot = (W[i] * x).sum() + b[i], (W[i] * v).sum()
        h_i = torch.tanh(u_i)
        h_i_dot = (1 - h_i ** 2) * u_i_dot
        out[i] = h_i_dot * s + h_i * s_dot
    return out
'''),
    Honest("l19-broadcast-function", "staticmethod() of functions written outside the class", (
        "def squared_gap_forward(ctx, a, b):\n    ctx.save_for_backward(a, b)\n"
        "    return (a - b) ** 2\n\n\n"
        "def squared_gap_backward(ctx, grad_output):\n    a, b = ctx.saved_tensors\n"
        "    grad = 2 * (a - b) * grad_output\n"
        "    return grad.sum_to_size(a.shape), (-grad).sum_to_size(b.shape)\n\n\n"
        "class SquaredGap(torch.autograd.Function):\n"
        "    forward = staticmethod(squared_gap_forward)\n"
        "    backward = staticmethod(squared_gap_backward)\n")),
    Honest('l19-broadcast-function',
           'setup_context, the broadcast dimensions summed by a helper',
           '''\
def reduce_to(grad, shape):
    """grad summed over the dimensions broadcasting added or stretched, shaped like shape."""
    lead = grad.dim() - len(shape)
    dims = [d for d in range(grad.dim()) if d < lead or shape[d - lead] == 1]
    if dims:
        grad = grad.sum(dim=dims, keepdim=True)
    return grad.reshape(shape)


class SquaredGap(torch.autograd.Function):
    @staticmethod
    def forward(a, b):
        return (a - b) ** 2

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, b = inputs
        ctx.save_for_backward(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        grad = 2 * (a - b) * grad_output
        return reduce_to(grad, a.shape), reduce_to(-grad, b.shape)
'''),
    Honest('l19-broadcast-function',
           'the difference saved, shapes on ctx, once_differentiable',
           '''\
from torch.autograd.function import once_differentiable


class SquaredGap(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        diff = a - b
        ctx.save_for_backward(diff)
        ctx.a_shape, ctx.b_shape = a.shape, b.shape
        return diff.pow(2)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        (diff,) = ctx.saved_tensors
        grad = grad_output * diff * 2
        grad_a = grad.sum_to_size(ctx.a_shape) if ctx.needs_input_grad[0] else None
        grad_b = grad.neg().sum_to_size(ctx.b_shape) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b
'''),
    Honest('l19-logsumexp',
           'setup_context saving x and the output, [..., None] indexing',
           '''\
class LogSumExp(torch.autograd.Function):
    @staticmethod
    def forward(x):
        m = x.max(dim=-1, keepdim=True).values
        return (m + (x - m).exp().sum(dim=-1, keepdim=True).log()).squeeze(-1)

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x, output)

    @staticmethod
    def backward(ctx, grad_output):
        x, out = ctx.saved_tensors
        return (x - out[..., None]).exp() * grad_output[..., None]
'''),
    Honest('l19-logsumexp',
           'x alone saved, the weights normalised by their sum in backward',
           '''\
class LogSumExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        shift = torch.amax(x, dim=-1)
        return shift + torch.log(torch.sum(torch.exp(x - shift.unsqueeze(-1)), dim=-1))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        e = torch.exp(x - torch.amax(x, dim=-1, keepdim=True))  # no overflow: at most 1
        weights = e / e.sum(dim=-1, keepdim=True)
        return weights * grad_output.unsqueeze(-1).expand_as(x)
'''),
    Honest('l19-power-mix',
           'setup_context, x**p computed once and divided by x',
           '''\
class PowerMix(torch.autograd.Function):
    @staticmethod
    def forward(x, y, p):
        return torch.pow(x, p) * y

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, y, p = inputs
        ctx.save_for_backward(x, y)
        ctx.p = p

    @staticmethod
    def backward(ctx, grad_output):
        x, y = ctx.saved_tensors
        x_to_p = torch.pow(x, ctx.p)
        grad_x = grad_output * y * ctx.p * x_to_p / x  # p x**(p-1) = p x**p / x
        grad_y = grad_output * x_to_p
        return grad_x, grad_y, None
'''),
    Honest('l19-power-mix',
           'tensors kept as attributes of ctx, the power rule a helper in an earlier cell',
           '''\
class PowerMix(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, p):
        ctx.x, ctx.y, ctx.p = x, y, p
        return x**p * y

    @staticmethod
    def backward(ctx, grad_output):
        dx = power_rule(ctx.x, ctx.p) * ctx.y
        dy = ctx.x**ctx.p
        return dx * grad_output, dy * grad_output, None
''',
           earlier='''\
def power_rule(x, p):
    """d/dx of x**p."""
    return p * x ** (p - 1)
'''),
    Honest('l19-softplus-in-place',
           'setup_context, in-place clamp_ and add_, sigma as 1 - exp(-y)',
           '''\
class SoftplusInPlace(torch.autograd.Function):
    @staticmethod
    def forward(x):
        tail = torch.log1p(torch.exp(-x.abs()))  # log(1 + e^-|x|), never overflows
        x.clamp_(min=0)
        x.add_(tail)  # max(x, 0) + log(1 + e^-|x|)
        return x

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.mark_dirty(inputs[0])
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        # e^y = 1 + e^x, so e^-y = 1 - sigma(x)
        sigma = 1 - torch.exp(-y)
        return grad_output * sigma
'''),
    Honest('l19-softplus-in-place',
           'ctx form, logaddexp with 0, sigma as 1 - 1 / exp(y)',
           '''\
class SoftplusInPlace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.copy_(torch.logaddexp(x, torch.zeros_like(x)))  # log(e^x + e^0), stable
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)  # x holds y now
        return x

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        # 1 + e^x = e^y, so sigma(x) = e^x / (1 + e^x) = (e^y - 1) / e^y = 1 - 1 / e^y
        return grad_output * (1 - 1 / torch.exp(y))
'''),
    Honest('l20-engine-views',
           "a view's steps kept as a list replayed by a helper, add_ and copy_ written apart",
           '''\
def view(a, f):
    v = Var(f(a.data))
    v.version = a.version
    if a.base is None:
        v.base, v.steps = a, [f]
    else:
        v.base, v.steps = a.base, a.steps + [f]
    v.built_at = -1
    return v


def located(t, steps):
    """The part of t (shaped like the base) that the steps pick out."""
    for f in steps:
        t = f(t)
    return t


def grad_fn(a):
    if a.base is None:
        return a.node
    if a.built_at == a.version.value:
        return a.node
    below = grad_fn(a.base)
    a.built_at = a.version.value
    if below is None:
        a.node = None
        return None
    shape, steps = a.base.data.shape, a.steps

    def rule(g):
        full = torch.zeros(shape, dtype=g.dtype)
        located(full, steps)[...] = g
        return (full,)

    a.node = Node("AsStridedBackward", (below,), rule)
    return a.node


def writable_owner(a):
    owner = a.base if a.base is not None else a
    if owner.node is not None and owner.node.name == "AccumulateGrad":
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation")
    return owner


def add_(a, b):
    owner = writable_owner(a)
    before, incoming = grad_fn(owner), grad_fn(b)
    a.data += b.data
    a.version.value += 1
    if before is None and incoming is None:
        return a
    steps = a.steps if a.base is not None else []

    def rule(g):
        return g, located(g, steps).clone()

    owner.node = Node("AddBackward", (before, incoming), rule)
    return a


def copy_(a, b):
    owner = writable_owner(a)
    before, incoming = grad_fn(owner), grad_fn(b)
    a.data[...] = b.data
    a.version.value += 1
    if before is None and incoming is None:
        return a
    steps = a.steps if a.base is not None else []

    def rule(g):
        to_b = located(g, steps).clone()
        kept = g.clone()
        located(kept, steps).zero_()  # what was overwritten sends nothing back
        return kept, to_b

    owner.node = Node("CopySlices", (before, incoming), rule)
    return a
''',
           earlier="\n\n".join(ENGINE_CELLS)),
    Honest('l22-complex-linear',
           'einsum with torch.conj_physical',
           '''\
def complex_linear_backward(x, W, b, G):
    # Y_nk = sum_i x_ni W_ik: each factor's gradient takes the other one conjugated
    dx = torch.einsum("nk,ik->ni", G, torch.conj_physical(W))
    dW = torch.einsum("ni,nk->ik", torch.conj_physical(x), G)
    db = torch.einsum("nk->k", G)
    return dx, dW, db
'''),
    Honest('l22-complex-linear',
           'a loop over the rows of the batch, W.adjoint() and outer products',
           '''\
def complex_linear_backward(x, W, b, G):
    W_h = W.adjoint()
    dx = torch.zeros_like(x)
    dW = torch.zeros_like(W)
    db = torch.zeros_like(b)
    for n in range(x.shape[0]):
        dx[n] = G[n] @ W_h
        dW += torch.outer(x[n].conj(), G[n])
        db += G[n]
    return dx, dW, db
'''),
    Honest('l22-complex-vjps',
           'real and imaginary parts worked out, torch.complex and torch.polar',
           '''\
def complex_vjps(z, w, g, r):
    gr, gi = g.real, g.imag

    def times_conj(a):  # g * conj(a), in real arithmetic
        return torch.complex(gr * a.real + gi * a.imag, gi * a.real - gr * a.imag)

    dz, dw = times_conj(w), times_conj(z)
    d_abs2 = torch.complex(2 * r * z.real, 2 * r * z.imag)  # dL/dx + i dL/dy of x^2 + y^2
    exp_conj = torch.polar(torch.exp(z.real), -z.imag)  # conj(e^z) = e^x (cos y - i sin y)
    return dz, dw, d_abs2, g * exp_conj
'''),
    Honest('l22-hinge-kinks',
           'plain loops over examples and pairs, math.sqrt',
           '''\
import math


def hinge_grad(X, y, w, lam):
    grad = torch.zeros_like(w)
    for x_i, y_i in zip(X, y):
        s = x_i @ w
        # hardtanh passes the gradient strictly inside (-2, 2); relu only for a margin > 0
        if -2.0 < s < 2.0 and 1 - y_i * s > 0:
            grad -= y_i * x_i
    for k in range(0, len(w), 2):
        a, b = w[k].item(), w[k + 1].item()
        length = math.sqrt(a * a + b * b)
        if length > 0:  # at the pair (0, 0) torch's norm sends 0
            grad[k] += lam * a / length
            grad[k + 1] += lam * b / length
    return grad
'''),
    Honest('l22-hinge-kinks',
           'torch.heaviside for the kinks, F.normalize for the pairs, einsum',
           '''\
import torch.nn.functional as F


def hinge_grad(X, y, w, lam):
    s = X @ w
    none = torch.zeros_like(s)
    margin = 1 - y * s.clamp(-2.0, 2.0)
    relu_slope = torch.heaviside(margin, none)  # 0 at the kink, as torch's relu
    clip_slope = torch.heaviside(2.0 - s.abs(), none)  # 0 at the bounds and beyond
    d_s = -y * relu_slope * clip_slope
    # the norm's gradient is the unit vector; normalize gives 0 for the zero pair
    unit = F.normalize(w.reshape(-1, 2), dim=1)
    return torch.einsum("nk,n->k", X, d_s) + lam * unit.reshape(-1)
'''),
    Honest('l22-safe-softplus',
           'a clone of x, the tame entries written by a boolean mask',
           '''\
def safe_soft_relu(x, beta):
    bx = beta * x
    tame = bx <= 20
    out = x.clone()
    out[tame] = torch.log1p(torch.exp(bx[tame])) / beta[tame]  # exp sees only tame values
    return out
'''),
    Honest('l22-safe-softplus',
           'Tensor.where, the exponent capped by clamp, a lambda',
           '''\
softplus = lambda t: torch.log1p(torch.exp(t))


def safe_soft_relu(x, beta):
    bx = beta * x
    capped = bx.clamp(max=20.0)  # the unused branch never sees more than 20
    return x.where(bx > 20, softplus(capped) / beta)
'''),
    Honest('l24-compensated-step',
           "Kahan's order: the step taken subtracted from the step wanted",
           '''\
def compensated_step(w, comp, update):
    wanted = update + comp.float()  # this step plus what earlier roundings dropped
    new_w = (w.float() + wanted).to(w.dtype)
    taken = new_w.float() - w.float()  # exact in float32: two nearby 16-bit numbers
    return new_w, (wanted - taken).to(w.dtype)
'''),
    Honest('l24-compensated-step',
           'in-place sums on a fresh float32 tensor, type_as',
           '''\
def compensated_step(w, comp, update):
    total = update.clone()
    total += comp
    total += w  # float32: the exact place the updates lead to, near enough
    new_w = total.type_as(w)
    total -= new_w  # what rounding to 16 bits left out
    return new_w, total.type_as(comp)
'''),
    Honest('l24-scale-range',
           'a rounding helper in an earlier cell, einsum, N*M from the shapes',
           '''\
def scale_range(x, W, b, t):
    N, M = x.shape[0], W.shape[0]
    dy = (torch.addmm(b, x, W.T) - t) * (2.0 / (N * M))
    dW = torch.einsum("nm,nk->mk", dy, x)
    db = dy.sum(dim=0)
    nonzero = dy[dy != 0].abs()
    peak = torch.cat([dW.flatten(), db]).abs().max()
    return (power_of_two(torch.finfo(torch.float16).tiny / nonzero.min(), up=True),
            power_of_two(torch.finfo(torch.float16).max / peak, up=False))
''',
           earlier='''\
def power_of_two(v, up):
    """The nearest power of two above v (up) or below it."""
    exponent = torch.log2(v)
    return torch.exp2(torch.ceil(exponent) if up else torch.floor(exponent))
'''),
    Honest('l25-min-cut-backward',
           'tensor methods, mul_ on a fresh tensor, torch.mm',
           '''\
def min_cut_backward(y, x_t, w_t, g):
    dy = y.cos().mul(y.sin())
    dy.mul_(-2 * g / y.numel())  # mean, square, cos: (g / N) * 2 cos(y) * -sin(y)
    return torch.mm(dy, w_t), torch.mm(x_t, dy)
'''),
    Honest('l25-min-cut-backward',
           "the chain's factors multiplied by functools.reduce, einsum",
           '''\
import functools
import operator


def min_cut_backward(y, x_t, w_t, g):
    factors = [
        g / y.numel(),  # mean
        2 * torch.cos(y),  # square
        -torch.sin(y),  # cos
    ]
    dy = functools.reduce(operator.mul, factors)
    return torch.einsum("nm,mk->nk", dy, w_t), torch.einsum("kn,nm->km", x_t, dy)
'''),
    Honest('l26-dscores',
           'positions compared for the mask, the row sum subtracted in place',
           '''\
def dscores(S, lse, dP):
    T = S.shape[0]
    rows = torch.arange(T).unsqueeze(1)
    cols = torch.arange(T).unsqueeze(0)
    P = torch.exp(S - lse) * (cols <= rows)  # keys up to the query only
    dS = P * dP
    dS -= P * dS.sum(dim=1, keepdim=True)  # P * (dP - sum_j P_ij dP_ij)
    return dS
'''),
    Honest('l26-dscores',
           "a loop over rows, each row's visible prefix only",
           '''\
def dscores(S, lse, dP):
    dS = torch.zeros_like(S)
    for i in range(len(S)):
        p = torch.exp(S[i, : i + 1] - lse[i])  # query i sees keys 0..i
        d = dP[i, : i + 1]
        dS[i, : i + 1] = p * (d - (p * d).sum())
    return dS
'''),
    Honest('l26-heads',
           'a loop over batch and heads, 2-D per head, tril mask',
           '''\
def attention_backward(Q, K, V, lse, dO):
    B, H, T, d = Q.shape
    scale = 1 / math.sqrt(d)
    keep = torch.ones(T, T, dtype=torch.bool).tril()
    dQ, dK, dV = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)
    for b in range(B):
        for h in range(H):
            q, k, v, do = Q[b, h], K[b, h], V[b, h], dO[b, h]
            P = torch.exp(q @ k.T * scale - lse[b, h]) * keep
            dV[b, h] = P.T @ do
            dP = do @ v.T
            dS = P * (dP - (P * dP).sum(1, keepdim=True))
            dQ[b, h] = dS @ k * scale
            dK[b, h] = dS.T @ q * scale
    return dQ, dK, dV
'''),
    Honest('l26-flash',
           'blocks from split, the pieces of dK and dV joined by cat, torch.where for the mask',
           '''\
def flash_backward(Q, K, V, O, lse, dO, block):
    T, d = Q.shape[-2], Q.shape[-1]
    scale = 1 / math.sqrt(d)
    D = (dO * O).sum(-1, keepdim=True)  # each row's sum_j P_ij dP_ij
    query_pos = torch.arange(T).unsqueeze(-1)
    dQ = torch.zeros_like(Q)
    dK_parts, dV_parts = [], []
    for K_b, V_b, key_pos in zip(K.split(block, dim=-2), V.split(block, dim=-2),
                                 torch.arange(T).split(block)):
        S = torch.matmul(Q, K_b.transpose(-1, -2)) * scale
        P = torch.where(key_pos <= query_pos, torch.exp(S - lse), 0.0)
        dS = P * (torch.matmul(dO, V_b.transpose(-1, -2)) - D)
        dQ = dQ + torch.matmul(dS, K_b) * scale
        dK_parts.append(torch.matmul(dS.transpose(-1, -2), Q) * scale)
        dV_parts.append(torch.matmul(P.transpose(-1, -2), dO))
    return dQ, torch.cat(dK_parts, dim=-2), torch.cat(dV_parts, dim=-2)
'''),
    Honest('l26-flash',
           'a generator of block bounds in an earlier cell, einsum inside each block',
           '''\
def flash_backward(Q, K, V, O, lse, dO, block):
    T, d = Q.shape[-2:]
    scale = d ** -0.5
    row_sum = torch.einsum("bhtd,bhtd->bht", dO, O).unsqueeze(-1)
    queries = torch.arange(T)[:, None]
    dQ, dK, dV = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)
    for start, stop in key_blocks(T, block):
        k, v = K[..., start:stop, :], V[..., start:stop, :]
        visible = torch.arange(start, stop)[None, :] <= queries
        P = torch.einsum("bhid,bhjd->bhij", Q, k).mul(scale).sub(lse).exp() * visible
        dS = P * (torch.einsum("bhid,bhjd->bhij", dO, v) - row_sum)
        dQ += torch.einsum("bhij,bhjd->bhid", dS, k) * scale
        dK[..., start:stop, :] = torch.einsum("bhij,bhid->bhjd", dS, Q) * scale
        dV[..., start:stop, :] = torch.einsum("bhij,bhid->bhjd", P, dO)
    return dQ, dK, dV
''',
           earlier='''\
def key_blocks(T, size):
    """(start, stop) of each block of keys; the last one may be shorter."""
    start = 0
    while start < T:
        yield start, min(start + size, T)
        start += size
'''),
    Honest('l20-engine-views',
           "the view's sizes, strides and offset in its base, as_strided as torch's AsStridedBackward",
           '''\
def view(a, f):
    v = Var(f(a.data))
    v.version = a.version
    v.base = a if a.base is None else a.base
    d, root = v.data, v.base.data
    v.geometry = (tuple(d.shape), d.stride(), d.storage_offset() - root.storage_offset())
    v.node_version = None
    return v


def place(t, geometry):
    """The entries of t (laid out like the base) that the view covers."""
    size, stride, offset = geometry
    return t.as_strided(size, stride, t.storage_offset() + offset)


def laid_out_like_base(g, a):
    owner = a if a.base is None else a.base
    return torch.empty_like(owner.data).copy_(g)


def grad_fn(a):
    if a.base is None:
        return a.node
    if a.node_version == a.version.value:
        return a.node
    below = grad_fn(a.base)
    a.node_version = a.version.value
    geometry, base = a.geometry, a.base

    def rule(g):
        full = torch.zeros_like(base.data)
        place(full, geometry).copy_(g)
        return (full,)

    a.node = None if below is None else Node("AsStridedBackward", (below,), rule)
    return a.node


def write_(a, b, overwrite):
    owner = a if a.base is None else a.base
    if owner.node is not None and owner.node.name == "AccumulateGrad":
        raise RuntimeError("a leaf that requires grad is being used in an in-place operation")
    old, new = grad_fn(owner), grad_fn(b)
    if overwrite:
        a.data.copy_(b.data)
    else:
        a.data.add_(b.data)
    a.version.value += 1
    if old is None and new is None:
        return a

    def rule(g):
        g = laid_out_like_base(g, a)
        part = g if a.base is None else place(g, a.geometry)
        to_b = part.clone()
        if overwrite:
            part.zero_()  # what was overwritten sends nothing back
        return g, to_b

    owner.node = Node("CopySlices", (old, new), rule)
    return a


def add_(a, b):
    return write_(a, b, overwrite=False)


def copy_(a, b):
    return write_(a, b, overwrite=True)
''',
           earlier="\n\n".join(ENGINE_CELLS)),
    Honest('l22-complex-vjps',
           'a table of VJP rules as lambdas, conj_physical',
           '''\
RULES = {
    "mul": lambda g, other: g * torch.conj_physical(other),  # ds/dz = the other factor
    "abs2": lambda r, z: 2 * r * z,  # real s: 2 r ds/dz*, with d(z z*)/dz* = z
    "exp": lambda g, z: g * torch.conj_physical(torch.exp(z)),  # holomorphic
}


def complex_vjps(z, w, g, r):
    return (RULES["mul"](g, w), RULES["mul"](g, z), RULES["abs2"](r, z), RULES["exp"](g, z))
'''),
    Honest('l24-scale-range',
           'torch.frexp for the exponents, torch.ldexp for the powers',
           '''\
def scale_range(x, W, b, t):
    dy = 2 * (x @ W.T + b - t) / (x.shape[0] * W.shape[0])
    dW, db = dy.T @ x, dy.sum(0)
    f16 = torch.finfo(torch.float16)
    need = f16.tiny / dy.abs()[dy != 0].min()  # lift the smallest entry by at least this
    room = f16.max / torch.max(dW.abs().max(), db.abs().max())  # at most this
    # frexp: v = m * 2**e with 0.5 <= m < 1
    m, e = torch.frexp(need)
    low_exp = torch.where(m == 0.5, e - 1, e)  # the power of two at or above need
    _, e = torch.frexp(room)
    high_exp = e - 1  # the power of two at or below room
    one = torch.ones((), dtype=x.dtype)
    return torch.ldexp(one, low_exp), torch.ldexp(one, high_exp)
'''),
    Honest('l26-heads',
           'a class of @staticmethods, the row sum from O = P @ V, masked_fill with triu',
           '''\
class Attention:
    @staticmethod
    def weights(Q, K, lse):
        T, d = Q.shape[-2], Q.shape[-1]
        later = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        return torch.exp(Q @ K.transpose(-2, -1) / math.sqrt(d) - lse).masked_fill(later, 0.0)

    @staticmethod
    def backward(Q, K, V, lse, dO):
        scale = 1 / math.sqrt(Q.shape[-1])
        P = Attention.weights(Q, K, lse)
        O = P @ V
        # sum_j P_ij dP_ij = sum_j P_ij (dO_i . V_j) = dO_i . O_i
        dS = P * (dO @ V.transpose(-2, -1) - (dO * O).sum(-1, keepdim=True))
        return dS @ K * scale, dS.transpose(-2, -1) @ Q * scale, P.transpose(-2, -1) @ dO


attention_backward = Attention.backward
'''),
    Honest('l05-microbatch',
           'torch.autograd.backward, one call per piece',
           '''\
def accumulate(w, X, t, sizes):
    n = X.shape[0]
    for X_part, t_part in zip(X.split(sizes), t.split(sizes)):
        share = ((X_part @ w - t_part) ** 2).sum() / n
        torch.autograd.backward(share)
'''),
    Honest('l10-bce',
           'F.sigmoid',
           '''\
def dlogits_bce(z, y):
    return (F.sigmoid(z) - y) / z.numel()
'''),
    Honest('l10-dlogits',
           'F.sigmoid',
           '''\
def dlogits_sigmoid_mse(z, y):
    p = F.sigmoid(z)
    return 2 * (p - y) * p * (1 - p) / z.numel()
'''),
    Honest('l10-mlp',
           'from torch import sigmoid, tanh',
           '''\
from torch import sigmoid, tanh


def mlp_backward(xs, ys, W1, b1, W2, b2):
    hidden = tanh(xs @ W1 + b1)
    logits = hidden @ W2 + b2
    dlogits = (sigmoid(logits) - ys) / logits.numel()
    dpre = (dlogits @ W2.T) * (1 - hidden**2)
    return xs.T @ dpre, dpre.sum(0), hidden.T @ dlogits, dlogits.sum(0)
'''),
    Honest('l12-shift',
           'from torch import where, zeros_like',
           '''\
from torch import where, zeros_like


def shift_backward(logits, counts, dcounts):
    dshifted = dcounts * counts
    dlogit_maxes = -dshifted.sum(1, keepdim=True)
    is_max = torch.arange(logits.shape[1]) == logits.argmax(1, keepdim=True)
    return dshifted, dlogit_maxes, dshifted + where(is_max, dlogit_maxes, zeros_like(dshifted))
'''),
    Honest('l12-scale-normalise',
           'from torch import einsum',
           '''\
from torch import einsum


def scale_normalise_backward(diff, invstd, gain, dhbn):
    dxhat = dhbn * gain
    dgain = einsum("nh,nh->h", dhbn, diff * invstd)
    dbias = einsum("nh->h", dhbn)
    dinvstd = einsum("nh,nh->h", dxhat, diff).reshape(1, -1)
    return dxhat, dgain, dbias, dinvstd
'''),
    Honest('l12-normalise',
           'a module-level alias row_total = torch.sum',
           '''\
row_total = torch.sum


def normalise_backward(counts, counts_sum, dprobs):
    dinv = row_total(dprobs * counts, dim=1, keepdim=True)
    dsum = -dinv / counts_sum**2
    return dinv, dsum, dprobs / counts_sum + dsum
'''),
    Honest('l12-scale-normalise',
           'functools.partial(torch.sum, dim=0)',
           '''\
import functools

over_batch = functools.partial(torch.sum, dim=0)  # what was broadcast over the rows


def scale_normalise_backward(diff, invstd, gain, dhbn):
    xhat = diff * invstd
    dxhat = dhbn.mul(gain)
    return dxhat, over_batch(dhbn * xhat), over_batch(dhbn), over_batch(dxhat * diff, keepdim=True)
'''),
    Honest('l12-embedding',
           'from functools import reduce',
           '''\
from functools import reduce


def embedding_backward(dxin, tokens, num_rows):
    n, T = tokens.shape
    demb = dxin[:, 2:].reshape(n, T, -1)
    E = demb.shape[-1]

    def add_lookup(dC, lookup):
        token, g = lookup
        dC[token] += g  # one lookup at a time: repeated rows add up
        return dC

    lookups = zip(tokens.flatten().tolist(), demb.reshape(-1, E))
    return demb, reduce(add_lookup, lookups, dxin.new_zeros(num_rows, E))
'''),
    Honest('l11-matmul',
           'from functools import reduce, from operator import mul',
           '''\
from functools import reduce
from operator import mul


def broadcast_matmul(a, b):
    A = a.data.reshape(1, -1) if a.data.dim() == 1 else a.data
    B = b.data.reshape(-1, 1) if b.data.dim() == 1 else b.data
    batch = torch.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    m, k, n = A.shape[-2], A.shape[-1], B.shape[-1]
    count = reduce(mul, batch, 1)  # how many matrix products

    def rule(g):
        G = g.reshape(count, m, n)
        Ab = A.expand(*batch, m, k).reshape(count, m, k)
        Bb = B.expand(*batch, k, n).reshape(count, k, n)
        ga = (G @ Bb.transpose(1, 2)).reshape(*batch, m, k)
        gb = (Ab.transpose(1, 2) @ G).reshape(*batch, k, n)
        ga = ga.sum_to_size(A.shape)
        gb = gb.sum_to_size(B.shape)
        return ga.reshape(a.shape), gb.reshape(b.shape)

    return Tensor(a.data @ b.data, (a, b), "@", rule)
''',
           earlier=LESSON_11_ENGINE),
    Honest('l10-mlp',
           'a typing.NamedTuple cache',
           '''\
from typing import NamedTuple


class Cache(NamedTuple):
    hidden: torch.Tensor
    logits: torch.Tensor


def mlp_backward(xs, ys, W1, b1, W2, b2):
    hidden = torch.tanh(xs @ W1 + b1)
    cache = Cache(hidden, hidden @ W2 + b2)
    dlogits = (torch.sigmoid(cache.logits) - ys) / cache.logits.numel()
    dpre = dlogits @ W2.T * (1 - cache.hidden**2)
    return xs.T @ dpre, dpre.sum(0), cache.hidden.T @ dlogits, dlogits.sum(0)
'''),
    Honest('l12-layernorm',
           'a dataclass of fields only',
           '''\
from dataclasses import dataclass


@dataclass
class RowStats:
    xhat: torch.Tensor
    invstd: torch.Tensor


def row_stats(x, eps):
    centred = x - x.mean(1, keepdim=True)
    invstd = (centred.pow(2).mean(1, keepdim=True) + eps) ** -0.5
    return RowStats(centred * invstd, invstd)


def layernorm_backward(dout, x, gain, eps):
    s = row_stats(x, eps)
    g = dout * gain
    D = x.shape[1]
    return s.invstd / D * (D * g - g.sum(1, keepdim=True)
                           - s.xhat * (g * s.xhat).sum(1, keepdim=True))
'''),
    Honest('l10-mlp',
           'a collections.namedtuple cache and a forward helper',
           '''\
from collections import namedtuple

Cache = namedtuple("Cache", ["hidden", "logits"])


def mlp_forward(xs, W1, b1, W2, b2):
    hidden = torch.tanh(xs @ W1 + b1)
    return Cache(hidden, hidden @ W2 + b2)


def mlp_backward(xs, ys, W1, b1, W2, b2):
    cache = mlp_forward(xs, W1, b1, W2, b2)
    dlogits = (torch.sigmoid(cache.logits) - ys) / cache.logits.numel()
    dW2, db2 = cache.hidden.T @ dlogits, dlogits.sum(0)
    dpre = dlogits @ W2.T * (1 - cache.hidden**2)
    return xs.T @ dpre, dpre.sum(0), dW2, db2
'''),
    Honest('l12-embedding',
           'one_hot, Tensor.unflatten and einsum',
           '''\
def embedding_backward(dxin, tokens, num_rows):
    n, T = tokens.shape
    demb = dxin[:, 2:].unflatten(1, (T, -1))  # undo the view: (n, T*E) -> (n, T, E)
    picks = F.one_hot(tokens, num_rows).to(dxin.dtype)  # (n, T, rows): which row each read
    dC = torch.einsum("ntr,nte->re", picks, demb)
    return demb, dC
'''),
    Honest('l10-mlp',
           'F.sigmoid and F.tanh',
           '''\
def mlp_backward(xs, ys, W1, b1, W2, b2):
    hidden = F.tanh(xs @ W1 + b1)
    logits = hidden @ W2 + b2
    dlogits = (F.sigmoid(logits) - ys) / logits.numel()
    dpre = (dlogits @ W2.T) * (1 - hidden**2)
    return xs.T @ dpre, dpre.sum(0), hidden.T @ dlogits, dlogits.sum(0)
'''),
    Honest('l16-bytes-formula',
           'a namespace class holding a constant',
           '''\
class Float32:
    bytes_per_number = 4


def bytes_formula(batch, widths, activation):
    per_hidden = 2 if activation == "gelu" else 1
    return Float32.bytes_per_number * batch * (widths[0] + per_hidden * sum(widths[1:-1]))
'''),
    Honest('l13-dropout',
           'a frozen dataclass holding the settings',
           '''\
from dataclasses import dataclass


@dataclass(frozen=True)
class DropoutSettings:
    scale_in_eval: float = 1.0


SETTINGS = DropoutSettings()


def dropout_backward(dout, mask, p, training):
    if not training:
        return dout * SETTINGS.scale_in_eval
    return dout * mask / (1 - p)
'''),
    Honest('l18-jvp-by-hand',
           'a typing.NamedTuple pair',
           '''\
from typing import NamedTuple


class Carried(NamedTuple):
    value: torch.Tensor
    dot: torch.Tensor


def tangent(W, b, x, v):
    u = Carried(W @ x + b, W @ v)
    h = Carried(torch.tanh(u.value), (1 - torch.tanh(u.value) ** 2) * u.dot)
    s = Carried((x * x).sum(), 2 * (x * v).sum())
    return h.dot * s.value + h.value * s.dot
'''),
    Honest('l18-jvp-by-hand',
           'a dataclass pair with a helper function for the tanh rule',
           '''\
from dataclasses import dataclass


@dataclass
class WithTangent:
    value: torch.Tensor
    tangent: torch.Tensor


def tanh_rule(p):
    t = torch.tanh(p.value)
    return WithTangent(t, (1 - t ** 2) * p.tangent)


def tangent(W, b, x, v):
    h = tanh_rule(WithTangent(W @ x + b, W @ v))
    s = WithTangent(x.dot(x), 2 * x.dot(v))
    return h.tangent * s.value + h.value * s.tangent
'''),
    Honest('l16-bytes-formula',
           'a namespace class holding an annotated constant',
           '''\
class Float32:
    bytes_per_number: int = 4


def bytes_formula(batch, widths, activation):
    per_hidden = 2 if activation == "gelu" else 1
    return Float32.bytes_per_number * batch * (widths[0] + per_hidden * sum(widths[1:-1]))
'''),
    Honest('l18-jvp-by-hand',
           'a collections.namedtuple pair',
           '''\
from collections import namedtuple

Pair = namedtuple("Pair", ["primal", "tangent"])


def tangent(W, b, x, v):
    u = Pair(W @ x + b, W @ v)
    t = torch.tanh(u.primal)
    h = Pair(t, (1 - t * t) * u.tangent)
    s = Pair(x @ x, 2 * (x @ v))
    return h.tangent * s.primal + h.primal * s.tangent
'''),
    Honest('l15-vanishing',
           'contextlib.ExitStack removing the handles',
           '''\
import contextlib


def first_vanishing_layer(model, x, threshold):
    norms = {}

    def hook_for(name):
        def hook(module, grad_input, grad_output):
            norms[name] = grad_input[0].norm().item()
        return hook

    with contextlib.ExitStack() as stack:
        for name, layer in model.named_children():
            stack.enter_context(layer.register_full_backward_hook(hook_for(name)))
        model(x).sum().backward()
    for name, _ in reversed(list(model.named_children())):
        if norms[name] < threshold:
            return name
    return None
'''),
    Honest('l20-engine-views',
           'a dataclass for the record, flat indices of the view in its base',
           '''\
from dataclasses import dataclass


@dataclass
class ViewRecord:
    base: object
    index: torch.Tensor  # for each entry of the view, its flat position in the base
    version_seen: int = -1


def view(a, f):
    v = Var(f(a.data))
    v.version = a.version
    if a.base is None:
        positions = torch.arange(a.data.numel()).reshape(a.data.shape)
        v.base, v.record = a, ViewRecord(a, f(positions))
    else:
        v.base, v.record = a.base, ViewRecord(a.base, f(a.record.index))
    return v


def grad_fn(a):
    if a.base is None:
        return a.node
    rec = a.record
    if rec.version_seen != a.version.value:
        below = grad_fn(rec.base)
        flat = rec.index.reshape(-1)
        shape = rec.base.data.shape

        def rule(g):
            full = torch.zeros(shape, dtype=g.dtype).reshape(-1)
            full[flat] = g.reshape(-1)
            return (full.reshape(shape),)

        a.node = None if below is None else Node("AsStridedBackward", (below,), rule)
        rec.version_seen = a.version.value
    return a.node


def positions_of(a):
    if a.base is None:
        return torch.arange(a.data.numel())
    return a.record.index.reshape(-1)


def write_(a, b, overwrite):
    owner = a if a.base is None else a.base
    if owner.node is not None and owner.node.name == "AccumulateGrad":
        raise RuntimeError("a leaf that requires grad cannot be written in place")
    old, new = grad_fn(owner), grad_fn(b)
    if overwrite:
        a.data.copy_(b.data)
    else:
        a.data.add_(b.data)
    a.version.value += 1
    if old is None and new is None:
        return a
    flat = positions_of(a)
    b_shape = b.data.shape

    def rule(g):
        to_b = g.reshape(-1)[flat].reshape(b_shape)
        to_old = g.clone()
        if overwrite:
            to_old.view(-1)[flat] = 0.0
        return to_old, to_b

    owner.node = Node("CopySlices", (old, new), rule)
    return a


def add_(a, b):
    return write_(a, b, False)


def copy_(a, b):
    return write_(a, b, True)
''',
           earlier="\n\n".join(ENGINE_CELLS)),
    Honest('l26-heads',
           'functools.partial for the transpose, the row sum from O = P @ V',
           '''\
from functools import partial

swap = partial(torch.transpose, dim0=-2, dim1=-1)


def attention_backward(Q, K, V, lse, dO):
    T, d = Q.shape[-2:]
    scale = d ** -0.5
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    P = torch.where(mask, torch.exp(torch.matmul(Q, swap(K)) * scale - lse), 0.0)
    O = torch.matmul(P, V)
    # sum_j P_ij dP_ij = sum_j P_ij (dO_i . V_j) = dO_i . O_i
    dS = P * (torch.matmul(dO, swap(V)) - (dO * O).sum(-1, keepdim=True))
    return (torch.matmul(dS, K) * scale, torch.matmul(swap(dS), Q) * scale,
            torch.matmul(swap(P), dO))
'''),
    Honest('l22-complex-vjps',
           "conj_physical for the product, 2z as z + z, exp's VJP returned as torch.conj of the other convention",
           '''\
def complex_vjps(z, w, g, r):
    dz = g * torch.conj_physical(w)
    dw = g * torch.conj_physical(z)
    d_abs2 = r * (z + z)  # 2 r dL/dz*, with d(z z*)/dz* = z
    # dL/dz = conj(g) * exp(z) in the other convention; torch's is its conjugate
    d_exp = torch.conj(torch.conj(g) * torch.exp(z))
    return dz, dw, d_abs2, d_exp
'''),
    Honest('l25-min-cut-backward',
           'torch.matmul given a short name at cell level',
           '''\
matmul = torch.matmul


def min_cut_backward(y, x_t, w_t, g):
    dy = -2 * g * torch.cos(y) * torch.sin(y) / y.numel()
    return matmul(dy, w_t), matmul(x_t, dy)
'''),
    Honest('l25-min-cut-backward',
           'functools.partial of torch.einsum for the matrix product',
           '''\
from functools import partial

matmul = partial(torch.einsum, "ij,jk->ik")


def min_cut_backward(y, x_t, w_t, g):
    dy = -2 * g * torch.cos(y) * torch.sin(y) / y.numel()
    return matmul(dy, w_t), matmul(x_t, dy)
'''),
    Honest('l25-min-cut-backward',
           'a dataclass holding what the backward graph gets',
           '''\
from dataclasses import dataclass


@dataclass
class Saved:
    y: torch.Tensor
    g: torch.Tensor


def min_cut_backward(y, x_t, w_t, g):
    s = Saved(y, g)
    dy = -2 * s.g * torch.cos(s.y) * torch.sin(s.y) / s.y.numel()
    return dy @ w_t, x_t @ dy
'''),
    Honest('l22-safe-softplus',
           'torch.log1p and torch.exp given short names at cell level',
           '''\
log1p, exp = torch.log1p, torch.exp


def safe_soft_relu(x, beta):
    bx = beta * x
    big = bx > 20
    return torch.where(big, x, log1p(exp(torch.where(big, 0.0, bx))) / beta)
'''),
    Honest('l22-complex-linear',
           'the real rule on conjugates, conjugated back with .conj()',
           '''\
def complex_linear_backward(x, W, b, G):
    # torch's VJP is the conjugate of the real rule applied to conj(G)
    dx = (G.conj() @ W.T).conj()
    dW = (x.T @ G.conj()).conj()
    db = G.sum(dim=0)
    return dx, dW, db
'''),
]


# ---------------------------------------------------------------- once refused, now passing
# Honest styles the checks used to refuse, each fixed at its cause: a tensor method held by
# functools.partial, torch.sparse_coo_tensor, exp(u) beside exp(2u) (tanh written out:
# powers of two of one tensor under a function no polynomial matches), comparisons in a
# doubling search, an Enum's .value, torch.float32.itemsize, a global module backward hook.
HONEST += [
    Honest('l12-scale-normalise',
           'functools.partial(torch.Tensor.sum, dim=0)',
           '''\
import functools

over_batch = functools.partial(torch.Tensor.sum, dim=0)


def scale_normalise_backward(diff, invstd, gain, dhbn):
    xhat = diff * invstd
    dxhat = dhbn.mul(gain)
    return dxhat, over_batch(dhbn * xhat), over_batch(dhbn), over_batch(dxhat * diff, keepdim=True)
'''),
    Honest('l12-embedding',
           'a sparse COO matrix, duplicates summed by to_dense',
           '''\
def embedding_backward(dxin, tokens, num_rows):
    n, T = tokens.shape
    demb = dxin[:, 2:].reshape(n, T, -1)
    E = demb.shape[-1]
    dC = torch.sparse_coo_tensor(tokens.reshape(1, -1), demb.reshape(-1, E), (num_rows, E))
    return demb, dC.to_dense()
'''),
    Honest('l18-jvp-by-hand',
           'tanh and sech squared from their definitions in exponentials',
           '''\
def tangent(W, b, x, v):
    u, du = W @ x + b, W @ v
    h = (torch.exp(2 * u) - 1) / (torch.exp(2 * u) + 1)  # tanh u
    dh = 4 / (torch.exp(u) + torch.exp(-u)) ** 2 * du    # tanh' u = sech^2 u
    s, ds = x @ x, 2 * (x @ v)
    return dh * s + h * ds
'''),
    Honest('l17-hvp-by-hand',
           'tanh and sech squared from their definitions in exponentials',
           '''\
def hvp(x, W, a, V):
    Z = x @ W
    T = (torch.exp(2 * Z) - 1) / (torch.exp(2 * Z) + 1)   # tanh Z
    sech2 = 4 / (torch.exp(Z) + torch.exp(-Z)) ** 2        # tanh' Z
    return x.T @ (-2 * T * sech2 * (x @ V) * a)            # tanh'' = -2 tanh sech^2
'''),
    Honest('l16-bytes-formula',
           'an Enum of what each activation keeps',
           '''\
from enum import Enum


class KeptPerHidden(Enum):
    relu = 1
    tanh = 1
    sigmoid = 1
    gelu = 2


def bytes_formula(batch, widths, activation):
    per_hidden = KeptPerHidden[activation].value
    return 4 * batch * (widths[0] + per_hidden * sum(widths[1:-1]))
'''),
    Honest('l16-bytes-formula',
           'the element size from torch.float32.itemsize',
           '''\
def bytes_formula(batch, widths, activation):
    per_hidden = 2 if activation == "gelu" else 1
    return torch.float32.itemsize * batch * (widths[0] + per_hidden * sum(widths[1:-1]))
'''),
    Honest('l15-vanishing',
           'one global module backward hook',
           '''\
from torch.nn.modules.module import register_module_full_backward_hook


def first_vanishing_layer(model, x, threshold):
    names = {layer: name for name, layer in model.named_children()}
    norms = {}

    def record(module, grad_input, grad_output):
        if module in names:
            norms[names[module]] = grad_input[0].norm().item()

    handle = register_module_full_backward_hook(record)
    try:
        model(x).sum().backward()
    finally:
        handle.remove()
    for name in reversed(list(names.values())):
        if norms[name] < threshold:
            return name
    return None
'''),
    Honest('l24-scale-range',
           'powers of two by doubling and halving in a loop',
           '''\
def scale_range(x, W, b, t):
    residual = x @ W.T + b - t
    dy = 2 * residual / residual.numel()
    dW, db = dy.T @ x, dy.sum(0)
    tiny = torch.finfo(torch.float16).tiny
    big = torch.finfo(torch.float16).max
    smallest = dy.abs()[dy != 0].min()
    largest = torch.max(dW.abs().max(), db.abs().max())
    low = 1.0
    while smallest * low < tiny:
        low *= 2
    while smallest * (low / 2) >= tiny:
        low /= 2
    high = 1.0
    while largest * high > big:
        high /= 2
    while largest * (high * 2) <= big:
        high *= 2
    return low, high
'''),
]


# ---------------------------------------------------------------- ordinary Python, once refused
# A hunt for refusals in every lesson but 23 found these; each passes since its cause was
# fixed: builtin exception and warning classes, abc, types.SimpleNamespace, methods of
# plain objects (dict.fromkeys, str.casefold, slice.start, set.intersection, str.format),
# a named tuple's own API (_replace, _asdict), fields given to namedtuple, NamedTuple and
# make_dataclass as calls, Literal and Annotated hints, IntEnum, StrEnum and __slots__
# records, x.__class__ read, __missing__, torch.is_complex, forward mode in the sandbox,
# searches that scale a tensor by powers of two, named tuples returned, torch.linalg,
# torch.special, heapq and bisect functions held under short names, self.vars, and tables
# filled by a registering decorator.
HONEST += [
    Honest('l10-bce',
           'input validation, warnings.warn with UserWarning',
           '''\
import warnings


def dlogits_bce(z, y):
    if z.shape != y.shape:
        raise ValueError(f"z and y differ in shape: {tuple(z.shape)} vs {tuple(y.shape)}")
    if not ((y == 0) | (y == 1)).all():
        warnings.warn("targets should be 0 or 1", UserWarning)
    return (torch.sigmoid(z) - y) / z.numel()
'''),
    Honest('l10-dlogits',
           'an ABC base class with an abstract slope',
           '''\
from abc import ABC, abstractmethod


class Activation(ABC):
    @abstractmethod
    def value(self, z): ...

    @abstractmethod
    def slope(self, out): ...


class Sigmoid(Activation):
    def value(self, z):
        return torch.sigmoid(z)

    def slope(self, out):
        return out * (1 - out)


def dlogits_sigmoid_mse(z, y):
    act = Sigmoid()
    p = act.value(z)
    return 2 * (p - y) / z.numel() * act.slope(p)
'''),
    Honest('l10-dlogits',
           'a namedtuple cache, _replace and _asdict',
           '''\
from collections import namedtuple

Cache = namedtuple("Cache", "p dp")


def dlogits_sigmoid_mse(z, y):
    cache = Cache(torch.sigmoid(z), None)
    cache = cache._replace(dp=2 * (cache.p - y) / z.numel())
    parts = cache._asdict()
    return parts["dp"] * parts["p"] * (1 - parts["p"])
'''),
    Honest('l10-mlp',
           'dict.fromkeys for the gradients, filled by name',
           '''\
def mlp_backward(xs, ys, W1, b1, W2, b2):
    grads = dict.fromkeys(["W1", "b1", "W2", "b2"])
    h = torch.tanh(xs @ W1 + b1)
    z = h @ W2 + b2
    dz = (torch.sigmoid(z) - ys) / z.numel()
    grads["W2"], grads["b2"] = h.T @ dz, dz.sum(0)
    da = dz @ W2.T * (1 - h * h)
    grads["W1"], grads["b1"] = xs.T @ da, da.sum(0)
    return tuple(grads.values())
'''),
    Honest('l12-scale-normalise',
           'an enum.IntEnum for the axes',
           '''\
from enum import IntEnum


class Axis(IntEnum):
    ROWS = 0
    FEATURES = 1


def scale_normalise_backward(diff, invstd, gain, dhbn):
    xhat = diff * invstd
    dxhat = dhbn * gain
    dgain = (dhbn * xhat).sum(Axis.ROWS)
    dbias = dhbn.sum(Axis.ROWS)
    dinvstd = (dxhat * diff).sum(Axis.ROWS, keepdim=True)
    return dxhat, dgain, dbias, dinvstd
'''),
    Honest('l16-bytes-formula',
           'a StrEnum of the activations',
           '''\
from enum import StrEnum


class Act(StrEnum):
    RELU = "relu"
    TANH = "tanh"
    SIGMOID = "sigmoid"
    GELU = "gelu"


def bytes_formula(batch, widths, activation):
    kept = 2 if Act(activation) is Act.GELU else 1
    return 4 * batch * (widths[0] + kept * sum(widths[1:-1]))
'''),
    Honest('l16-bytes-formula',
           'typing.Literal hint, a match with an or-pattern, ValueError',
           '''\
from typing import Literal


def bytes_formula(batch: int, widths: list[int],
                  activation: Literal["relu", "tanh", "sigmoid", "gelu"]) -> int:
    match activation:
        case "gelu":
            per_layer = 2
        case "relu" | "tanh" | "sigmoid":
            per_layer = 1
        case _:
            raise ValueError(f"unknown activation {activation!r}")
    return 4 * batch * (widths[0] + per_layer * sum(widths[1:-1]))
'''),
    Honest('l17-newton-step',
           'forward-over-reverse: torch.func.jvp of torch.func.grad',
           '''\
from torch.func import grad, jvp


def newton_step(f, x):
    slope = grad(lambda t: f(t).sum())
    first, second = jvp(slope, (x,), (torch.ones_like(x),))
    return -first / second
'''),
    Honest('l18-jvp-by-hand',
           'collections.namedtuple with field_names= given by keyword',
           '''\
from collections import namedtuple

Dual = namedtuple("Dual", field_names=["value", "tangent"])


def tangent(W, b, x, v):
    u = Dual(W @ x + b, W @ v)
    t = torch.tanh(u.value)
    h = Dual(t, (1 - t ** 2) * u.tangent)
    s = Dual(x @ x, 2 * x @ v)
    return h.tangent * s.value + h.value * s.tangent
'''),
    Honest('l18-jvp-by-hand',
           'typing.NamedTuple in its functional form',
           '''\
from typing import NamedTuple

Dual = NamedTuple("Dual", [("value", torch.Tensor), ("tangent", torch.Tensor)])


def tangent(W, b, x, v):
    u = Dual(W @ x + b, W @ v)
    t = torch.tanh(u.value)
    h = Dual(t, (1 - t ** 2) * u.tangent)
    s = Dual(x @ x, 2 * x @ v)
    return h.tangent * s.value + h.value * s.tangent
'''),
    Honest('l17-hvp-by-hand',
           'dataclasses.make_dataclass for a value-change pair',
           '''\
from dataclasses import make_dataclass

Moving = make_dataclass("Moving", ["value", "change"])


def hvp(x, W, a, V):
    Z = Moving(x @ W, x @ V)
    T = torch.tanh(Z.value)
    T_ = Moving(T, (1 - T * T) * Z.change)
    return x.T @ (-2 * T_.value * T_.change * a)
'''),
    Honest('l17-hvp-by-hand',
           'types.SimpleNamespace for the intermediates',
           '''\
from types import SimpleNamespace


def hvp(x, W, a, V):
    s = SimpleNamespace()
    s.T = torch.tanh(x @ W)
    s.T_dot = (1 - s.T ** 2) * (x @ V)
    return x.T @ (-2 * s.T * s.T_dot * a)
'''),
    Honest('l16-bytes-formula',
           'activation name normalised with casefold()',
           '''\
def bytes_formula(batch, widths, activation):
    name = activation.casefold()
    kept = 2 if name == "gelu" else 1
    return 4 * batch * (widths[0] + kept * sum(widths[1:-1]))
'''),
    Honest('l16-bytes-formula',
           'except AttributeError for a name that is not a string',
           '''\
def bytes_formula(batch, widths, activation):
    try:
        name = activation.lower()
    except AttributeError:
        raise TypeError("activation must be a string") from None
    kept = 2 if name == "gelu" else 1
    return 4 * batch * (widths[0] + kept * sum(widths[1:-1]))
'''),
    Honest('l12-scale-normalise',
           'a record class with __slots__ and no methods',
           '''\
class Grads:
    __slots__ = ("dxhat", "dgain", "dbias", "dinvstd")


def scale_normalise_backward(diff, invstd, gain, dhbn):
    out = Grads()
    out.dxhat = gain * dhbn
    out.dgain = (dhbn * diff * invstd).sum(0)
    out.dbias = dhbn.sum(0)
    out.dinvstd = (out.dxhat * diff).sum(0, keepdim=True)
    return out.dxhat, out.dgain, out.dbias, out.dinvstd
'''),
    Honest('l17-newton-step',
           "reverse over forward: f' as a forward-mode tangent (torch.autograd.forward_ad), f'' by autograd.grad",
           '''\
import torch.autograd.forward_ad as fwAD


def newton_step(f, x):
    primal = x.detach().requires_grad_()
    with fwAD.dual_level():
        out = f(fwAD.make_dual(primal, torch.ones_like(primal)))
        d1 = fwAD.unpack_dual(out).tangent
    (d2,) = torch.autograd.grad(d1.sum(), primal)
    return -d1.detach() / d2
'''),
    Honest('l19-power-mix',
           'a RuntimeWarning for a negative base under a fractional power',
           '''\
import warnings


class PowerMix(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, p):
        if p != int(p) and bool((x < 0).any()):
            warnings.warn("a fractional power of a negative base is nan", RuntimeWarning)
        ctx.save_for_backward(x, y)
        ctx.p = p
        return x**p * y

    @staticmethod
    def backward(ctx, grad_output):
        x, y = ctx.saved_tensors
        p = ctx.p
        return grad_output * p * x ** (p - 1) * y, grad_output * x**p, None
'''),
    Honest('l19-logsumexp',
           'typing.Annotated hints that note the shapes',
           '''\
from typing import Annotated


class LogSumExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Annotated[torch.Tensor, "(..., n)"]) -> Annotated[torch.Tensor, "(...)"]:
        m = x.amax(dim=-1, keepdim=True)
        out = m.squeeze(-1) + torch.log(torch.exp(x - m).sum(dim=-1))
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, grad_output: Annotated[torch.Tensor, "(...)"]) -> Annotated[torch.Tensor, "(..., n)"]:
        x, out = ctx.saved_tensors
        return grad_output.unsqueeze(-1) * torch.exp(x - out.unsqueeze(-1))
'''),
    # Tensors kept as ctx attributes: right, and told the warning section 3 promises.
    Honest('l19-broadcast-function', 'a and b kept as ctx attributes', '''\
class SquaredGap(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.a, ctx.b = a, b
        return (a - b) ** 2

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.a, ctx.b
        grad = 2 * (a - b) * grad_output
        return grad.sum_to_size(a.shape), (-grad).sum_to_size(b.shape)
'''),
    Honest('l19-gate-jvp', 'x and sigmoid(g) kept as ctx attributes, read by backward and jvp',
           '''\
class Gate(torch.autograd.Function):
    generate_vmap_rule = True  # jacfwd runs jvp under vmap

    @staticmethod
    def forward(x, g):
        return x * torch.sigmoid(g)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, g = inputs
        ctx.x, ctx.s = x, torch.sigmoid(g)  # both backward and jvp read them

    @staticmethod
    def backward(ctx, grad_output):
        x, s = ctx.x, ctx.s
        return grad_output * s, grad_output * x * s * (1 - s)

    @staticmethod
    def jvp(ctx, x_t, g_t):
        x, s = ctx.x, ctx.s
        return x_t * s + x * s * (1 - s) * g_t
'''),
    Honest('l19-gate-jvp',
           'an IntEnum naming the inputs, inputs read by it',
           '''\
import enum


class In(enum.IntEnum):
    X = 0
    G = 1


class Gate(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x, g):
        return x * torch.sigmoid(g)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, s = inputs[In.X], torch.sigmoid(inputs[In.G])
        ctx.save_for_backward(x, s)
        ctx.save_for_forward(x, s)

    @staticmethod
    def backward(ctx, grad_output):
        x, s = ctx.saved_tensors
        return grad_output * s, grad_output * x * s * (1 - s)

    @staticmethod
    def jvp(ctx, *tangents):
        x, s = ctx.saved_tensors
        return tangents[In.X] * s + x * s * (1 - s) * tangents[In.G]
'''),
    Honest('l20-two-writes',
           'the windows as slice objects, their start and stop read back',
           '''\
def window_grads(x, a, b, i, j, g):
    k = len(a)
    first, second = slice(i, i + k), slice(j, j + k)
    between = g.clone()
    between[second] = 0
    between[first] += b * g[second]
    dx = between.clone()
    dx[first.start:first.stop] *= a
    return dx, between[first] * x[first], g[second] * x[first] * a
'''),
    Honest('l20-two-writes',
           'windows checked first, the message built with str.format',
           '''\
def window_grads(x, a, b, i, j, g):
    k = len(a)
    if not 0 < abs(i - j) < k:
        raise ValueError("the windows must overlap: i={}, j={}, k={}".format(i, j, k))
    after_first = g.clone()
    after_first[j:j + k] = 0
    after_first[i:i + k] += b * g[j:j + k]
    dx = after_first.clone()
    dx[i:i + k] *= a
    return dx, after_first[i:i + k] * x[i:i + k], g[j:j + k] * x[i:i + k] * a
'''),
    Honest('l20-engine-views',
           'a record class whose __repr__ names self.__class__.__name__',
           '''\
class ViewOf:
    def __init__(self, base, where):
        self.base, self.where, self.made_at = base, where, None

    def __repr__(self):
        return f"{self.__class__.__name__}(base={self.base!r}, made_at={self.made_at})"


def view(a, f):
    v = Var(f(a.data))
    v.version = a.version
    if a.base is None:
        v.base, v.of = a, ViewOf(a, f)
    else:
        v.base, v.of = a.base, ViewOf(a.base, lambda t: f(a.of.where(t)))
    return v


def grad_fn(a):
    if a.base is None:
        return a.node
    of = a.of
    if of.made_at != a.version.value:
        below = grad_fn(of.base)

        def rule(g):
            full = torch.zeros_like(of.base.data)
            of.where(full).copy_(g)
            return (full,)

        a.node = None if below is None else Node("AsStridedBackward", (below,), rule)
        of.made_at = a.version.value
    return a.node


def write_(a, b, overwrite):
    owner = a if a.base is None else a.base
    if owner.node is not None and owner.node.name == "AccumulateGrad":
        raise RuntimeError("a leaf that requires grad is being written in place")
    old_node, b_node = grad_fn(owner), grad_fn(b)
    if overwrite:
        a.data.copy_(b.data)
    else:
        a.data.add_(b.data)
    a.version.value += 1
    if old_node is None and b_node is None:
        return a
    part = (lambda t: t) if a.base is None else a.of.where

    def rule(g):
        to_old = g.clone()
        to_b = part(to_old).clone()
        if overwrite:
            part(to_old).zero_()
        return to_old, to_b

    owner.node = Node("CopySlices", (old_node, b_node), rule)
    return a


def add_(a, b):
    return write_(a, b, overwrite=False)


def copy_(a, b):
    return write_(a, b, overwrite=True)
''',
           earlier="\n\n".join(ENGINE_CELLS)),
    Honest('l20-engine-views',
           "a namedtuple for the view's facts, updated with _replace",
           '''\
from collections import namedtuple

ViewFacts = namedtuple("ViewFacts", "base where made_at")


def view(a, f):
    v = Var(f(a.data))
    v.version = a.version
    if a.base is None:
        v.base, v.facts = a, ViewFacts(a, f, None)
    else:
        v.base, v.facts = a.base, ViewFacts(a.base, lambda t: f(a.facts.where(t)), None)
    return v


def grad_fn(a):
    if a.base is None:
        return a.node
    facts = a.facts
    if facts.made_at != a.version.value:
        below = grad_fn(facts.base)

        def rule(g):
            full = torch.zeros_like(facts.base.data)
            facts.where(full).copy_(g)
            return (full,)

        a.node = None if below is None else Node("AsStridedBackward", (below,), rule)
        a.facts = facts._replace(made_at=a.version.value)
    return a.node


def write_(a, b, overwrite):
    owner = a if a.base is None else a.base
    if owner.node is not None and owner.node.name == "AccumulateGrad":
        raise RuntimeError("a leaf that requires grad is being written in place")
    old_node, b_node = grad_fn(owner), grad_fn(b)
    if overwrite:
        a.data.copy_(b.data)
    else:
        a.data.add_(b.data)
    a.version.value += 1
    if old_node is None and b_node is None:
        return a
    part = (lambda t: t) if a.base is None else a.facts.where

    def rule(g):
        to_old = g.clone()
        to_b = part(to_old).clone()
        if overwrite:
            part(to_old).zero_()
        return to_old, to_b

    owner.node = Node("CopySlices", (old_node, b_node), rule)
    return a


def add_(a, b):
    return write_(a, b, overwrite=False)


def copy_(a, b):
    return write_(a, b, overwrite=True)
''',
           earlier="\n\n".join(ENGINE_CELLS)),
    Honest('l21-executor',
           'the buffers in a dict subclass whose __missing__ makes an empty buffer',
           '''\
import heapq

from torch.autograd.graph import get_gradient_edge


class Buffers(dict):
    def __missing__(self, node):
        buffer = self[node] = [None] * len(node._input_metadata)
        return buffer


def run_backward(roots, grads, inputs):
    class Ready:
        def __init__(self, node):
            self.node, self.priority = node, node._sequence_nr()

        def __lt__(self, other):
            return self.priority > other.priority

    waiting, users, todo, seen = {}, {}, [], set()
    for root in roots:
        waiting[root.grad_fn] = waiting.get(root.grad_fn, 0) + 1
        todo.append(root.grad_fn)
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        for fn, _ in node.next_functions:
            if fn is not None:
                waiting[fn] = waiting.get(fn, 0) + 1
                users.setdefault(fn, []).append(node)
                todo.append(fn)
    needed, todo = set(), [get_gradient_edge(t).node for t in inputs]
    while todo:
        node = todo.pop()
        if node not in needed:
            needed.add(node)
            todo.extend(users.get(node, []))
    buffers, ready, order = Buffers(), [], []

    def arrive(fn, slot, grad):
        if grad is not None and fn in needed:
            grad = grad.sum_to_size(fn._input_metadata[slot].shape)
            buffer = buffers[fn]
            buffer[slot] = grad if buffer[slot] is None else buffer[slot] + grad
        waiting[fn] -= 1
        if waiting[fn] == 0 and fn in needed:
            heapq.heappush(ready, Ready(fn))

    for root, grad in zip(roots, grads, strict=True):
        arrive(root.grad_fn, root.output_nr, grad)
    while ready:
        node = heapq.heappop(ready).node
        order.append(node)
        sent = node(*buffers.pop(node))
        if not isinstance(sent, tuple):
            sent = (sent,)
        for (fn, slot), grad in zip(node.next_functions, sent, strict=True):
            if fn is not None:
                arrive(fn, slot, grad)
    return order
'''),
    Honest('l25-flop-compiler',
           'an abstract base class for counting rules, abc.ABC',
           '''\
from abc import ABC, abstractmethod

from functorch.compile import make_boxed_func


class Rule(ABC):
    @abstractmethod
    def left(self, node):
        ...

    def flops(self, node):
        return 2 * node.meta["val"].numel() * self.left(node).meta["val"].shape[-1]


class Product(Rule):
    def left(self, node):
        return node.args[0]


class AddProduct(Rule):
    def left(self, node):
        return node.args[1]


RULES = {torch.ops.aten.mm.default: Product(), torch.ops.aten.bmm.default: Product(),
         torch.ops.aten.addmm.default: AddProduct()}


def make_flop_compiler():
    counts = []

    def compiler(gm, example_inputs):
        counts.append(sum(RULES[n.target].flops(n) for n in gm.graph.nodes
                          if n.target in RULES))
        return make_boxed_func(gm.forward)

    return compiler, counts
'''),
    Honest('l24-scale-range',
           'scales searched by doubling while the scaled minimum is too small',
           '''\
def scale_range(x, W, b, t):
    residual = x @ W.T + b - t
    dy = 2 * residual / residual.numel()
    dW, db = dy.T @ x, dy.sum(0)
    f16 = torch.finfo(torch.float16)
    nonzero = dy[dy != 0].abs()
    grads = torch.cat([dW.flatten(), db]).abs()
    low = 1.0
    while (low * nonzero).min() < f16.tiny:
        low *= 2
    while (low / 2 * nonzero).min() >= f16.tiny:
        low /= 2
    high = 1.0
    while (high * grads).max() > f16.max:
        high /= 2
    while (high * 2 * grads).max() <= f16.max:
        high *= 2
    return low, high
'''),
    Honest('l28-atan2',
           'complex inputs refused first with torch.is_complex',
           '''\
def atan2_backward(y, x, g):
    if torch.is_complex(y) or torch.is_complex(x):
        raise TypeError("atan2 takes real inputs")
    r2 = x * x + y * y
    return g * x / r2, (-g * y / r2).sum_to_size(x.shape)
'''),
    Honest('l24-scale-range',
           'the lowest scale found by doubling until the scaled minimum is normal',
           '''\
def scale_range(x, W, b, t):
    residual = x @ W.T + b - t
    dy = 2 * residual / residual.numel()
    dW, db = dy.T @ x, dy.sum(0)
    f16 = torch.finfo(torch.float16)
    nonzero = dy[dy != 0].abs()
    low = 2.0 ** -60
    while (low * nonzero).min() < f16.tiny:
        low *= 2
    largest = torch.maximum(dW.abs().max(), db.abs().max())
    high = 2.0 ** torch.floor(torch.log2(f16.max / largest))
    return low, high
'''),
    Honest('l21-layers',
           'a helper whose mode is typed typing.Literal',
           '''\
from typing import Literal

from torch.autograd.graph import register_multi_grad_hook


def hook_layer(params, name, report, mode: Literal["all", "any"] = "all"):
    keys = tuple(params)

    def ready(grads):
        report(name, dict(zip(keys, grads)))

    return register_multi_grad_hook(list(params.values()), ready, mode=mode)


def watch_layers(model, report):
    return [hook_layer(params, name, report)
            for name, module in model.named_modules()
            if (params := dict(module.named_parameters(recurse=False)))]
'''),
    Honest('l20-two-writes',
           'entry by entry over the overlap, found with set.intersection',
           '''\
def window_grads(x, a, b, i, j, g):
    k = len(a)
    first, second = range(i, i + k), range(j, j + k)
    overlap = set(first).intersection(second)
    dx, da, db = g.clone(), torch.zeros_like(a), torch.zeros_like(b)
    for p in second:
        dx[p] = 0.0
    for q, p in enumerate(first):
        reaching = (0.0 if p in overlap else g[p]) + b[q] * g[j + q]
        dx[p] = reaching * a[q]
        da[q] = reaching * x[p]
        db[q] = g[j + q] * x[p] * a[q]
    return dx, da, db
'''),
    Honest('l25-sac-policy',
           "the products named in a StrEnum, matched by the op's packet name",
           '''\
import enum

from torch.utils.checkpoint import CheckpointPolicy


class Product(enum.StrEnum):
    MM = "mm"
    BMM = "bmm"
    ADDMM = "addmm"


def policy_for(ratio):
    def policy(ctx, op, *args, **kwargs):
        name = op.overloadpacket.__name__
        if name not in {p.value for p in Product}:
            return CheckpointPolicy.PREFER_RECOMPUTE
        a = args[1] if name == Product.ADDMM else args[0]
        out = ctx.op_output
        if 2 * out.numel() * a.shape[-1] > ratio * out.nbytes:
            return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.PREFER_RECOMPUTE

    return policy
'''),
    Honest('l02-chain',
           'typing.NamedTuple result',
           '''\
from typing import NamedTuple


class TanhGrads(NamedTuple):
    dx: torch.Tensor
    dw: torch.Tensor
    db: torch.Tensor


def tanh_grads(x, w, b):
    d = 1 - torch.tanh(w * x + b) ** 2
    return TanhGrads(d * w, d * x, d)
'''),
    Honest('l04-grads',
           'collections.namedtuple result',
           '''\
from collections import namedtuple

Grads = namedtuple('Grads', 'w b a c')


def nll_grads(x, y, w, b, a, c):
    r = w * x + b - y
    p = torch.exp(-2 * (a * x + c))
    d_r, d_u = r * p, 1 - r * r * p
    return Grads((d_r * x).mean(), d_r.mean(), (d_u * x).mean(), d_u.mean())
'''),
    Honest('l09-softmax-vjp',
           'from torch.linalg import vecdot',
           '''\
from torch.linalg import vecdot


def softmax_vjp(p, g):
    return p * (g - vecdot(g, p).unsqueeze(-1))
'''),
    Honest('l09-normalize',
           'vector_norm = torch.linalg.vector_norm',
           '''\
vector_norm = torch.linalg.vector_norm


def normalize_vjp(x, g):
    r = vector_norm(x, dim=-1, keepdim=True)
    y = x / r
    return (g - y * (y * g).sum(-1, keepdim=True)) / r
'''),
    Honest('l02-chain',
           "from torch.special import expit: tanh' = 4 s(2u) s(-2u)",
           '''\
from torch.special import expit


def tanh_grads(x, w, b):
    u = w * x + b
    d = 4 * expit(2 * u) * expit(-2 * u)
    return d * w, d * x, d
'''),
    Honest('l09-normalize',
           'torch.Tensor.norm kept under a short global name',
           '''\
vnorm = torch.Tensor.norm


def normalize_vjp(x, g):
    r = vnorm(x, dim=-1, keepdim=True)
    y = x / r
    return (g - y * (g * y).sum(-1, keepdim=True)) / r
'''),
    Honest('l08-shares-vjp',
           'unflatten = torch.Tensor.unflatten',
           '''\
unflatten = torch.Tensor.unflatten


def shares_vjp(x, v):
    S = x.sum()
    return unflatten(v / S - (v * x).sum() / S**2, 0, (x.numel(),))
'''),
    Honest('l03-paths',
           'from heapq import heappush, heappop',
           '''\
from heapq import heappop, heappush


def count_paths(root, leaf):
    order = topo_order(root)
    rank = {id(n): i for i, n in enumerate(order)}
    by_id = {id(n): n for n in order}
    paths = {id(root): 1}
    heap, queued = [(-rank[id(root)], id(root))], {id(root)}
    while heap:
        _, key = heappop(heap)
        for p in by_id[key].parents:
            paths[id(p)] = paths.get(id(p), 0) + paths[key]
            if id(p) not in queued:
                queued.add(id(p))
                heappush(heap, (-rank[id(p)], id(p)))
    return paths.get(id(leaf), 0)
''',
           earlier=LESSON_03_SORT),
    Honest('l01-find-leaves',
           'from bisect import insort',
           '''\
from bisect import insort


def find_leaves(out):
    found, seen, todo = [], set(), [out.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if hasattr(node, 'variable'):
            insort(found, (id(node.variable), node.variable), key=lambda e: e[0])
        todo.extend(fn for fn, _ in node.next_functions)
    return [t for _, t in found]
'''),
    Honest('l01-formula',
           'a class whose leaf table is self.vars',
           '''\
class FormulaReader:
    SIGNS = {'AddBackward0': '+', 'SubBackward0': '-', 'MulBackward0': '*'}

    def __init__(self, names):
        self.vars = {id(t): n for n, t in names.items()}

    def text(self, node):
        if hasattr(node, 'variable'):
            return self.vars[id(node.variable)]
        kids = [fn for fn, _ in node.next_functions]
        kind = node.name()
        if kind == 'SinBackward0':
            return f'torch.sin({self.text(kids[0])})'
        if kind == 'ExpBackward0':
            return f'torch.exp({self.text(kids[0])})'
        if kind == 'PowBackward0':
            return f'({self.text(kids[0])} ** {node._saved_exponent})'
        left = f'{node._saved_self.item()}' if kids[0] is None else self.text(kids[0])
        right = f'{node._saved_other.item()}' if kids[1] is None else self.text(kids[1])
        return f'({left} {self.SIGNS[kind]} {right})'


def formula(out, names):
    return FormulaReader(names).text(out.grad_fn)
'''),
    Honest('l09-gather',
           'a registry decorator filling a dict of per-dim rules',
           '''\
GATHER_GRADS = {}


def for_dim(d):
    def add(fn):
        GATHER_GRADS[d] = fn
        return fn
    return add


@for_dim(0)
def _dim0(x, index, g):
    return torch.zeros_like(x).scatter_add_(0, index, g)


@for_dim(1)
def _dim1(x, index, g):
    return torch.zeros_like(x).scatter_add_(1, index, g)


def gather_grad(x, dim, index, g):
    return GATHER_GRADS[dim](x, index, g)
'''),
    Honest('l02-rule',
           'a class per node kind in a registry dict, built by a decorator',
           '''\
RULES = {}


def rule(name):
    def register(fn):
        RULES[name] = fn
        return fn
    return register


@rule('AddBackward0')
def _add(n, g):
    return [g, g]


@rule('SubBackward0')
def _sub(n, g):
    return [g, -g]


@rule('MulBackward0')
def _mul(n, g):
    a, b = n._saved_self, n._saved_other
    return [None if b is None else g * b, None if a is None else g * a]


@rule('DivBackward0')
def _div(n, g):
    a, b = n._saved_self, n._saved_other
    return [g / b, None if a is None else -g * a / b ** 2]


@rule('SinBackward0')
def _sin(n, g):
    return [g * torch.cos(n._saved_self)]


@rule('ExpBackward0')
def _exp(n, g):
    return [g * n._saved_result]


@rule('PowBackward0')
def _pow(n, g):
    k = n._saved_exponent
    return [g * k * n._saved_self ** (k - 1)]


@rule('SqrtBackward0')
def _sqrt(n, g):
    return [g / (2 * n._saved_result)]


@rule('TanhBackward0')
def _tanh(n, g):
    return [g * (1 - n._saved_result ** 2)]


def node_rule(node, grad):
    sent = RULES[node.name()](node, grad)
    return [None if fn is None else s for (fn, _), s in zip(node.next_functions, sent)]
'''),
]


# ---------------------------------------------------------------- a second hunt, once refused
# Lesson 23 (a decorated function sent to workers, records made inside it), the method
# exercises (an optimizer's first step in the sandbox, re, time, warnings filters,
# torch.cuda.empty_cache, torch._check in a fake) and by-hand numerics (x * x beside
# 2x * (x - 4), an input overwritten in place, torch.vander, triu_indices, asarray, the
# in-place forms torch.sigmoid_).
HONEST += [
    Honest('l23-fp16-hook',
           'torch.no_grad() as a decorator on the hook',
           '''\
@torch.no_grad()
def fp16_average(state, bucket):
    world = dist.get_world_size()
    half = bucket.buffer().div(world).to(torch.float16)
    fut = dist.all_reduce(half, async_op=True).get_future()
    return fut.then(lambda f: f.value()[0].to(torch.float32))
'''),
    Honest('l23-fp16-hook',
           'collections.namedtuple to carry the world size and dtype',
           '''\
def fp16_average(state, bucket):
    from collections import namedtuple

    Plan = namedtuple('Plan', ['world', 'wire', 'home'])
    plan = Plan(dist.get_world_size(), torch.float16, bucket.buffer().dtype)
    sent = bucket.buffer().div(plan.world).to(plan.wire)
    fut = dist.all_reduce(sent, async_op=True).get_future()
    return fut.then(lambda f: f.value()[0].to(plan.home))
'''),
    Honest('l23-fp16-hook',
           'a small @dataclass for the compression settings, inside the hook',
           '''\
def fp16_average(state, bucket):
    from dataclasses import dataclass

    @dataclass
    class Compression:
        wire: torch.dtype = torch.float16
        home: torch.dtype = torch.float32

    c = Compression()
    sent = (bucket.buffer() / dist.get_world_size()).to(c.wire)
    fut = dist.all_reduce(sent, async_op=True).get_future()
    return fut.then(lambda f: f.value()[0].to(c.home))
'''),
    Honest('l23-fp16-hook',
           '@torch.no_grad without parentheses',
           '''\
@torch.no_grad
def fp16_average(state, bucket):
    half = (bucket.buffer() / dist.get_world_size()).half()
    return dist.all_reduce(half, async_op=True).get_future().then(
        lambda f: f.value()[0].float())
'''),
    Honest('l23-buckets',
           'torch.no_grad() decorating the function, dict of pending grads',
           '''\
@torch.no_grad()
def bucketed_averaging(model, cap):
    params = list(model.parameters())
    state = {'bucket': [], 'bytes': 0, 'done': 0}

    def flush():
        grads = [p.grad for p in state['bucket']]
        flat = torch.cat([g.view(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= dist.get_world_size()
        for g, part in zip(grads, flat.split([g.numel() for g in grads])):
            g.copy_(part.view_as(g))
        state['bucket'], state['bytes'] = [], 0

    def hook(p):
        state['bucket'].append(p)
        state['bytes'] += p.grad.numel() * p.grad.element_size()
        state['done'] += 1
        if state['bytes'] >= cap or state['done'] == len(params):
            flush()
        if state['done'] == len(params):
            state['done'] = 0

    for p in params:
        p.register_post_accumulate_grad_hook(hook)
'''),
    Honest('l23-buckets',
           'a @dataclass Bucket inside the function, holding params and bytes',
           '''\
def bucketed_averaging(model, cap):
    from dataclasses import dataclass, field

    @dataclass
    class Bucket:
        params: list = field(default_factory=list)
        nbytes: int = 0

        def add(self, p):
            self.params.append(p)
            self.nbytes += p.grad.numel() * p.grad.element_size()

        def send(self):
            flat = torch.cat([p.grad.flatten() for p in self.params])
            dist.all_reduce(flat)
            flat.div_(dist.get_world_size())
            offset = 0
            for p in self.params:
                n = p.grad.numel()
                p.grad.copy_(flat.narrow(0, offset, n).view_as(p.grad))
                offset += n

    params = list(model.parameters())
    current = [Bucket()]
    arrived = [0]

    def on_ready(p):
        current[0].add(p)
        arrived[0] += 1
        last = arrived[0] == len(params)
        if current[0].nbytes >= cap or last:
            current[0].send()
            current[0] = Bucket()
        if last:
            arrived[0] = 0

    for p in params:
        p.register_post_accumulate_grad_hook(on_ready)
'''),
    Honest('l23-buckets',
           'a typing.NamedTuple per bucket entry (param, size)',
           '''\
def bucketed_averaging(model, cap):
    from typing import NamedTuple

    class Entry(NamedTuple):
        param: torch.Tensor
        nbytes: int

    params = list(model.parameters())
    entries, arrived = [], [0]

    def send():
        flat = torch.cat([e.param.grad.reshape(-1) for e in entries])
        dist.all_reduce(flat)
        flat /= dist.get_world_size()
        pieces = flat.split([e.param.numel() for e in entries])
        for e, piece in zip(entries, pieces):
            e.param.grad.copy_(piece.view_as(e.param))
        entries.clear()

    def ready(p):
        entries.append(Entry(p, p.grad.numel() * p.grad.element_size()))
        arrived[0] += 1
        if sum(e.nbytes for e in entries) >= cap or arrived[0] == len(params):
            send()
        if arrived[0] == len(params):
            arrived[0] = 0

    for p in params:
        p.register_post_accumulate_grad_hook(ready)
'''),
    Honest('l23-shard-mean',
           'torch.no_grad() decorator, P2P with a dict of requests',
           '''\
@torch.no_grad()
def shard_mean(grad):
    rank, world = dist.get_rank(), dist.get_world_size()
    size = math.ceil(grad.shape[0] / world)
    mine = grad[rank * size:(rank + 1) * size]
    got = {}
    reqs = []
    for peer in range(world):
        if peer != rank:
            got[peer] = torch.empty_like(mine)
            reqs.append(dist.isend(grad[peer * size:(peer + 1) * size].contiguous(), dst=peer))
            reqs.append(dist.irecv(got[peer], src=peer))
    for r in reqs:
        r.wait()
    total = mine.clone()
    for t in got.values():
        total.add_(t)
    return total.div_(world)
'''),
    Honest('l23-shard-mean',
           "a typing.NamedTuple for each rank's row range",
           '''\
def shard_mean(grad):
    from typing import NamedTuple

    class Rows(NamedTuple):
        start: int
        stop: int

    rank, world = dist.get_rank(), dist.get_world_size()
    n = grad.shape[0]
    size = -(-n // world)
    ranges = [Rows(min(r * size, n), min((r + 1) * size, n)) for r in range(world)]
    mine = ranges[rank]
    own = grad[mine.start:mine.stop]
    waits, received = [], []
    for peer, rows in enumerate(ranges):
        if peer == rank:
            continue
        waits.append(dist.isend(grad[rows.start:rows.stop].contiguous(), peer))
        received.append(torch.empty_like(own))
        waits.append(dist.irecv(received[-1], peer))
    for w in waits:
        w.wait()
    return sum(received, own.clone()) / world
'''),
    Honest('l23-shard-mean',
           'a frozen @dataclass for the layout (rows per rank)',
           '''\
def shard_mean(grad):
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Layout:
        rows: int
        world: int

        def of(self, r):
            size = -(-self.rows // self.world)
            return slice(r * size, (r + 1) * size)

    rank, world = dist.get_rank(), dist.get_world_size()
    lay = Layout(grad.shape[0], world)
    mine = grad[lay.of(rank)]
    reqs, parts = [], []
    for r in range(world):
        if r != rank:
            reqs.append(dist.isend(grad[lay.of(r)].contiguous(), r))
            parts.append(torch.empty_like(mine))
            reqs.append(dist.irecv(parts[-1], r))
    for q in reqs:
        q.wait()
    return torch.stack([mine, *parts]).sum(0) / world
'''),
    Honest('l14-windows',
           'an SGD optimizer used only for its zero_grad (no step), a Trainer class',
           '''\
class Trainer:
    def __init__(self, W):
        self.W = W.detach().clone().requires_grad_(True)
        self.opt = torch.optim.SGD([self.W], lr=0.1)

    def window_gradient(self, h_enter, window, k1):
        self.opt.zero_grad()
        h = h_enter.detach()
        loss = 0.0
        for s, x in enumerate(window):
            h = torch.tanh(self.W @ h + x)
            if s >= len(window) - k1:
                loss = loss + (h ** 2).sum()
        loss.backward()
        return self.W.grad.clone()


def tbptt_gradients(W, xs, k1, k2):
    trainer = Trainer(W)
    with torch.no_grad():
        states = [torch.zeros(W.shape[0], dtype=W.dtype)]
        for x in xs:
            states.append(torch.tanh(W @ states[-1] + x))
    out = []
    for t in range(k1, len(xs) + 1, k1):
        first = max(0, t - k2)
        out.append(trainer.window_gradient(states[first], xs[first:t], k1))
    return out
'''),
    Honest('l02-rule',
           're to strip the Backward suffix, a dict of lambdas keyed by the op',
           '''\
import re


def node_rule(node, grad):
    op = re.sub(r"Backward\\d+$", "", node.name())
    s = getattr(node, "_saved_self", None)
    o = getattr(node, "_saved_other", None)
    r = getattr(node, "_saved_result", None)
    rules = {
        "Add": lambda: [grad, grad],
        "Sub": lambda: [grad, -grad],
        "Mul": lambda: [None if o is None else grad * o, None if s is None else grad * s],
        "Div": lambda: [grad / o, None if s is None else -grad * s / o**2],
        "Sin": lambda: [grad * s.cos()],
        "Exp": lambda: [grad * r],
        "Pow": lambda: [grad * node._saved_exponent * s ** (node._saved_exponent - 1)],
        "Sqrt": lambda: [grad / (2 * r)],
        "Tanh": lambda: [grad * (1 - r * r)],
    }
    sent = rules[op]()
    return [None if fn is None else g for (fn, _), g in zip(node.next_functions, sent)]
'''),
    Honest('l01-formula',
           're.match on the node name, a recursive function with a str.join',
           '''\
import re


def formula(out, names):
    label = {id(t): n for n, t in names.items()}
    infix = {"Add": "+", "Sub": "-", "Mul": "*"}

    def text(node):
        kind = re.match(r"[A-Za-z]+?(?=Backward|$)", node.name().split("::")[-1]).group(0)
        if kind == "AccumulateGrad":
            return label[id(node.variable)]
        args = [fn for fn, _ in node.next_functions]
        if kind in ("Sin", "Exp"):
            return "torch." + kind.lower() + "(" + text(args[0]) + ")"
        if kind == "Pow":
            return "(" + text(args[0]) + " ** " + str(node._saved_exponent) + ")"
        if args[0] is None:
            return "(" + str(node._saved_self.item()) + " * " + text(args[1]) + ")"
        if args[1] is None:
            return "(" + text(args[0]) + " * " + str(node._saved_other.item()) + ")"
        return "(" + f" {infix[kind]} ".join(text(a) for a in args) + ")"

    return text(out.grad_fn)
'''),
    Honest('l15-vanishing',
           'warnings.catch_warnings(record=True) kept to look at what backward warned',
           '''\
import warnings


def first_vanishing_layer(model, x, threshold):
    norms, handles = {}, []
    for name, layer in model.named_children():
        def record(module, grad_input, grad_output, name=name):
            norms[name] = grad_input[0].norm().item()
        handles.append(layer.register_full_backward_hook(record))
    with warnings.catch_warnings(record=True) as caught:
        model(x).sum().backward()
    for w in caught:
        print("warning during backward:", w.message)
    for handle in handles:
        handle.remove()
    for name, _ in reversed(list(model.named_children())):
        if norms[name] < threshold:
            return name
    return None
'''),
    Honest('l16-checkpoint',
           'real checkpointed runs under warnings.catch_warnings, a greedy-free exhaustive search',
           '''\
import warnings
from torch.utils.checkpoint import checkpoint


def choose_checkpoints(blocks, x):
    params = {p.untyped_storage().data_ptr() for p in blocks.parameters()}

    def kept(chosen):
        seen = {}

        def pack(t):
            if t.untyped_storage().data_ptr() not in params:
                seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
            return t

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with saved_tensors_hooks(pack, lambda t: t):
                h = x
                for i, block in enumerate(blocks):
                    h = checkpoint(block, h, use_reentrant=False) if i in chosen else block(h)
        return sum(seen.values())

    h, inside = x, []
    for block in blocks:
        h, n = kept_inside(block, h)
        inside.append(n)
    plain = kept(set())
    choices = sorted(range(1 << len(blocks)),
                     key=lambda m: sum(multiply_adds(blocks[i]) for i in range(len(blocks)) if m >> i & 1))
    for m in choices:
        chosen = {i for i in range(len(blocks)) if m >> i & 1}
        if plain - sum(inside[i] for i in chosen) <= 0.6 * plain:
            return sorted(chosen)
''',
           earlier=LESSON_16_HELPERS),
    Honest('l16-checkpoint',
           'time.perf_counter around the search, printed',
           '''\
import time
from dataclasses import dataclass


@dataclass
class Info:
    index: int
    inside: int
    cost: int


@dataclass
class Option:
    cost: int
    chosen: list


def choose_checkpoints(blocks, x):
    started = time.perf_counter()
    infos = []
    h = x
    for i, block in enumerate(blocks):
        h, inside = kept_inside(block, h)
        infos.append(Info(i, inside, multiply_adds(block)))
    plain = len(blocks) * x.untyped_storage().nbytes() + sum(b.inside for b in infos)
    options = []
    for mask in range(1 << len(infos)):
        chosen = [b for b in infos if mask >> b.index & 1]
        if plain - sum(b.inside for b in chosen) <= 0.6 * plain:
            options.append(Option(sum(b.cost for b in chosen), [b.index for b in chosen]))
    best = min(options, key=lambda o: o.cost)
    print(f"searched {len(options)} choices in {time.perf_counter() - started:.3f}s")
    return best.chosen
''',
           earlier=LESSON_16_HELPERS),
    Honest('l16-checkpoint-by-hooks',
           'torch.cuda.empty_cache() guarded by is_available',
           '''\
def checkpoint_by_hooks(block, x):
    rng = torch.get_rng_state()
    redo = []
    n = [0]

    def pack(t):
        n[0] += 1
        return n[0] - 1

    def unpack(i):
        if not redo:
            with torch.random.fork_rng(devices=[]):
                torch.set_rng_state(rng)
                with torch.enable_grad(), saved_tensors_hooks(lambda t: redo.append(t) or t,
                                                              lambda t: t):
                    block(x.detach().requires_grad_(x.requires_grad))
        return redo[i]

    with saved_tensors_hooks(pack, unpack):
        out = block(x)
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return out
''',
           earlier='''\
from torch.autograd.graph import saved_tensors_hooks
'''),
    Honest('l07-two-players',
           'a single torch.optim.SGD over A + B, plain zero_grad(), backward(inputs=...)',
           '''\
def two_player_step(loss_a, loss_b, A, B, lr):
    opt = torch.optim.SGD(A + B, lr=lr)
    opt.zero_grad()
    loss_a.backward(inputs=A, retain_graph=True)
    loss_b.backward(inputs=B)
    opt.step()
'''),
    Honest('l15-vanishing',
           "warnings.catch_warnings + simplefilter('ignore') around the pass only (minimal)",
           '''\
import warnings


def first_vanishing_layer(model, x, threshold):
    norms, handles = {}, []
    for name, layer in model.named_children():
        def record(module, grad_input, grad_output, name=name):
            norms[name] = grad_input[0].norm().item()
        handles.append(layer.register_full_backward_hook(record))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model(x).sum().backward()
    for h in handles:
        h.remove()
    for name, _ in reversed(list(model.named_children())):
        if norms[name] < threshold:
            return name
    return None
'''),
    Honest('l05-microbatch',
           'SGD zero_grad then backward',
           '''\
def accumulate(w, X, t, sizes):
    opt = torch.optim.SGD([w], lr=0.1)
    opt.zero_grad()
    for xb, tb in zip(X.split(sizes), t.split(sizes)):
        (((xb @ w - tb) ** 2).sum() / len(X)).backward()
'''),
    Honest('l07-two-players',
           'param groups, no zero_grad',
           '''\
def two_player_step(loss_a, loss_b, A, B, lr):
    opt = torch.optim.SGD([{"params": A}, {"params": B}], lr=lr)
    for p in A + B:
        p.grad = None
    loss_a.backward(inputs=A, retain_graph=True)
    loss_b.backward(inputs=B)
    opt.step()
'''),
    Honest('l02-cubic',
           'the product rule on x^2 (x - 4), 2x(x - 4) + x*x',
           '''\
def cubic_slope(x):
    return 2 * x * (x - 4) + x * x
'''),
    Honest('l19-softplus-in-place',
           'forward by two branches, exp(-x) and exp(x); backward 1 - exp(-y)',
           '''\
class SoftplusInPlace(torch.autograd.Function):
    @staticmethod
    def forward(x):
        y = torch.where(x > 0, x + torch.log1p(torch.exp(-x)), torch.log1p(torch.exp(x)))
        return x.copy_(y)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.mark_dirty(inputs[0])
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * (1 - torch.exp(-y))
'''),
    Honest('l02-cubic',
           "torch.vander for the polynomial's powers",
           '''\
def cubic_slope(x):
    coeffs = torch.tensor([3.0, -8.0, 0.0], dtype=x.dtype)
    return (torch.vander(x.reshape(-1), N=3) @ coeffs).reshape(x.shape)
'''),
    Honest('l26-dscores',
           "the future's entries found by torch.triu_indices",
           '''\
def dscores(S, lse, dP):
    T = len(S)
    P = torch.exp(S - lse)
    above = torch.triu_indices(T, T, offset=1)
    P[above[0], above[1]] = 0.0
    return P * (dP - (dP * P).sum(-1, keepdim=True))
'''),
    Honest('l10-dlogits',
           'torch.sigmoid_ on a clone',
           '''\
def dlogits_sigmoid_mse(z, y):
    p = torch.sigmoid_(z.clone())
    return 2 * (p - y) * p * (1 - p) / z.numel()
'''),
    Honest('l12-centre',
           'eps through torch.asarray',
           '''\
def centre_backward(diff, var, eps, dxhat, dinvstd):
    n = diff.shape[0]
    s = torch.rsqrt(var + torch.asarray(eps, dtype=var.dtype))
    dvar = -0.5 * dinvstd * s ** 3
    ddiff2 = dvar.expand_as(diff) / n
    ddiff = dxhat * s + 2 * diff * ddiff2
    dmean = -ddiff.sum(0, keepdim=True)
    return dvar, ddiff2, ddiff, dmean, ddiff + dmean / n
'''),
    Honest('l27-rms-norm-op',
           'torch._check on the shapes in the fake',
           '''\
def rms_norm_fake(x, w, eps):
    torch._check(x.shape[-1] == w.shape[-1])
    return torch.empty_like(x)


def rms_norm_setup_context(ctx, inputs, output):
    x, w, eps = inputs
    ctx.save_for_backward(x, w)
    ctx.eps = eps


def rms_norm_backward(ctx, grad):
    x, w = ctx.saved_tensors
    r = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + ctx.eps)
    gw = grad * w
    dx = r * gw - x * r**3 * (gw * x).mean(dim=-1, keepdim=True)
    return dx, (grad * x * r).sum(dim=0), None
''',
           earlier=LESSON_27_FORWARD,
           later='''\
pieces = {"fake": rms_norm_fake, "setup_context": rms_norm_setup_context,
          "backward": rms_norm_backward}
'''),
    Honest('l17-newton-step',
           'log = print at cell level (a switch to silence the debugging output later)',
           '''\
log = print  # set to (lambda *args: None) to silence


def newton_step(f, x):
    x = x.detach().requires_grad_()
    (d1,) = torch.autograd.grad(f(x).sum(), x, create_graph=True)
    (d2,) = torch.autograd.grad(d1.sum(), x)
    log("f' =", d1.detach(), "f'' =", d2)
    return -d1.detach() / d2
'''),
    Honest('l28-atan2',
           'show = print alias at cell level, used to trace the shapes',
           '''\
show = print


def atan2_backward(y, x, g):
    r2 = x * x + y * y
    show("shapes:", tuple(y.shape), tuple(x.shape))
    return g * x / r2, (-g * y / r2).sum_to_size(x.shape)
'''),
    Honest('l16-checkpoint-by-hooks',
           "a module-level sentinel object() for 'not recomputed yet'",
           '''\
from torch.autograd.graph import saved_tensors_hooks

NOT_YET = object()


def checkpoint_by_hooks(block, x):
    state = torch.get_rng_state()
    redone = [NOT_YET]
    count = [0]

    def pack(t):
        count[0] += 1
        return count[0] - 1

    def unpack(i):
        if redone[0] is NOT_YET:
            kept = []
            with torch.random.fork_rng(devices=[]):
                torch.set_rng_state(state)
                with torch.enable_grad(), saved_tensors_hooks(lambda t: kept.append(t) or t, lambda t: t):
                    block(x.detach().requires_grad_(x.requires_grad))
            redone[0] = kept
        return redone[0][i]

    with saved_tensors_hooks(pack, unpack):
        return block(x)
'''),
    Honest('l21-layers',
           'a cell-level trail of reports for debugging, its append bound to a name',
           '''\
from torch.autograd.graph import register_multi_grad_hook

trail = []
remember = trail.append


def watch_layers(model, report):
    handles = []
    for name, module in model.named_modules():
        params = dict(module.named_parameters(recurse=False))
        if params:
            def hook(grads, name=name, keys=tuple(params)):
                remember(name)
                report(name, dict(zip(keys, grads)))
            handles.append(register_multi_grad_hook(list(params.values()), hook))
    return handles
'''),
    Honest('l18-clip-per-example',
           'a type alias Grads = dict[str, torch.Tensor] for the return hint',
           '''\
Grads = dict[str, torch.Tensor]


def clipped_mean_gradient(model, X, Y, max_norm) -> Grads:
    weights = {k: v.detach() for k, v in model.named_parameters()}

    def one_loss(w, x, y):
        return ((functional_call(model, w, (x.unsqueeze(0),)) - y.unsqueeze(0)) ** 2).mean()

    per: Grads = vmap(grad(one_loss), in_dims=(None, 0, 0))(weights, X, Y)
    norms = sum(g.flatten(1).pow(2).sum(1) for g in per.values()).sqrt()
    scale = (max_norm / norms).clamp(max=1.0)
    return {k: (g * scale.view(-1, *[1] * (g.dim() - 1))).mean(0) for k, g in per.items()}
''',
           earlier='''\
from torch.func import functional_call, grad, vmap
'''),
    Honest('l26-heads',
           'a type alias Triple = tuple[torch.Tensor, torch.Tensor, torch.Tensor] as the return hint',
           '''\
Triple = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def attention_backward(Q, K, V, lse, dO) -> Triple:
    T, d = Q.shape[-2], Q.shape[-1]
    S = Q @ K.mT / math.sqrt(d)
    P = torch.exp(S - lse).masked_fill(future_mask(T), 0.0)
    dV = P.mT @ dO
    dP = dO @ V.mT
    dS = P * (dP - (dP * P).sum(dim=-1, keepdim=True))
    return dS @ K / math.sqrt(d), dS.mT @ Q / math.sqrt(d), dV
''',
           earlier='''\
def future_mask(T):
    return torch.ones(T, T, dtype=torch.bool).triu(1)
'''),
    Honest('l16-bytes-formula',
           "the copies per layer looked up with a dict's .get bound at cell level",
           '''\
copies_kept = {"gelu": 2}.get  # every other activation keeps one copy


def bytes_formula(batch, widths, activation):
    return 4 * batch * (widths[0] + copies_kept(activation, 1) * sum(widths[1:-1]))
'''),
    Honest('l22-complex-linear',
           'a NO_GRAD = torch.no_grad() context object kept at cell level',
           '''\
NO_GRAD = torch.no_grad()


def complex_linear_backward(x, W, b, G):
    with NO_GRAD:
        return G @ W.mH, x.mH @ G, G.sum(dim=0)
'''),
    Honest('l23-fp16-hook',
           'from __future__ import annotations; hints name Future and GradBucket imported at cell level',
           '''\
from __future__ import annotations

from torch.distributed import GradBucket
from torch.futures import Future


def fp16_average(state: object, bucket: GradBucket) -> Future:
    world = dist.get_world_size()
    half = (bucket.buffer() / world).to(torch.float16)
    fut = dist.all_reduce(half, async_op=True).get_future()
    return fut.then(lambda done: done.value()[0].to(torch.float32))
'''),
    Honest('l23-shard-mean',
           'from __future__ import annotations; the hints name Tensor imported from torch at cell level',
           '''\
from __future__ import annotations

from torch import Tensor


def shard_mean(grad: Tensor) -> Tensor:
    rank, world = dist.get_rank(), dist.get_world_size()
    size = math.ceil(grad.shape[0] / world)
    mine = grad[rank * size:(rank + 1) * size]
    received, requests = [], []
    for other in range(world):
        if other != rank:
            requests.append(dist.isend(grad[other * size:(other + 1) * size].contiguous(), other))
            received.append(torch.empty_like(mine))
            requests.append(dist.irecv(received[-1], other))
    for request in requests:
        request.wait()
    total = mine.clone()
    for part in received:
        total += part
    return total / world
'''),
    Honest('l22-safe-softplus',
           'softplus(t) = -logsigmoid(-t), F.logsigmoid held by a short name at cell level',
           '''\
log_sigmoid = torch.nn.functional.logsigmoid


def safe_soft_relu(x, beta):
    bx = beta * x
    big = bx > 20
    tame = torch.where(big, torch.zeros_like(bx), bx)
    return torch.where(big, x, -log_sigmoid(-tame) / beta)
'''),
    Honest('l04-huber',
           'a Number = int | float alias for delta',
           '''\
Number = int | float


def huber_grads(x, y, w, b, delta: Number):
    r = w * x + b - y
    pull = r.clamp(min=-delta, max=delta)
    return (pull * x).mean(), pull.mean()
'''),
    Honest('l03-ops',
           'a NUMBERS = (int, float) tuple for an isinstance check',
           '''\
NUMBERS = (int, float)


def exp(a):
    out = Value(math.exp(a.data), (a,), "exp")

    def rule():
        a.grad += out.data * out.grad

    out.backward_rule = rule
    return out


def log(a):
    out = Value(math.log(a.data), (a,), "log")

    def rule():
        a.grad += out.grad / a.data

    out.backward_rule = rule
    return out


def power(a, k):
    if not isinstance(k, NUMBERS):
        raise TypeError(f"power: k must be a plain number, got {type(k).__name__}")
    out = Value(a.data ** k, (a,), f"**{k}")

    def rule():
        a.grad += k * a.data ** (k - 1) * out.grad

    out.backward_rule = rule
    return out
''',
           earlier='''\
class Value:
    """A number that remembers how it was made."""

    def __init__(self, data, parents=(), op="", name=""):
        self.data = float(data)
        self.grad = 0.0
        self.parents = parents
        self.op = op
        self.name = name
        self.backward_rule = lambda: None

    def __repr__(self):
        return f"Value({self.data:.4g}, grad={self.grad:.4g})"


def as_value(x):
    return x if isinstance(x, Value) else Value(x)


def add(a, b):
    a, b = as_value(a), as_value(b)
    out = Value(a.data + b.data, (a, b), "+")

    def rule():
        a.grad += out.grad
        b.grad += out.grad

    out.backward_rule = rule
    return out


def mul(a, b):
    a, b = as_value(a), as_value(b)
    out = Value(a.data * b.data, (a, b), "*")

    def rule():
        a.grad += b.data * out.grad
        b.grad += a.data * out.grad

    out.backward_rule = rule
    return out


def tanh(a):
    out = Value(math.tanh(a.data), (a,), "tanh")

    def rule():
        a.grad += (1 - out.data**2) * out.grad

    out.backward_rule = rule
    return out


Value.__add__ = Value.__radd__ = add
Value.__mul__ = Value.__rmul__ = mul
Value.__neg__ = lambda a: a * -1
Value.__sub__ = lambda a, b: a + (-as_value(b))
Value.__rsub__ = lambda a, b: as_value(b) + (-a)
Value.__truediv__ = lambda a, b: a * (1 / b)


def topo_order(root):
    order, seen = [], set()
    stack = [(root, False)]
    while stack:
        node, parents_done = stack.pop()
        if parents_done:
            order.append(node)
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append((node, True))
            stack.extend((p, False) for p in node.parents if id(p) not in seen)
    return order


def backward(root):
    order = topo_order(root)
    for node in order:
        if node.parents:
            node.grad = 0.0
    root.grad += 1.0
    for node in reversed(order):
        node.backward_rule()
'''),
    Honest('l12-weighted',
           'nn.Softmax(dim=1) for the probabilities',
           '''\
def weighted_dlogits(logits, y, weight):
    probs = torch.nn.Softmax(dim=1)(logits)
    w = weight[y]
    onehot = torch.nn.functional.one_hot(y, logits.shape[1]).to(logits.dtype)
    return w[:, None] * (probs - onehot) / w.sum()
'''),
    Honest('l13-conv-dw',
           'an nn.Unfold module for the patches, a loop over examples',
           '''\
def conv2d_dw_db(x, w, dout, stride, padding):
    unfold = torch.nn.Unfold(kernel_size=w.shape[-1], stride=stride, padding=padding)
    patches = unfold(x)
    dw = torch.stack([d.flatten(1) @ p.T for d, p in zip(dout, patches)]).sum(0)
    return dw.reshape(w.shape), dout.sum((0, 2, 3))
'''),
    Honest('l04-grads',
           'a debug table printed with str.ljust',
           '''\
def nll_grads(x, y, w, b, a, c, verbose=False):
    r = w * x + b - y
    u = a * x + c
    prec = torch.exp(-2 * u)
    d_r, d_u = r * prec, 1 - r**2 * prec
    grads = {"w": (d_r * x).mean(), "b": d_r.mean(), "a": (d_u * x).mean(), "c": d_u.mean()}
    if verbose:
        for name, g in grads.items():
            print(name.ljust(4), float(g))
    return tuple(grads.values())
'''),
    Honest('l13-lstm-bptt',
           'caches in a dict by step, popitem() takes the last one',
           '''\
def lstm_bptt(xs, h0, c0, W, b, dhs):
    D = xs.shape[2]
    tape, h, c = {}, h0, c0
    for t, x in enumerate(xs):
        s = lstm_step(x, h, c, W, b)
        tape[t] = (torch.cat([x, h], 1), c, s)
        h, c = s["h_new"], s["c_new"]
    dW, db = torch.zeros_like(W), torch.zeros_like(b)
    dh, dc = torch.zeros_like(h0), torch.zeros_like(c0)
    while tape:
        t, (xh, c_in, s) = tape.popitem()
        dz, dc = lstm_step_backward(s["i"], s["f"], s["g"], s["o"], c_in, s["c_new"],
                                    dhs[t] + dh, dc)
        dW = dW + xh.T @ dz
        db = db + dz.sum(0)
        dh = (dz @ W.T)[:, D:]
    return dW, db, dh, dc
''',
           earlier='''\
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
'''),
    Honest('l13-lstm-bptt',
           'a Tape class with __iter__ and __reversed__',
           '''\
class Tape:
    def __init__(self):
        self.entries = []

    def record(self, entry):
        self.entries.append(entry)

    def __len__(self):
        return len(self.entries)

    def __iter__(self):
        return iter(self.entries)

    def __reversed__(self):
        return reversed(self.entries)


def lstm_bptt(xs, h0, c0, W, b, dhs):
    D = xs.shape[2]
    tape, h, c = Tape(), h0, c0
    for t, x in enumerate(xs):
        s = lstm_step(x, h, c, W, b)
        tape.record((t, torch.cat([x, h], 1), c, s))
        h, c = s["h_new"], s["c_new"]
    dW, db = torch.zeros_like(W), torch.zeros_like(b)
    dh, dc = torch.zeros_like(h0), torch.zeros_like(c0)
    for t, xh, c_in, s in reversed(tape):
        dz, dc = lstm_step_backward(s["i"], s["f"], s["g"], s["o"], c_in, s["c_new"],
                                    dhs[t] + dh, dc)
        dW, db = dW + xh.T @ dz, db + dz.sum(0)
        dh = (dz @ W.T)[:, D:]
    return dW, db, dh, dc
''',
           earlier='''\
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
'''),
    Honest('l13-pool',
           "windows by as_strided with the input's strides",
           '''\
def maxpool_backward(x, dout, kernel, stride):
    N, C, H, W = x.shape
    Ho, Wo = dout.shape[-2:]
    xc = x.contiguous()
    sN, sC, sH, sW = xc.stride()
    windows = xc.as_strided((N, C, Ho, Wo, kernel, kernel),
                            (sN, sC, sH * stride, sW * stride, sH, sW))
    first = windows.reshape(N, C, Ho, Wo, -1).argmax(-1)
    rows = torch.arange(Ho)[:, None] * stride + first // kernel
    cols = torch.arange(Wo)[None, :] * stride + first % kernel
    dx = torch.zeros(N, C, H * W, dtype=x.dtype)
    dx.scatter_add_(2, (rows * W + cols).reshape(N, C, -1), dout.reshape(N, C, -1))
    return dx.reshape(N, C, H, W)
'''),
    Honest('l13-lstm-bptt',
           'a dataclass of per-step lists hs, cs, is_, fs, gs, os',
           '''\
from dataclasses import dataclass, field


@dataclass
class History:
    xhs: list = field(default_factory=list)
    cs: list = field(default_factory=list)
    is_: list = field(default_factory=list)
    fs: list = field(default_factory=list)
    gs: list = field(default_factory=list)
    os: list = field(default_factory=list)
    c_news: list = field(default_factory=list)


def lstm_bptt(xs, h0, c0, W, b, dhs):
    D = xs.shape[2]
    hist, h, c = History(), h0, c0
    for x in xs:
        s = lstm_step(x, h, c, W, b)
        hist.xhs.append(torch.cat([x, h], 1))
        hist.cs.append(c)
        hist.is_.append(s["i"])
        hist.fs.append(s["f"])
        hist.gs.append(s["g"])
        hist.os.append(s["o"])
        hist.c_news.append(s["c_new"])
        h, c = s["h_new"], s["c_new"]
    dW, db = torch.zeros_like(W), torch.zeros_like(b)
    dh, dc = torch.zeros_like(h0), torch.zeros_like(c0)
    for t in reversed(range(len(xs))):
        dz, dc = lstm_step_backward(hist.is_[t], hist.fs[t], hist.gs[t], hist.os[t],
                                    hist.cs[t], hist.c_news[t], dhs[t] + dh, dc)
        dW = dW + hist.xhs[t].T @ dz
        db = db + dz.sum(0)
        dh = (dz @ W.T)[:, D:]
    return dW, db, dh, dc
''',
           earlier='''\
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
'''),
    Honest('l01-find-leaves',
           'a Walker class whose per-node method is called inspect',
           '''\
class Walker:
    def __init__(self):
        self.seen, self.leaves = set(), []

    def inspect(self, node):
        if node is None or node in self.seen:
            return []
        self.seen.add(node)
        if hasattr(node, "variable"):
            self.leaves.append(node.variable)
        return [fn for fn, _ in node.next_functions]

    def walk(self, root):
        todo = [root]
        while todo:
            todo.extend(self.inspect(todo.pop()))
        return self.leaves


def find_leaves(out):
    return Walker().walk(out.grad_fn)
'''),
    Honest('l10-mlp',
           'an nn.Module holding the weights, a hand-written backward method',
           '''\
class TanhNet(torch.nn.Module):
    def __init__(self, W1, b1, W2, b2):
        super().__init__()
        self.W1, self.b1, self.W2, self.b2 = W1, b1, W2, b2

    def forward(self, xs):
        self.xs = xs
        self.h = torch.tanh(xs @ self.W1 + self.b1)
        return self.h @ self.W2 + self.b2

    def backward_by_hand(self, dz):
        da = dz @ self.W2.T * (1 - self.h**2)
        return self.xs.T @ da, da.sum(0), self.h.T @ dz, dz.sum(0)


def mlp_backward(xs, ys, W1, b1, W2, b2):
    net = TanhNet(W1, b1, W2, b2)
    z = net(xs)
    return net.backward_by_hand((torch.sigmoid(z) - ys) / z.numel())
'''),
    Honest('l26-flash',
           'buffers made with zeros_like(..., memory_format=torch.contiguous_format)',
           '''\
def flash_backward(Q, K, V, O, lse, dO, block):
    T = Q.shape[-2]
    scale = Q.shape[-1] ** -0.5
    row = (dO * O).sum(dim=-1, keepdim=True)
    dQ = torch.zeros_like(Q, memory_format=torch.contiguous_format)
    dK = torch.zeros_like(K, memory_format=torch.contiguous_format)
    dV = torch.zeros_like(V, memory_format=torch.contiguous_format)
    queries = torch.arange(T).unsqueeze(1)
    for start in range(0, T, block):
        stop = min(start + block, T)
        Kb, Vb = K[..., start:stop, :], V[..., start:stop, :]
        P = torch.exp(Q @ Kb.mT * scale - lse).masked_fill(torch.arange(start, stop) > queries, 0.0)
        dS = P * (dO @ Vb.mT - row)
        dQ += dS @ Kb * scale
        dK[..., start:stop, :] = dS.mT @ Q * scale
        dV[..., start:stop, :] = P.mT @ dO
    return dQ, dK, dV
'''),
    Honest('l24-scale-range',
           "torch.frexp's named fields (.mantissa, .exponent) for the powers of two",
           '''\
def scale_range(x, W, b, t):
    r = x @ W.T + b - t
    dy = 2 * r / r.numel()
    dW, db = dy.T @ x, dy.sum(0)
    f16 = torch.finfo(torch.float16)
    low = torch.tensor(f16.tiny, dtype=x.dtype) / dy.abs()[dy != 0].min()
    high = torch.tensor(f16.max, dtype=x.dtype) / torch.maximum(dW.abs().max(), db.abs().max())
    lo = torch.frexp(low)    # low = mantissa * 2**exponent, mantissa in [0.5, 1)
    hi = torch.frexp(high)
    lowest = torch.where(lo.mantissa == 0.5, 2.0 ** (lo.exponent - 1), 2.0 ** lo.exponent)
    highest = 2.0 ** (hi.exponent - 1)
    return lowest.to(x.dtype), highest.to(x.dtype)
'''),
    Honest('l25-sac-policy',
           'a decision variable set to PREFER_RECOMPUTE, changed to MUST_SAVE when worth it',
           '''\
from torch.utils.checkpoint import CheckpointPolicy

PRODUCTS = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default}


def policy_for(ratio):
    def policy(ctx, op, *args, **kwargs):
        decision = CheckpointPolicy.PREFER_RECOMPUTE
        if op in PRODUCTS:
            out = ctx.op_output
            if 2 * out.numel() * args[-2].shape[-1] > ratio * out.nbytes:
                decision = CheckpointPolicy.MUST_SAVE
        return decision
    return policy
'''),
    Honest('l28-cumprod',
           'two helpers each with its own local `scan` (torch.cumprod in one, torch.cumsum in the other)',
           '''\
def running_products(t):
    scan = torch.cumprod
    return scan(t, dim=-1)


def reverse_sums(t):
    scan = torch.cumsum
    return scan(t.flip(-1), dim=-1).flip(-1)


def cumprod_backward(x, dim, g):
    x, g = x.movedim(dim, -1), g.movedim(dim, -1)
    n = x.shape[-1]
    out = torch.zeros_like(x)
    for k in range(n):
        before = x[..., :k].prod(-1, keepdim=True)
        after = running_products(torch.cat([torch.ones_like(before), x[..., k + 1:]], -1))
        out[..., k] = reverse_sums(before * after * g[..., k:])[..., 0]
    return out.movedim(-1, dim)
'''),
    Honest('l16-bytes-formula',
           'a table filled by a cell-level for loop over the activations',
           '''\
KEPT_PER_LAYER = {}
for kind in ("relu", "tanh", "sigmoid", "gelu"):
    KEPT_PER_LAYER[kind] = 2 if kind == "gelu" else 1  # GELU keeps its input as well


def bytes_formula(batch, widths, activation):
    return 4 * batch * (widths[0] + KEPT_PER_LAYER[activation] * sum(widths[1:-1]))
'''),
    Honest('l18-jvp-by-hand',
           'forward-mode rules in a table filled by a cell-level loop over (name, rule) pairs',
           '''\
RULES = {}
for name, rule in (("tanh", lambda out, dx: (1 - out * out) * dx),
                   ("affine", lambda W, dx: W @ dx)):
    RULES[name] = rule


def tangent(W, b, x, v):
    h = torch.tanh(W @ x + b)
    dh = RULES["tanh"](h, RULES["affine"](W, v))
    s, ds = x @ x, 2 * (x @ v)
    return dh * s + h * ds
'''),
    Honest('l02-rule',
           'a RuleBook object whose register method is the decorator',
           '''\
class RuleBook:
    def __init__(self):
        self.rules = {}

    def register(self, name):
        def add(fn):
            self.rules[name] = fn
            return fn
        return add


RULES = RuleBook()


@RULES.register("AddBackward0")
def _add(node, g):
    return [g, g]


@RULES.register("SubBackward0")
def _sub(node, g):
    return [g, -g]


@RULES.register("MulBackward0")
def _mul(node, g):
    a, b = node._saved_self, node._saved_other
    return [None if b is None else g * b, None if a is None else g * a]


@RULES.register("DivBackward0")
def _div(node, g):
    a, b = node._saved_self, node._saved_other
    return [g / b, None if a is None else -g * a / b**2]


@RULES.register("SinBackward0")
def _sin(node, g):
    return [g * torch.cos(node._saved_self)]


@RULES.register("ExpBackward0")
def _exp(node, g):
    return [g * node._saved_result]


@RULES.register("PowBackward0")
def _pow(node, g):
    k = node._saved_exponent
    return [g * k * node._saved_self ** (k - 1)]


@RULES.register("SqrtBackward0")
def _sqrt(node, g):
    return [g / (2 * node._saved_result)]


@RULES.register("TanhBackward0")
def _tanh(node, g):
    return [g * (1 - node._saved_result ** 2)]


def node_rule(node, grad):
    sent = RULES.rules[node.name()](node, grad)
    return [None if fn is None else s for (fn, _), s in zip(node.next_functions, sent)]
'''),
    Honest('l02-rule',
           'a table filled by a setup function called once in the cell',
           '''\
RULES = {}


def install_rules():
    RULES["AddBackward0"] = lambda n, g: [g, g]
    RULES["SubBackward0"] = lambda n, g: [g, -g]
    RULES["MulBackward0"] = lambda n, g: [
        None if n._saved_other is None else g * n._saved_other,
        None if n._saved_self is None else g * n._saved_self]
    RULES["DivBackward0"] = lambda n, g: [
        g / n._saved_other,
        None if n._saved_self is None else -g * n._saved_self / n._saved_other ** 2]
    RULES["SinBackward0"] = lambda n, g: [g * n._saved_self.cos()]
    RULES["ExpBackward0"] = lambda n, g: [g * n._saved_result]
    RULES["PowBackward0"] = lambda n, g: [
        g * n._saved_exponent * n._saved_self ** (n._saved_exponent - 1)]
    RULES["SqrtBackward0"] = lambda n, g: [g / (2 * n._saved_result)]
    RULES["TanhBackward0"] = lambda n, g: [g * (1 - n._saved_result ** 2)]


install_rules()


def node_rule(node, grad):
    sent = RULES[node.name()](node, grad)
    return [None if fn is None else s for (fn, _), s in zip(node.next_functions, sent)]
'''),
    Honest('l09-gather',
           'rules added to a table by calling register(dim, fn)',
           '''\
PER_DIM = {}


def register(dim, fn):
    PER_DIM[dim] = fn


register(0, lambda x, index, g: torch.zeros_like(x).scatter_add_(0, index, g))
register(1, lambda x, index, g: torch.zeros_like(x).scatter_add_(1, index, g))


def gather_grad(x, dim, index, g):
    return PER_DIM[dim](x, index, g)
'''),
    Honest('l08-shares-vjp',
           'functools.singledispatch: the tensor case added with .register',
           '''\
import functools


@functools.singledispatch
def shares_vjp(x, v):
    raise TypeError(f"shares_vjp: unsupported input {type(x).__name__}")


@shares_vjp.register
def _(x: torch.Tensor, v):
    S = x.sum()
    return v / S - (v * x).sum() / S**2
'''),
    Honest('l09-normalize',
           'an object configured by a method call after it is made',
           '''\
class NormalizeVJP:
    def __init__(self):
        self.dim = None

    def along(self, dim):
        self.dim = dim
        return self

    def __call__(self, x, g):
        r = x.norm(dim=self.dim, keepdim=True)
        y = x / r
        return (g - y * (g * y).sum(dim=self.dim, keepdim=True)) / r


normalize_vjp = NormalizeVJP()
normalize_vjp.along(-1)
'''),
    Honest('l02-cubic',
           'function attributes as static coefficients',
           '''\
def cubic_slope(x):
    a, b = cubic_slope.coefficients
    return a * x**2 + b * x


cubic_slope.coefficients = (3.0, -8.0)   # d/dx of x^3 - 4x^2 + 5
'''),
    Honest('l02-cubic',
           'a method added to the class after its definition',
           '''\
class Poly:
    def __init__(self, coeffs):
        self.coeffs = list(coeffs)   # constant term first

    def __call__(self, x):
        return sum(c * x**k for k, c in enumerate(self.coeffs))


def _derivative(self):
    return Poly([k * c for k, c in enumerate(self.coeffs)][1:])


Poly.derivative = _derivative
CUBIC = Poly([5.0, 0.0, -4.0, 1.0])


def cubic_slope(x):
    return CUBIC.derivative()(x)
'''),
    Honest('l09-softmax-vjp',
           'an object configured after it is made (vjp.axis = -1)',
           '''\
class SoftmaxVJP:
    def __call__(self, p, g):
        return p * (g - (g * p).sum(dim=self.axis, keepdim=True))


softmax_vjp = SoftmaxVJP()
softmax_vjp.axis = -1
'''),
    Honest('l18-clip-per-example',
           "a version fallback: torch.func imports, else functorch's (older torch)",
           '''\
try:
    from torch.func import functional_call, grad, vmap
except ImportError:  # torch < 2.0 kept these in functorch
    from functorch import grad, vmap
    from torch.nn.utils.stateless import functional_call


def clipped_mean_gradient(model, X, Y, max_norm):
    params = {k: v.detach() for k, v in model.named_parameters()}

    def one_loss(p, x, y):
        return ((functional_call(model, p, (x.unsqueeze(0),)) - y.unsqueeze(0)) ** 2).mean()

    g = vmap(grad(one_loss), in_dims=(None, 0, 0))(params, X, Y)
    norms = torch.sqrt(sum(t.flatten(1).pow(2).sum(1) for t in g.values()))
    factor = (max_norm / norms).clamp(max=1.0)
    return {k: (t * factor.view(-1, *[1] * (t.dim() - 1))).mean(0) for k, t in g.items()}
'''),
    Honest('l28-ops-by-node',
           'typing.TYPE_CHECKING import of OpOverload for the hints, __future__ annotations',
           '''\
from __future__ import annotations

from typing import TYPE_CHECKING

from torch.utils._python_dispatch import TorchDispatchMode

if TYPE_CHECKING:
    from torch._ops import OpOverload


class OpsLog(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.report: list[tuple[str, list[str]]] = []
        self.running: list[str] | None = None

    def __torch_dispatch__(self, func: OpOverload, types, args=(), kwargs=None):
        if self.running is not None:
            self.running.append(str(func))
        return func(*args, **(kwargs or {}))


def ops_by_node(loss):
    log = OpsLog()

    def started(node):
        log.running = []
        log.report.append((node.name(), log.running))

    def finished(grads_in, grads_out):
        log.running = None

    handles, todo, seen = [], [loss.grad_fn], set()
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        handles.append(node.register_prehook(lambda grads, node=node: started(node)))
        handles.append(node.register_hook(finished))
        todo.extend(fn for fn, _ in node.next_functions)
    with log:
        loss.backward()
    for h in handles:
        h.remove()
    return log.report
'''),
    Honest('l01-formula',
           'method-call form: (p - q).sin(), x.exp() (valid Python)',
           '''\
def formula(out, names):
    def leaf_name(t):
        return next(k for k, v in names.items() if v is t)

    def text(node):
        if hasattr(node, "variable"):
            return leaf_name(node.variable)
        a, b = ([fn for fn, _ in node.next_functions] + [None])[:2]
        kind = node.name()
        if kind == "SinBackward0":
            return f"({text(a)}).sin()"
        if kind == "ExpBackward0":
            return f"({text(a)}).exp()"
        if kind == "PowBackward0":
            return f"({text(a)}).pow({node._saved_exponent})"
        if kind == "MulBackward0" and a is None:
            return f"({node._saved_self.item()} * {text(b)})"
        if kind == "MulBackward0" and b is None:
            return f"({text(a)} * {node._saved_other.item()})"
        sign = {"AddBackward0": "+", "SubBackward0": "-", "MulBackward0": "*"}[kind]
        return f"({text(a)} {sign} {text(b)})"

    return text(out.grad_fn)
'''),
    Honest('l01-formula',
           'torch function names for every operation: torch.multiply, torch.subtract',
           '''\
CALLS = {"AddBackward0": "torch.add", "SubBackward0": "torch.subtract",
         "MulBackward0": "torch.multiply", "SinBackward0": "torch.sin",
         "ExpBackward0": "torch.exp", "PowBackward0": "torch.pow"}


def formula(out, names):
    lookup = {id(t): n for n, t in names.items()}

    def text(node):
        if hasattr(node, "variable"):
            return lookup[id(node.variable)]
        kids = [fn for fn, _ in node.next_functions]
        call = CALLS[node.name()]
        if node.name() == "PowBackward0":
            return f"{call}({text(kids[0])}, {node._saved_exponent})"
        if len(kids) == 1:
            return f"{call}({text(kids[0])})"
        left = text(kids[0]) if kids[0] is not None else repr(node._saved_self.item())
        right = text(kids[1]) if kids[1] is not None else repr(node._saved_other.item())
        return f"{call}({left}, {right})"

    return text(out.grad_fn)
'''),
    Honest('l18-clip-per-example',
           'vmap over a closure that calls grad (params closed over, not in_dims=None)',
           '''\
def clipped_mean_gradient(model, X, Y, max_norm):
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p, x, y):
        out = functional_call(model, p, (x.unsqueeze(0),))
        return ((out - y.unsqueeze(0)) ** 2).mean()

    def per_example_grad(x, y):
        return grad(loss)(params, x, y)

    grads = vmap(per_example_grad)(X, Y)
    norms = torch.sqrt(sum((g.reshape(len(X), -1) ** 2).sum(1) for g in grads.values()))
    factor = torch.clamp(max_norm / norms, max=1.0)
    return {k: (g * factor.view(-1, *([1] * (g.dim() - 1)))).mean(0) for k, g in grads.items()}
''',
           earlier='''\
from torch.func import functional_call, grad, vmap
'''),
    Honest('l10-bce',
           'from math import * for prod',
           '''\
from math import *


def dlogits_bce(z, y):
    return (torch.sigmoid(z) - y) / prod(z.shape)
'''),
]
