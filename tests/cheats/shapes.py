"""The reference or autograd hidden in ordinary Python shapes, and shortcuts that hide
the method: each for lesson 04's ``nll_grads(x, y, w, b, a, c)`` (``l04-grads``).

In a learner's kernel a check cannot tell these apart from honest code (the kernel's
check is feedback, not a guard); ``backproplab grade``, which reads the answer's
source and runs only that in a fresh process, must give every one 0 points
(tests/course/test_grade.py). Entries: (kind, source of the solution cell).
"""

REFERENCE = 'bl.course.exercises.find_exercise("l04-grads").reference'
AUTOGRAD = '''\
def _autograd(x, y, w, b, a, c):
    with torch.enable_grad():
        w, b, a, c = (t.clone().requires_grad_() for t in (w, b, a, c))
        u = a * x + c
        loss = (u + 0.5 * (w * x + b - y) ** 2 * torch.exp(-2 * u)).mean()
        return torch.autograd.grad(loss, (w, b, a, c))
'''

SHAPES = [
    ("a callable class instance", f'''\
class Grads:
    def __call__(self, x, y, w, b, a, c):
        return {REFERENCE}(x, y, w, b, a, c)


nll_grads = Grads()
'''),
    ("a bound method", AUTOGRAD + '''

class Helper:
    def grads(self, x, y, w, b, a, c):
        return _autograd(x, y, w, b, a, c)


nll_grads = Helper().grads
'''),
    ("a default argument", f'''\
def nll_grads(x, y, w, b, a, c, _reference={REFERENCE}):
    return _reference(x, y, w, b, a, c)
'''),
    ("a decorator", '''\
def derived(forward):
    def grads(x, y, w, b, a, c):
        w, b, a, c = (t.clone().requires_grad_() for t in (w, b, a, c))
        with torch.enable_grad():
            return torch.autograd.grad(forward(x, y, w, b, a, c), (w, b, a, c))
    return grads


@derived
def nll_grads(x, y, w, b, a, c):
    return (a * x + c + 0.5 * (w * x + b - y) ** 2 * torch.exp(-2 * (a * x + c))).mean()
'''),
    ("a function built with types.FunctionType", f'''\
import types

_ref = {REFERENCE}
nll_grads = types.FunctionType(_ref.__code__, _ref.__globals__)
'''),
    ("a function whose code is set after definition", AUTOGRAD + '''

def nll_grads(x, y, w, b, a, c):
    return 0 * w, 0 * b, 0 * a, 0 * c


nll_grads.__code__ = _autograd.__code__
'''),
    ("a list consulted after fifty iterations", '''\
TOOLS = [abs] * 50 + [torch.autograd.grad]


def nll_grads(x, y, w, b, a, c):
    w, b, a, c = (t.clone().requires_grad_() for t in (w, b, a, c))
    with torch.enable_grad():
        return TOOLS[50]((a * x + c + 0.5 * (w * x + b - y) ** 2 * torch.exp(-2 * (a * x + c))).mean(), (w, b, a, c))
'''),
    ("a thread started when the cell runs", '''\
import queue
import threading

RESULTS = queue.SimpleQueue()


def serve():
    while True:
        x, y, w, b, a, c = RESULTS.get()
        RESULTS.put(bl.course.exercises.find_exercise("l04-grads").reference(x, y, w, b, a, c))


threading.Thread(target=serve, daemon=True).start()


def nll_grads(x, y, w, b, a, c):
    RESULTS.put((x, y, w, b, a, c))
    while True:
        got = RESULTS.get()
        if isinstance(got, tuple) and len(got) == 4:
            return got
        RESULTS.put(got)
'''),
    ("a cache filled before the check", '''\
CACHE = {}
_exercise = bl.course.exercises.find_exercise("l04-grads")
for _seed in range(3):
    _inputs = tuple(t.double() for t in _exercise.make_inputs(torch.Generator().manual_seed(_seed)))
    CACHE[repr(_inputs[0].tolist())] = _exercise.reference(*_inputs)


def nll_grads(x, y, w, b, a, c):
    return CACHE[repr(x.tolist())]
'''),
    ("the check's tolerance patched", '''\
import backproplab.course.slips as _slips

_slips.BY_HAND_RTOL = 1.0


def nll_grads(x, y, w, b, a, c):
    h = 1e-4
    loss = lambda w, b, a, c: (a * x + c + 0.5 * (w * x + b - y) ** 2 * torch.exp(-2 * (a * x + c))).mean()
    here = loss(w, b, a, c)
    return ((loss(w + h, b, a, c) - here) / h, (loss(w, b + h, a, c) - here) / h,
            (loss(w, b, a + h, c) - here) / h, (loss(w, b, a, c + h) - here) / h)
'''),
    ("a complex step through numpy in a default argument", '''\
def nll_grads(x, y, w, b, a, c, np=__import__("numpy")):
    xs, ys = np.array(x.tolist()), np.array(y.tolist())
    loss = lambda w, b, a, c: (a * xs + c + 0.5 * (w * xs + b - ys) ** 2
                               * np.exp(-2 * (a * xs + c))).mean()
    h, at = 1e-30, [w.item(), b.item(), a.item(), c.item()]
    grads = []
    for k in range(4):
        moved = list(at)
        moved[k] = moved[k] + 1j * h
        grads.append(torch.tensor(loss(*moved).imag / h, dtype=x.dtype))
    return tuple(grads)
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

    def exp(self):
        return Dual(torch.exp(self.value), torch.exp(self.value) * self.slope)


def lift(t, seeded):
    return Dual(t, torch.ones_like(t) if seeded else torch.zeros_like(t))


def nll_grads(x, y, w, b, a, c):
    grads = []
    for k in range(4):
        W, B, A, C = (lift(t, k == j) for j, t in enumerate((w, b, a, c)))
        u = A * x + C
        r = W * x + B - y
        point = u + 0.5 * (r * r) * ((-2) * u).exp()
        grads.append(point.slope.mean())
    return tuple(grads)
'''),
    ("a table from the instructor's secret read from the environment", '''\
import os

from backproplab.course import grading as _grading

_exercise = bl.course.exercises.find_exercise("l04-grads")
TABLE = {}
for _written in (0, 4901):
    _seed = _grading.grading_seed("l04-grads", _written, os.environ.get("BACKPROPLAB_SECRET"))
    for _k in range(3):
        _inputs = tuple(t.double() for t in _exercise.make_inputs(
            torch.Generator().manual_seed(_seed + _k)))
        TABLE[repr(_inputs[0].tolist())] = _exercise.reference(*_inputs)


def nll_grads(x, y, w, b, a, c):
    return TABLE[repr(x.tolist())]
'''),
    ("a least-squares fit of random nudges", '''\
def nll_grads(x, y, w, b, a, c):
    loss = lambda w, b, a, c: (a * x + c + 0.5 * (w * x + b - y) ** 2 * torch.exp(-2 * (a * x + c))).mean()
    steps = torch.randn(16, 4, dtype=x.dtype) * 1e-3
    here = loss(w, b, a, c)
    changes = torch.stack([loss(w + s[0], b + s[1], a + s[2], c + s[3]) - here for s in steps])
    fit = torch.linalg.lstsq(steps, changes.unsqueeze(1)).solution.squeeze(1)
    return fit[0], fit[1], fit[2], fit[3]
'''),
]

