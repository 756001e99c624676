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
