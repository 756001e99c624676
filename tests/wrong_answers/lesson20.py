"""Plausible wrong answers for the exercises of 20-views-and-in-place.ipynb.

Exercise 1 (two writes, by hand): each fragment is part of the message only its slip gets:
the backward steps of the second write in the other order, the overwrite that still passes
g on, b's gradient taken with x's values, the read's path left out, the scaling left out.
Exercise 2 (views for an engine): the lesson's solution with one piece made otherwise, each
named by the slip it is or by the case where it parts from torch.
"""


def _fn(signature: str, body: str) -> str:
    """A whole solution cell: the function with the given body (indented lines)."""
    return f"def {signature}:\n" + "".join(f"    {line}\n" for line in body.strip("\n").split("\n"))


WINDOWS = "window_grads(x, a, b, i, j, g)"

# window_grads with its steps as parameters (the defaults are the right answer).
WINDOWS_BODY = """
k = len(a)
first, second = slice(i, i + k), slice(j, j + k)
after_first = g.clone()
{steps}
dx = after_first.clone()
{scale}
return dx, after_first[first] * x[first], g[second] * {read_values}
"""
RIGHT_STEPS = "after_first[second] = 0\nafter_first[first] += b * g[second]"


def _windows(steps=RIGHT_STEPS, scale="dx[first] *= a", read_values="x[first] * a"):
    return _fn(WINDOWS, WINDOWS_BODY.format(steps=steps, scale=scale, read_values=read_values))


ENGINE = '''def view(a, f):
    v = Var(f(a.data))
    v.version = a.version
    v.base = a if a.base is None else a.base
    v.view_of = f if a.base is None else (lambda t: f(a.view_of(t)))
    v.made_at = None
    return v


def grad_fn(a):
    if a.base is None:
        return a.node
    if a.made_at != a.version.value:
        base_node = grad_fn(a.base)

        def rule(g):
            full = torch.zeros_like(a.base.data)
            a.view_of(full).copy_(g)
            return (full,)

        a.node = None if base_node is None else Node("AsStridedBackward", (base_node,), rule)
        a.made_at = a.version.value
    return a.node


def write_(a, b, overwrite):
    owner = a if a.base is None else a.base
    if owner.node is not None and owner.node.name == "AccumulateGrad":
        raise RuntimeError("a leaf that requires grad, or a view of one, is written in place")
    old_node, b_node = grad_fn(owner), grad_fn(b)
    if overwrite:
        a.data.copy_(b.data)
    else:
        a.data.add_(b.data)
    a.version.value += 1
    if old_node is None and b_node is None:
        return a
    part = (lambda t: t) if a.base is None else a.view_of

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
'''


def engine(*changes: tuple[str, str]) -> str:
    """The lesson's solution cell with each (old, new) piece replaced; each must be there."""
    source = ENGINE
    for old, new in changes:
        assert old in source, old
        source = source.replace(old, new)
    return source


