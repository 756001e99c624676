"""Shortcuts for the exercises of 20-views-and-in-place.ipynb; each must fail.

Same format as tests/wrong_answers (see tests/lessons/test_exercises.py). Exercise 1 asks
for gradients worked out by hand, so its shortcuts get them without working them out: the
lesson's own `two_writes` differentiated by autograd with grad mode switched back on, by
central differences, by the package's estimate, and a table of the visible check's answers.
Exercise 2 asks for an engine's views, so its shortcuts hand the work to torch: autograd
inside the write's rule, and the check's own engine imported from the package.
"""

from cheats.builders import autograd_back_on, finite_differences, lookup, numerical_grad
from wrong_answers.lesson20 import engine

WINDOWS = "window_grads(x, a, b, i, j, g)"
# The scalar whose gradient each output is, as a function of t, and where it is taken.
OUTPUTS = [("(two_writes(t, a, b, i, j) * g).sum()", "x"),
           ("(two_writes(x, t, b, i, j) * g).sum()", "a"),
           ("(two_writes(x, a, t, i, j) * g).sum()", "b")]

# The lesson's solution with the write's rule left to torch: it records the same write on
# tensors of its own and differentiates it.
AUTOGRAD_RULE = engine((
    "        to_old = g.clone()\n"
    "        to_b = part(to_old).clone()\n"
    "        if overwrite:\n"
    "            part(to_old).zero_()\n"
    "        return to_old, to_b\n",
    "        with torch.enable_grad():\n"
    "            old = torch.zeros_like(owner.data, requires_grad=True)\n"
    "            new = torch.zeros_like(b.data, requires_grad=True)\n"
    "            out = old.clone()\n"
    "            (part(out).copy_ if overwrite else part(out).add_)(new)\n"
    "            return torch.autograd.grad(out, (old, new), g)\n"))

# The check's own engine (the one it names slips with), a slip key of its own added.
PACKAGE_ENGINE = '''from backproplab.course.exercises.lesson20 import engine_source

engine_source.SLIPS["none"] = "no slip"
view, grad_fn, add_, copy_ = engine_source.solution(globals(), "none")
'''

CHEATS = {
    "l20-two-writes": [
        (autograd_back_on(WINDOWS, OUTPUTS), "enable_grad"),
        (finite_differences(WINDOWS, OUTPUTS), "numerical estimate"),
        (numerical_grad(WINDOWS, OUTPUTS), "numerical_grad"),
        (lookup("l20-two-writes", WINDOWS), "raised KeyError"),
    ],
    "l20-engine-views": [
        (AUTOGRAD_RULE, "called torch.autograd.grad"),
        (PACKAGE_ENGINE, "backproplab's own tools"),
    ],
}
