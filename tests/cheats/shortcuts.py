"""Shortcuts around a by-hand exercise, one of each kind a determined student finds.

Each is written for *any* by-hand exercise of the registry, not for one
lesson: its source defines ``answer(*args)``, which takes the exercise's
inputs whatever they are. Where a kind needs something to differentiate (finite
differences, autograd in a thread), it uses ``forward``, a scalar function of the
inputs defined in `PRELUDE` (a stand-in for the exercise's forward pass: what
the check must notice is the method, whatever it is applied to), or the
exercise's own reference, which the table shortcut reads through the
package as a student could.

Entries: ``Shortcut(kind, source, check, audit)``: the check must refuse the
answer with a message holding ``check``; the audit, reading ``PRELUDE +
source`` in a by-hand answer cell, must list a finding holding ``audit`` (None
where nothing the answer's definitions use is refused and it fails only when it
runs: a numerical estimate, a table that the definitions leave empty).
``backproplab grade`` gives every one of them 0 points.
``{key}`` in a source is the exercise's id. tests/course/test_allowlist.py runs
every one against every by-hand exercise.
"""

from __future__ import annotations

from typing import NamedTuple


class Shortcut(NamedTuple):
    kind: str
    source: str
    check: str
    audit: str | None


# Defined in the answer cell, as a student's own helpers would be.
PRELUDE = '''\
def inputs(args):
    """The floating inputs' positions; the tensor inputs' when none is floating (complex)."""
    found = [i for i, a in enumerate(args) if torch.is_tensor(a) and a.is_floating_point()]
    return found or [i for i, a in enumerate(args) if torch.is_tensor(a)]


def forward(*args):
    """A scalar function of the inputs: the thing a shortcut differentiates."""
    return sum((args[i].sin() * args[i]).sum() for i in inputs(args))


def first_float(args):
    return inputs(args)[0]


'''

# Finite differences: each stencil written as a student's helper of its own, applied
# entry by entry to the first floating input.
_STENCIL = '''\
def answer(*args):
    k = first_float(args)

    def at(t):
        return forward(*args[:k], t, *args[k + 1:])
    return estimate(at, args[k])


def estimate(f, x):
    grad = torch.zeros_like(x)
    for i in range(x.numel()):
        e = torch.zeros_like(x)
        e.view(-1)[i] = 1.0
        grad.view(-1)[i] = {formula}
    return grad
'''


def _stencil(formula: str) -> str:
    return _STENCIL.replace("{formula}", formula)


CENTRAL = _stencil("(f(x + 1e-5 * e) - f(x - 1e-5 * e)) / 2e-5")
# Exact where the function is linear in the input: no error left for precision to show.
CENTRAL_H1 = _stencil("(f(x + e) - f(x - e)) / 2")
FORWARD_H1 = _stencil("f(x + e) - f(x)")
FIVE_POINT = _stencil("(-f(x + 2e-3 * e) + 8 * f(x + 1e-3 * e) - 8 * f(x - 1e-3 * e) "
                      "+ f(x - 2e-3 * e)) / 12e-3")
SEVEN_POINT = _stencil("(f(x + 3e-2 * e) - 9 * f(x + 2e-2 * e) + 45 * f(x + 1e-2 * e) "
                       "- 45 * f(x - 1e-2 * e) + 9 * f(x - 2e-2 * e) - f(x - 3e-2 * e)) / 0.6")
NINE_POINT = _stencil("(-3 * f(x + 4e-2 * e) + 32 * f(x + 3e-2 * e) - 168 * f(x + 2e-2 * e) "
                      "+ 672 * f(x + 1e-2 * e) - 672 * f(x - 1e-2 * e) + 168 * f(x - 2e-2 * e) "
                      "- 32 * f(x - 3e-2 * e) + 3 * f(x - 4e-2 * e)) / 8.4")
RICHARDSON = _stencil("(4 * (f(x + 5e-4 * e) - f(x - 5e-4 * e)) / 1e-3 "
                      "- (f(x + 1e-3 * e) - f(x - 1e-3 * e)) / 2e-3) / 3")
RIDDERS = '''\
def answer(*args):
    k = first_float(args)

    def at(t):
        return forward(*args[:k], t, *args[k + 1:])
    x = args[k]
    grad = torch.zeros_like(x)
    for i in range(x.numel()):
        e = torch.zeros_like(x)
        e.view(-1)[i] = 1.0
        grad.view(-1)[i] = ridders(at, x, e)
    return grad


def ridders(f, x, e):
    h, rows = 0.1, []
    for _ in range(4):
        row = [(f(x + h * e) - f(x - h * e)) / (2 * h)]
        for j, previous in enumerate(rows[-1] if rows else []):
            factor = 4.0 ** (j + 1)
            row.append((factor * row[j] - previous) / (factor - 1))
        rows.append(row)
        h = h / 2
    return rows[-1][-1]
'''