WRONG = {
    "l20-predict-views": [
        ("view_guess = [1, 3, 4, 6, 7]\n", "not quite"),  # reshape of the transpose, a view
        ("view_guess = [1, 3, 7]\n", "not quite"),  # expand taken for a copy
        ("view_guess = [3, 7]\n", "not quite"),
    ],
    "l20-predict-duplicates": [
        ("dup_guess = [0.0, 2.0]\n", "not quite"),  # only the value that landed
        ("dup_guess = [1.0, 1.0]\n", "not quite"),  # g[1] split between the two
        ("dup_guess = [2.0, 0.0]\n", "not quite"),
    ],
    "l20-two-writes": [
        (_windows(steps="after_first[first] += b * g[second]\nafter_first[second] = 0"),
         "the two steps for the second write are in the other order"),
        (_windows(steps="after_first[first] += b * g[second]"),
         "the overwrite still passes g on"),
        (_windows(read_values="x[first]"), "db was taken with x's values"),
        (_windows(steps="after_first[second] = 0"), "the read's path is missing"),
        (_windows(scale="pass"), "dx leaves out the scaling"),
        # The gradient read off the result's window instead of g's: g[first] for the read.
        (_windows(steps="after_first[second] = 0\nafter_first[first] += b * g[first]"),
         "mismatch"),
        (_fn(WINDOWS, "return g, g"), "returned 2 value(s); expected 3"),
        (_fn(WINDOWS, "zero = torch.zeros_like(x)\nreturn zero, zero[:len(a)], zero[:len(a)]"),
         "hard-coded"),
    ],
    "l20-engine-views": [
        (engine(("    v.version = a.version\n", "")), "a version counter of its own"),
        (engine(("    a.version.value += 1\n", "")), "never move the version counter"),
        (engine(("    owner.node = Node(", "    if a.base is None:\n        owner.node = Node(")),
         "leaves the base's history as it was"),
        (engine(("if a.made_at != a.version.value:", "if a.made_at is None:")),
         "a view keeps the node it was made with"),
        (engine(("            part(to_old).zero_()", "            pass")),
         "copy_ passes the gradient on to the values it overwrote"),
        (engine(("    if owner.node is not None and owner.node",
                 "    if a.node is not None and a.node")),
         "a write into a view of a leaf that requires grad runs in your engine"),
        # No refusal at all: the first case that needs one says what torch does.
        (engine(('        raise RuntimeError("a leaf', '        print("a leaf')),
         "raised RuntimeError in step 2, add_, yours ran"),
        # The old node changed in place: z, recorded before the write, sees it too.
        (engine(("    owner.node = Node(\"CopySlices\", (old_node, b_node), rule)\n",
                 "    if old_node is None or not old_node.inputs:\n"
                 "        owner.node = Node(\"CopySlices\", (old_node, b_node), rule)\n"
                 "    else:\n"
                 "        kept = Node(old_node.name, old_node.inputs, old_node.rule)\n"
                 "        old_node.name, old_node.inputs = \"CopySlices\", (kept, b_node)\n"
                 "        old_node.rule = rule\n")),
         "A node recorded before the write keeps its edge to the base's old node"),
        # A view of a view read from its own parent's data, not from the base's.
        (engine(("    v.view_of = f if a.base is None else (lambda t: f(a.view_of(t)))\n",
                 "    v.view_of = f\n")),
         "A view of a view shares the first base's memory"),
        # The refusal raised as another kind of error.
        (engine(('        raise RuntimeError("a leaf', '        raise ValueError("a leaf')),
         "raised ValueError"),
        # The overwrite's zeros only under a view: copy_ into a whole Var passes g on.
        (engine(("        if overwrite:\n            part(to_old).zero_()",
                 "        if overwrite and a.base is not None:\n            part(to_old).zero_()")),
         "An overwrite sends nothing to the old values it covers, here all of them"),
        # The early return moved above the write: with no gradient needed, nothing written.
        (engine(("    old_node, b_node = grad_fn(owner), grad_fn(b)\n",
                 "    old_node, b_node = grad_fn(owner), grad_fn(b)\n"
                 "    if old_node is None and b_node is None:\n"
                 "        return a\n")),
         "a write where neither the memory nor b needs a gradient never happens"),
        # A new tensor where the memory should change: the base never sees the write.
        (engine(("        a.data.add_(b.data)\n", "        a.data = a.data + b.data\n")),
         "the value backward started from"),
        # No record when b needs no gradient, though the base has a history.
        (engine(("    if old_node is None and b_node is None:\n", "    if b_node is None:\n")),
         "a write of a constant b is never recorded"),
        # The refusal after the data write and the counter's move.
        (engine(("    if owner.node is not None and owner.node.name == \"AccumulateGrad\":\n"
                 "        raise RuntimeError(\"a leaf that requires grad, or a view of one, is "
                 "written in place\")\n", ""),
                ("    a.version.value += 1\n",
                 "    a.version.value += 1\n"
                 "    if old_node is not None and old_node.name == \"AccumulateGrad\":\n"
                 "        raise RuntimeError(\"a leaf that requires grad is written in place\")\n")),
         "refuses a write into a leaf that requires grad only after writing"),
    ],
}
