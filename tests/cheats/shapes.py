"""The reference or autograd hidden in ordinary Python shapes, and shortcuts that hide
the method: each for lesson 04's ``mse_grads(x, y, w, b)`` (``l04-grads``).

In a learner's kernel a check cannot tell these apart from honest code (the kernel's
check is feedback, not a guard); ``backproplab grade``, which reads the answer's
source and runs only that in a fresh process, must give every one 0 points
(tests/course/test_grade.py). Entries: (kind, source of the solution cell).
"""

REFERENCE = 'bl.lessons.find_exercise("l04-grads").reference'
AUTOGRAD = '''\
def _autograd(x, y, w, b):
    with torch.enable_grad():
        w, b = w.clone().requires_grad_(), b.clone().requires_grad_()
        return torch.autograd.grad(((w * x + b - y) ** 2).mean(), (w, b))
'''

SHAPES = [
    ("a callable class instance", f'''\
class Grads:
    def __call__(self, x, y, w, b):
        return {REFERENCE}(x, y, w, b)


mse_grads = Grads()
'''),
    ("a bound method", AUTOGRAD + '''

class Helper:
    def grads(self, x, y, w, b):
        return _autograd(x, y, w, b)


mse_grads = Helper().grads
'''),
    ("a default argument", f'''\
def mse_grads(x, y, w, b, _reference={REFERENCE}):
    return _reference(x, y, w, b)
'''),
    ("a decorator", '''\
def derived(forward):
    def grads(x, y, w, b):
        w, b = w.clone().requires_grad_(), b.clone().requires_grad_()
        with torch.enable_grad():
            return torch.autograd.grad(forward(x, y, w, b), (w, b))
    return grads


@derived
def mse_grads(x, y, w, b):
    return ((w * x + b - y) ** 2).mean()
'''),
    ("a function built with types.FunctionType", f'''\
import types

_ref = {REFERENCE}
mse_grads = types.FunctionType(_ref.__code__, _ref.__globals__)
'''),
    ("a function whose code is set after definition", AUTOGRAD + '''

def mse_grads(x, y, w, b):
    return 0 * w, 0 * b


mse_grads.__code__ = _autograd.__code__
'''),
    ("a list consulted after fifty iterations", '''\
TOOLS = [abs] * 50 + [torch.autograd.grad]


def mse_grads(x, y, w, b):
    w, b = w.clone().requires_grad_(), b.clone().requires_grad_()
    with torch.enable_grad():
        return TOOLS[50](((w * x + b - y) ** 2).mean(), (w, b))
'''),
    ("a thread started when the cell runs", '''\
import queue
import threading

RESULTS = queue.SimpleQueue()


def serve():
    while True:
        x, y, w, b = RESULTS.get()
        RESULTS.put(bl.lessons.find_exercise("l04-grads").reference(x, y, w, b))


threading.Thread(target=serve, daemon=True).start()


def mse_grads(x, y, w, b):
    RESULTS.put((x, y, w, b))
    while True:
        got = RESULTS.get()
        if isinstance(got, tuple) and len(got) == 2:
            return got
        RESULTS.put(got)
'''),
    ("a cache filled before the check", '''\
CACHE = {}
_exercise = bl.lessons.find_exercise("l04-grads")
for _seed in range(3):
    _inputs = tuple(t.double() for t in _exercise.make_inputs(torch.Generator().manual_seed(_seed)))
    CACHE[repr(_inputs[0].tolist())] = _exercise.reference(*_inputs)


def mse_grads(x, y, w, b):
    return CACHE[repr(x.tolist())]
'''),
    ("the check's tolerance patched", '''\
import backproplab.course.slips as _slips

_slips.BY_HAND_RTOL = 1.0


def mse_grads(x, y, w, b):
    h = 1e-4
    loss = lambda w, b: ((w * x + b - y) ** 2).mean()
    return (loss(w + h, b) - loss(w, b)) / h, (loss(w, b + h) - loss(w, b)) / h
'''),
    ("a complex step through numpy in a default argument", '''\
def mse_grads(x, y, w, b, np=__import__("numpy")):
    xs, ys = np.array(x.tolist()), np.array(y.tolist())
    loss = lambda w, b: ((w * xs + b - ys) ** 2).mean()
    h = 1e-30
    dw = loss(w.item() + 1j * h, b.item()).imag / h
    db = loss(w.item(), b.item() + 1j * h).imag / h
    return torch.tensor(dw, dtype=x.dtype), torch.tensor(db, dtype=x.dtype)
'''),
    ("a small dual-number class as a gradient engine", '''\
class Dual:
    def __init__(self, value, slope):
        self.value, self.slope = value, slope

    def __add__(self, other):
        other = other if isinstance(other, Dual) else Dual(other, 0 * self.slope)
        return Dual(self.value + other.value, self.slope + other.slope)

    __radd__ = __add__

    def __mul__(self, other):
        other = other if isinstance(other, Dual) else Dual(other, 0 * self.slope)
        return Dual(self.value * other.value,
                    self.slope * other.value + self.value * other.slope)

    __rmul__ = __mul__

    def __sub__(self, other):
        return self + (-1) * other


def mse_grads(x, y, w, b):
    dw = Dual(w, torch.ones_like(w)) * x + b - y
    db = w * x + Dual(b, torch.ones_like(b)) - y
    return (2 * dw.value * dw.slope).mean(), (2 * db.value * db.slope).mean()
'''),
    ("a table from the instructor's secret read from the environment", '''\
import os

from backproplab.course import secret as _secret

_exercise = bl.lessons.find_exercise("l04-grads")
TABLE = {}
for _written in (0, 4901):
    _seed = _secret.grading_seed("l04-grads", _written, os.environ.get("BACKPROPLAB_SECRET"))
    for _k in range(3):
        _inputs = tuple(t.double() for t in _exercise.make_inputs(
            torch.Generator().manual_seed(_seed + _k)))
        TABLE[repr(_inputs[0].tolist())] = _exercise.reference(*_inputs)


def mse_grads(x, y, w, b):
    return TABLE[repr(x.tolist())]
'''),
    ("a least-squares fit of random nudges", '''\
def mse_grads(x, y, w, b):
    loss = lambda w, b: ((w * x + b - y) ** 2).mean()
    steps = torch.randn(8, 2, dtype=x.dtype) * 1e-3
    changes = torch.stack([loss(w + s[0], b + s[1]) - loss(w, b) for s in steps])
    fit = torch.linalg.lstsq(steps, changes.unsqueeze(1)).solution.squeeze(1)
    return fit[0], fit[1]
'''),
]