SHORTCUTS = [
    Shortcut("the check's reference from the caller's frames (sys._getframe)", '''\
def answer(*args):
    import sys
    frame = sys._getframe(1)
    while frame is not None and "reference" not in frame.f_locals:
        frame = frame.f_back
    return frame.f_locals["reference"](*args)
''', "sys", "import sys"),
    Shortcut("the check's reference from the caller's frames (inspect.stack)", '''\
import inspect


def answer(*args):
    for info in inspect.stack():
        if "reference" in info.frame.f_locals:
            return info.frame.f_locals["reference"](*args)
''', "inspect", "import inspect"),
    Shortcut("the check's reference from gc.get_objects()", '''\
import gc


def answer(*args):
    for obj in gc.get_objects():
        if getattr(obj, "__name__", "") == "reference":
            return obj(*args)
''', "gc", "import gc"),
    Shortcut("forward-mode AD through a private dual-number API", '''\
def answer(*args):
    k = first_float(args)
    x = args[k]
    grad = torch.zeros_like(x)
    level = torch._C._enter_dual_level()
    for i in range(x.numel()):
        e = torch.zeros_like(x)
        e.view(-1)[i] = 1.0
        dual = torch._C._make_dual(x, e, level=level)
        out = forward(*args[:k], dual, *args[k + 1:])
        grad.view(-1)[i] = torch._C._unpack_dual(out, level=level)[1]
    torch._C._exit_dual_level(level=level)
    return grad
''', "torch._C", "torch._C._enter_dual_level"),
    Shortcut("forward-mode AD through forward_ad captured at import", '''\
DUAL = torch.autograd.forward_ad


def answer(*args):
    k = first_float(args)
    with DUAL.dual_level():
        x = DUAL.make_dual(args[k], torch.ones_like(args[k]))
        out = forward(*args[:k], x, *args[k + 1:])
        return DUAL.unpack_dual(out).tangent
''', "torch.autograd", "torch.autograd.forward_ad"),
    Shortcut("autograd in a thread that calls the engine", '''\
import threading
from torch.autograd.variable import Variable


def answer(*args):
    out = []

    def work():
        x = args[0].detach().requires_grad_()
        y = forward(x, *args[1:])
        out.append(Variable._execution_engine.run_backward(
            (y,), (torch.ones_like(y),), False, False, (x,), False, False)[0])
    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    return out[0]
''', "threading", "import threading"),
    Shortcut("autograd in a thread that calls the backward nodes", '''\
from threading import Thread


def answer(*args):
    out = []

    def work():
        with torch.enable_grad():
            x = args[0].detach().requires_grad_()
            y = forward(x, *args[1:])
            out.append(y.grad_fn(torch.ones_like(y)))
    worker = Thread(target=work)
    worker.start()
    worker.join()
    return out[0]
''', "threading", "from threading import Thread"),
    Shortcut("autograd in a process pool", '''\
from concurrent.futures import ProcessPoolExecutor


def answer(*args):
    with ProcessPoolExecutor(1) as pool:
        return pool.submit(torch.func.grad(forward), *args).result()
''', "concurrent", "from concurrent.futures"),
    Shortcut("autograd in a multiprocessing spawn", '''\
import multiprocessing


def answer(*args):
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(torch.func.grad(forward), args)
''', "multiprocessing", "import multiprocessing"),
    Shortcut("autograd in a subprocess of the interpreter", '''\
def answer(*args):
    import pickle
    import subprocess
    import sys
    code = "import pickle, sys, torch; a = pickle.load(sys.stdin.buffer); ..."
    done = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(args),
                          capture_output=True, check=True)
    return pickle.loads(done.stdout)
''', "subprocess", "import subprocess"),
    Shortcut("symbolic differentiation with sympy", '''\
def answer(*args):
    import sympy
    t = sympy.Symbol("t")
    slope = sympy.lambdify(t, sympy.diff(sympy.sin(t) * t, t))
    x = args[first_float(args)]
    return torch.tensor([slope(v) for v in x.reshape(-1).tolist()]).reshape(x.shape)
''', "sympy", "import sympy"),
    Shortcut("finite differences, central", CENTRAL, "numerical estimate", None),
    Shortcut("finite differences, central with h = 1 (exact on a linear step)", CENTRAL_H1,
             "numerical estimate", None),
    Shortcut("finite differences, one-sided with h = 1", FORWARD_H1, "numerical estimate",
             None),
    Shortcut("finite differences, 5-point stencil", FIVE_POINT, "numerical estimate",
             None),
    Shortcut("finite differences, 7-point stencil", SEVEN_POINT, "numerical estimate",
             None),
    Shortcut("finite differences, 9-point stencil", NINE_POINT, "numerical estimate",
             None),
    Shortcut("finite differences, Richardson extrapolation", RICHARDSON, "numerical estimate",
             None),
    Shortcut("finite differences, Ridders extrapolation", RIDDERS, "numerical estimate",
             None),
    Shortcut("finite differences at high precision (mpmath)", '''\
def answer(*args):
    import mpmath
    mpmath.mp.dps = 50
    x = args[first_float(args)]
    slopes = [float(mpmath.diff(lambda t: mpmath.sin(t) * t, v)) for v in x.reshape(-1).tolist()]
    return torch.tensor(slopes, dtype=x.dtype).reshape(x.shape)
''', "mpmath", "import mpmath"),
    Shortcut("finite differences in long double", '''\
import numpy as np


def answer(*args):
    x = args[first_float(args)]
    v = np.array(x.reshape(-1).tolist(), dtype=np.longdouble)
    h = np.longdouble(1e-7)
    slope = (np.sin(v + h) * (v + h) - np.sin(v - h) * (v - h)) / (2 * h)
    return torch.tensor(slope.astype(float).tolist(), dtype=x.dtype).reshape(x.shape)
''', "numpy", "import numpy"),
    Shortcut("complex step through numpy", '''\
def answer(*args):
    import numpy
    x = args[first_float(args)]
    v = numpy.array(x.reshape(-1).tolist()) + 1e-20j
    slope = (numpy.sin(v) * v).imag / 1e-20
    return torch.tensor(slope.tolist(), dtype=x.dtype).reshape(x.shape)
''', "numpy", "import numpy"),
    Shortcut("torch's backward decompositions called directly", '''\
def answer(*args):
    x = args[first_float(args)]
    return torch._decomp.decompositions.tanh_backward(torch.ones_like(x), torch.tanh(x))
''', "torch._decomp", "torch._decomp"),
    Shortcut("torch's backward kernels called from a thread", '''\
import threading


def answer(*args):
    x = args[first_float(args)]
    out = []
    worker = threading.Thread(target=lambda: out.append(
        torch.ops.aten.tanh_backward(torch.ones_like(x), torch.tanh(x))))
    worker.start()
    worker.join()
    return out[0]
''', "threading", "import threading"),
    Shortcut("the watcher switched off inside the answer (sys.setprofile)", '''\
import sys


def answer(*args):
    sys.setprofile(None)
    with torch.enable_grad():
        x = args[0].detach().requires_grad_()
        (grad,) = torch.autograd.grad(forward(x, *args[1:]), x)
    return grad
''', "sys", "import sys"),
    Shortcut("the watcher switched off with grad mode's original, captured at import", '''\
SWITCH = torch._C._set_grad_enabled


def answer(*args):
    SWITCH(True)
    x = args[0].detach().requires_grad_()
    y = forward(x, *args[1:])
    grad = y.grad_fn(torch.ones_like(y))
    SWITCH(False)
    return grad
''', "SWITCH", "torch._C._set_grad_enabled"),
    Shortcut("the watcher switched off with autograd's engine, captured at import", '''\
from torch.autograd.variable import Variable

ENGINE = Variable._execution_engine


def answer(*args):
    watched = Variable._execution_engine
    Variable._execution_engine = ENGINE
    try:
        x = args[0].detach().requires_grad_()
        return torch.autograd.grad(forward(x, *args[1:]), x)[0]
    finally:
        Variable._execution_engine = watched
''', "_execution_engine", "from torch.autograd.variable"),
    Shortcut("a backward graph traced once with make_fx, then replayed", '''\
from torch.fx.experimental.proxy_tensor import make_fx

REPLAY = make_fx(lambda t: torch.func.grad(lambda u: (u.sin() * u).sum())(t))(torch.ones(2))


def answer(*args):
    return REPLAY(args[first_float(args)])
''', "REPLAY", "from torch.fx"),
    Shortcut("a backward traced once with TorchScript, then replayed", '''\
SCRIPTED = torch.jit.trace(lambda t: t.cos() * t + t.sin(), torch.ones(2))


def answer(*args):
    return SCRIPTED(args[first_float(args)])
''', "SCRIPTED", "torch.jit"),
    Shortcut("a table of the hidden test's inputs, made from the public seeds", '''\
from backproplab.course.exercises import find_exercise

EXERCISE = find_exercise("{key}")
TABLE = {}
for seed in (0, 1, 2, 777, 778, 779):
    inputs = EXERCISE.make_inputs(torch.Generator().manual_seed(seed))
    inputs = tuple(t.double() if torch.is_tensor(t) and t.is_floating_point() else t
                   for t in inputs)
    key = repr([t.tolist() if torch.is_tensor(t) else t for t in inputs])
    TABLE[key] = EXERCISE.reference(*inputs)


def answer(*args):
    return TABLE[repr([t.tolist() if torch.is_tensor(t) else t for t in args])]
''', "KeyError", None),
    Shortcut("a Tensor subclass whose torch.equal always says True", '''\
class Agreeable(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is torch.equal or func is torch.allclose:
            return True
        return super().__torch_function__(func, types, args, kwargs or {})


def answer(*args):
    return torch.zeros_like(args[first_float(args)]).as_subclass(Agreeable)
''', "subclass of torch.Tensor", "class Agreeable(torch.Tensor)"),
]
