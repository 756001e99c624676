"""Shortcuts for the exercises of 91-views-and-in-place.ipynb; each must fail.

Same format as tests/wrong_answers (see tests/lessons/test_exercises.py). Exercise 1 asks
for gradients worked out by hand, so its shortcuts get them without working them out: the
lesson's own `two_writes` differentiated by autograd with grad mode switched back on, by
central differences, by the package's estimate, and a table of the visible check's answers.
Exercise 2 asks for an engine's views, so its shortcuts hand the work to torch: autograd
inside the write's rule, and the check's own engine imported from the package.
"""

from cheats.builders import autograd_back_on, finite_differences, lookup, numerical_grad

WINDOWS = "window_grads(x, a, b, i, j, g)"
# The scalar whose gradient each output is, as a function of t, and where it is taken.
OUTPUTS = [("(two_writes(t, a, b, i, j) * g).sum()", "x"),
           ("(two_writes(x, t, b, i, j) * g).sum()", "a"),
           ("(two_writes(x, a, t, i, j) * g).sum()", "b")]

# The four functions of the lesson's solution, with the write's rule left to torch.
AUTOGRAD_RULE = '''def view(a, f):
    v = Var(f(a.data))
    v.version, v.base = a.version, a if a.base is None else a.base
    v.view_of = f if a.base is None else (lambda t: f(a.view_of(t)))
    v.made_at = None
    return v


def grad_fn(a):
    if a.base is None:
        return a.node
    if a.made_at != a.version.value:
        base_node = grad_fn(a.base)
        a.node = None if base_node is None else Node(
            "AsStridedBackward", (base_node,),
            lambda g: (a.view_of(torch.zeros_like(a.base.data)).copy_(g)._base,))
        a.made_at = a.version.value
    return a.node


def write_(a, b, overwrite):
    owner = a if a.base is None else a.base
    if owner.node is not None and owner.node.name == "AccumulateGrad":
        raise RuntimeError("a leaf that requires grad is written in place")
    old_node, b_node = grad_fn(owner), grad_fn(b)
    part = (lambda t: t) if a.base is None else a.view_of
    (part(owner.data).copy_ if overwrite else part(owner.data).add_)(b.data)
    a.version.value += 1

    def rule(g):  # torch records the same write and differentiates it
        with torch.enable_grad():
            old = torch.zeros_like(owner.data, requires_grad=True)
            new = torch.zeros_like(b.data, requires_grad=True)
            out = old.clone()
            (part(out).copy_ if overwrite else part(out).add_)(new)
            return torch.autograd.grad(out, (old, new), g)

    if old_node is not None or b_node is not None:
        owner.node = Node("CopySlices", (old_node, b_node), rule)
    return a


def add_(a, b):
    return write_(a, b, overwrite=False)


def copy_(a, b):
    return write_(a, b, overwrite=True)
'''

# The check's own engine (the one it names slips with), a slip key of its own added.
PACKAGE_ENGINE = '''from backproplab.course.exercises.lesson91 import slips

slips.SLIPS["none"] = "no slip"
view, grad_fn, add_, copy_ = slips.solution(globals(), "none")
'''

CHEATS = {
    "l91-two-writes": [
        (autograd_back_on(WINDOWS, OUTPUTS), "enable_grad"),
        (finite_differences(WINDOWS, OUTPUTS), "numerical estimate"),
        (numerical_grad(WINDOWS, OUTPUTS), "numerical_grad"),
        (lookup("l91-two-writes", WINDOWS), "raised KeyError"),
    ],
    "l91-engine-views": [
        (AUTOGRAD_RULE, "called torch.autograd.grad"),
        (PACKAGE_ENGINE, "backproplab's own tools"),
    ],
}