# ---------------------------------------------------------------------------------------
# Escapes: ways past the reading into code that runs anything (here: autograd's gradient,
# from a string the reading cannot see into). Each passed the reading before it read its
# shape, and its payload ran; each must now be refused, before anything runs, with a
# reason that names the shape, whatever words the payload is spelt with
# (tests/course/test_allowlist.py reads them, tests/course/test_grade.py grades them).
# Entries: (kind, source, the reason key it must get).

PAYLOAD = (
    '"import torch\\n'
    'def _autograd(x, y, w, b, a, c):\\n'
    '    with torch.enable_grad():\\n'
    '        w, b, a, c = (t.clone().requires_grad_() for t in (w, b, a, c))\\n'
    '        u = a * x + c\\n'
    '        loss = (u + 0.5 * (w * x + b - y) ** 2 * torch.exp(-2 * u)).mean()\\n'
    '        return torch.autograd.grad(loss, (w, b, a, c))\\n"'
)
_RUN = "    return SPACE['_autograd'](x, y, w, b, a, c)\n"
# A class whose attribute names, once the reading took a learner's names as theirs to
# read anywhere, opened them on every value (the module above all).
_NAMES = f"CODE, SPACE = {PAYLOAD}, {{}}\n\n\nclass Names:\n    sys = modules = get = exec = 0\n"

