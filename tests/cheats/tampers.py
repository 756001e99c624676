"""Tampers: code a student could put in any solution cell to get points without the work.

Each entry: (name, source, what the audit must list, what the check must say or None).
Where the check itself cannot notice (the tamper runs before it and leaves nothing it can
see), the audit is the answer; `tests/course/test_audit.py` runs every one.
"""

PASSING = 'bl.Report((bl.Check("x", True, "pass", "fine"),))'

TAMPERS = [
    ("replace check_by_hand",
     f"bl.check_by_hand = lambda *a, **k: {PASSING}\n",
     "rebinds bl.check_by_hand", "grading functions were replaced"),
    ("replace check_exercise",
     "bl.check_exercise = lambda *a, **k: None\n",
     "rebinds bl.check_exercise", None),
    ("patch compare inside the package",
     f"import backproplab.exercise\nbackproplab.exercise.compare = lambda *a, **k: {PASSING}\n",
     "rebinds backproplab.exercise.compare", "grading functions were replaced"),
    ("patch Report.assert_ok",
     "from backproplab._report import Report\nReport.assert_ok = lambda self: None\n",
     "rebinds Report.assert_ok", "grading functions were replaced"),
    ("patch forbid_autograd",
     "import contextlib\nimport backproplab.exercise as ex\n"
     "ex.forbid_autograd = lambda *a, **k: contextlib.nullcontext()\n",
     "rebinds ex.forbid_autograd", "grading functions were replaced"),
    ("setattr on the package",
     f"setattr(bl, 'check_by_hand', lambda *a, **k: {PASSING})\n",
     "sets an attribute by name (setattr)", "grading functions were replaced"),
    ("swap autograd's engine",
     "from torch.autograd.variable import Variable\n"
     "Variable._execution_engine = Variable._execution_engine\n",
     "touches autograd's engine (_execution_engine)", None),
    ("replace the code of a checker",
     "import backproplab.exercise as ex\nex._judge.__code__ = (lambda *a, **k: None).__code__\n",
     "reads or replaces a function's code (__code__)", "grading functions were replaced"),
    ("an input transformer that blanks later cells",
     "get_ipython().input_transformers_post.append(lambda lines: [])\n",
     "installs an IPython input transformer", None),
    ("sys.modules swap",
     "import sys, types\nsys.modules['backproplab'] = types.SimpleNamespace()\n",
     "edits sys.modules", None),
    ("rebind the name bl",
     "import types\nbl = types.SimpleNamespace(check_exercise=lambda *a, **k: None)\n",
     "rebinds the name bl", None),
    ("a signal handler",
     "import signal\nsignal.signal(signal.SIGALRM, lambda *a: None)\n",
     "installs a signal handler", None),
    ("torch's own kernels",
     "def f(g, y):\n    return torch.ops.aten.tanh_backward(g, y)\n",
     "calls torch's own kernels (torch.ops.aten)", None),
    ("calling a backward node",
     "def f(y, g):\n    return y.grad_fn(g)\n",
     "calls a backward node (grad_fn(...))", None),
    ("exec of a hidden string",
     "exec('bl.check_exercise = print')\n",
     "runs code from a string (exec)", None),
    ("a cell magic",
     "%%capture\nx = 1\n",
     "uses the magic %%capture", None),
    ("grad mode through torch._C",
     "torch._C._set_grad_enabled(True)\n",
     "switches grad mode through torch._C", None),
]
