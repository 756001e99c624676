"""Plausible wrong answers for the exercises of 28-the-dispatcher.ipynb.

Each fragment is part of the message only the right diagnosis gives. The dispatch mode: a
node's list that never ends (the engine's sum goes to the node before), one that starts when
the node before ends (backward()'s ones_like and the engine's sum go to the next node), the
silent nodes left out, a dict keyed by the node's name, backward run outside the mode, the
op's overload or namespace dropped, tensors kept alive by the mode (AccumulateGrad copies),
a dict returned, the hooks left on the graph (the report or a copy of it returned).
cumprod: the textbook division (NaN at zeros), the NaN replaced by 0, the sum the wrong
way, x_k left in, one term only, dim moved back the wrong way. atan2: numerators swapped,
a sign, the distance for its square, the broadcast not summed.
"""

# The walk over every node of the graph, once each: {hooks} registers its hooks.
WALK = """    handles, todo, seen = [], [loss.grad_fn], set()
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        {hooks}todo.extend(fn for fn, _ in node.next_functions)
"""
PRE = "handles.append(node.register_prehook(lambda grads, node=node: started(node)))\n        "

MODE = '''from torch.utils._python_dispatch import TorchDispatchMode


class OpsByNode(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.report = []
        self.running = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.running is not None:
            self.running.append({op})
        {call}


def ops_by_node(loss):
    mode = OpsByNode()

    def started(node):
        mode.running = []
        mode.report.append((node.name(), mode.running))

    def finished():
        mode.running = None

{walk}    {run}
    for handle in handles:
        handle.remove()
    return {report}
'''
POST = "handles.append(node.register_hook(lambda grads_in, grads_out: finished()))\n        "
RUN = "with mode:\n        loss.backward()"


CALL = "return func(*args, **(kwargs or {}))"


def _mode(op="str(func)", call=CALL, post=POST, run=RUN, report="mode.report"):
    return MODE.format(op=op, call=call, run=run, report=report,
                       walk=WALK.format(hooks=PRE + post))


# Ops gathered since the node before finished, handed to a node when it finishes.
FLUSHED = '''from torch.utils._python_dispatch import TorchDispatchMode


class Pending(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.pending = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.pending.append(str(func))
        return func(*args, **(kwargs or {}))


def ops_by_node(loss):
    mode, report = Pending(), []

    def finished(node):
        report.append((node.name(), mode.pending))
        mode.pending = []

{walk}    with mode:
        loss.backward()
    for handle in handles:
        handle.remove()
    return report
'''.replace("{walk}", WALK.format(
    hooks="handles.append(node.register_hook(lambda gi, go, node=node: finished(node)))\n        "))

CUMPROD = "cumprod_backward(x, dim, g)"
ATAN2 = "atan2_backward(y, x, g)"
DIVIDED = "(g * torch.cumprod(x, dim)).flip(dim).cumsum(dim).flip(dim) / x"


def _fn(signature: str, body: str) -> str:
    """A whole solution cell: the function with the given body (indented lines)."""
    return f"def {signature}:\n" + "".join(f"    {line}\n" for line in body.strip("\n").split("\n"))


WRONG = {
    "l28-predict-grad-fn": [
        ("grad_fn_guess = 'MulBackward0'\n", "not quite"),  # the node is there at once
    ],
    "l28-ops-by-node": [
        (_mode(post=""), "went to the node that ran before it"),
        (FLUSHED, "what ran before a node started went to that node"),
        (_mode(report="[(name, ops) for name, ops in mode.report if ops]"),
         "nodes that run no op are missing"),
        (_mode(report="list({name: ops for name, ops in mode.report}.items())"),
         "each node name appears once"),
        (_mode(report="[(n, [o for m, os in mode.report if m == n for o in os]) "
                      "for n in dict(mode.report)]"), "each node name appears once"),
        (_mode(run="loss.backward()"), "every list of ops is empty"),
        (_mode(op="str(func.overloadpacket)"), "each op lost its overload"),
        (_mode(op="func.__name__"), "each op lost its namespace"),
        (_mode(call="out = func(*args, **(kwargs or {}))\n        "
                    "self.results = getattr(self, 'results', []) + [out]\n        return out"),
         "AccumulateGrad copied the gradient"),
        (_mode(report="dict(mode.report)"), "returned a dict"),
        # the hooks never removed: a later backward through a leaf adds to the report
        (_mode().replace("    for handle in handles:\n        handle.remove()\n", ""),
         "hooks were left on the graph"),
        # the same, a copy of the report returned: the later backward still calls its hooks
        (_mode(report="list(mode.report)").replace(
            "    for handle in handles:\n        handle.remove()\n", ""),
         "hooks were left on the graph"),
    ],
    "l28-cumprod": [
        (_fn(CUMPROD, f"return {DIVIDED}"), "NaN where it is"),
        (_fn(CUMPROD, f"return torch.nan_to_num({DIVIDED}, nan=0.0, posinf=0.0, neginf=0.0)"),
         "at the first zero of a slice"),
        (_fn(CUMPROD, f"return torch.where(x == 0, 0.0, {DIVIDED})"),
         "at the first zero of a slice"),
        (_fn(CUMPROD, "return (g * torch.cumprod(x, dim)).cumsum(dim) / x"), "the wrong way"),
        (_fn(CUMPROD, "return (g * torch.cumprod(x, dim)).flip(dim).cumsum(dim).flip(dim)"),
         "x_k itself was left in"),
        (_fn(CUMPROD, "return g * torch.cumprod(x, dim) / x"), "only y_k's own term"),
        (_fn(CUMPROD, "return torch.zeros_like(x)"), "hard-coded"),
        # dim moved to the end and back, but "back" is the same move again
        (_fn(CUMPROD, "x, g = x.movedim(dim, -1), g.movedim(dim, -1)\n"
                      "n = x.shape[-1]\n"
                      "others = x.unsqueeze(-2).repeat_interleave(n, dim=-2)\n"
                      "others.diagonal(dim1=-2, dim2=-1).fill_(1.0)\n"
                      "later = torch.ones(n, n, dtype=torch.bool).triu()\n"
                      "dx = (others.cumprod(dim=-1) * later * g.unsqueeze(-2)).sum(dim=-1)\n"
                      "return dx.movedim(dim, -1)"), "moved back with movedim(dim, -1)"),
    ],
    "l28-atan2": [
        (_fn(ATAN2, "r2 = x * x + y * y\nreturn -g * y / r2, (g * x / r2).sum_to_size(x.shape)"),
         "numerators are swapped"),
        (_fn(ATAN2, "r2 = x * x + y * y\nreturn g * x / r2, (g * y / r2).sum_to_size(x.shape)"),
         "dx has the wrong sign"),
        (_fn(ATAN2, "r = torch.sqrt(x * x + y * y)\n"
                    "return g * x / r, (-g * y / r).sum_to_size(x.shape)"),
         "the distance, not its square"),
        (_fn(ATAN2, "r2 = x * x + y * y\nreturn g * x / r2, -g * y / r2"),
         "forgot to sum over dimension 0"),
    ],
}