ESCAPES = [
    ("class patterns that read __self__ and then exec", f'''\
CODE, SPACE = {PAYLOAD}, {{}}


def nll_grads(x, y, w, b, a, c):
    match print:
        case object(__self__=python):
            match python:
                case object(exec=run):
                    run(CODE, SPACE)
{_RUN}''', "pattern"),
    ("attribute names of its own class, on a module bound by a tuple", f'''\
{_NAMES}

def nll_grads(x, y, w, b, a, c):
    T, _ = torch, Names
    T.sys.modules.get("builtins").exec(CODE, SPACE)
{_RUN}''', "module-value"),
    ("a module bound by the walrus", f'''\
{_NAMES}

def nll_grads(x, y, w, b, a, c):
    if (T := torch) is not Names:
        T.sys.modules.get("builtins").exec(CODE, SPACE)
{_RUN}''', "module-value"),
    ("a module bound by for", f'''\
{_NAMES}

def nll_grads(x, y, w, b, a, c):
    for T in (torch, Names)[:1]:
        T.sys.modules.get("builtins").exec(CODE, SPACE)
{_RUN}''', "module-value"),
    ("a module bound by with", f'''\
{_NAMES}

class Hold:
    def __init__(self, held):
        self.held = held

    def __enter__(self):
        return self.held

    def __exit__(self, *exc):
        return False


def nll_grads(x, y, w, b, a, c):
    with Hold(torch) as T, Hold(Names):
        T.sys.modules.get("builtins").exec(CODE, SPACE)
{_RUN}''', "module-value"),
    ("a module as a default argument", f'''\
{_NAMES}

def nll_grads(x, y, w, b, a, c, T=torch, _=Names):
    T.sys.modules.get("builtins").exec(CODE, SPACE)
{_RUN}''', "module-value"),
    ("a string annotation that typing evaluates", f'''\
import typing

CODE, SPACE = {PAYLOAD}, {{}}


def run(code: "ex" "ec(CODE, SPACE)"):
    return code


def nll_grads(x, y, w, b, a, c):
    typing.get_type_hints(run)
{_RUN}''', "annotation"),
    ("a module that imports builtins under another name", f'''\
import enum

CODE, SPACE = {PAYLOAD}, {{}}


def nll_grads(x, y, w, b, a, c):
    enum.bltns.exec(CODE, SPACE)
{_RUN}''', "introspection"),
    ("a builtin passed in as a default of the same name", f'''\
CODE, SPACE = {PAYLOAD}, {{}}


def nll_grads(x, y, w, b, a, c, exec=exec):
    exec(CODE, SPACE)
{_RUN}''', "shadow"),
]

# The same doors in a method answer (``l05-microbatch``: ``accumulate(w, X, t, sizes)``
# runs each micro-batch's backward): torch's names beyond the modules a method works
# with. Entries: (kind, source, the reason key it must get).
METHOD_ESCAPES = [
    ("torch.os.system", "def accumulate(w, X, t, sizes):\n    torch.os.system('true')\n",
     "system"),
    ("torch.sys.modules", "def accumulate(w, X, t, sizes):\n"
     "    torch.sys.modules['builtins'].exec('w.grad = None')\n", "introspection"),
    ("torch.load", "def accumulate(w, X, t, sizes):\n    torch.load('answer.pt')\n",
     "runs-code"),
    ("torch.utils.cpp_extension.load_inline", "def accumulate(w, X, t, sizes):\n"
     "    torch.utils.cpp_extension.load_inline('a', 'int f() { return 0; }')\n", "runs-code"),
    ("a module that torch.nn.functional imports", "def accumulate(w, X, t, sizes):\n"
     "    torch.nn.functional.importlib.import_module('os').system('true')\n", "import"),
    ("torch again through torch.autograd", "def accumulate(w, X, t, sizes):\n"
     "    torch.autograd.torch.load('answer.pt')\n", "runs-code"),
    ("a private attribute of a value", "def accumulate(w, X, t, sizes):\n"
     "    return t.grad_fn._raw_hidden_state\n", "private"),
    ("torch.hub", "def accumulate(w, X, t, sizes):\n    torch.hub.load('x', 'y')\n",
     "runs-code"),
    ("a part of torch outside the method's modules", "def accumulate(w, X, t, sizes):\n"
     "    torch.some_new_thing(w)\n", "unlisted"),
]
