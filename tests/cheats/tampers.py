"""Tampers: code a student could put in any solution cell to make the kernel's checks say ✓
without the work.

In the kernel they may well work: its checks are feedback, not a guard. The grade comes
from ``backproplab grade``, which never runs them (it runs only the answer's definitions,
in a fresh process), and the audit lists each. Each entry: (name, source, what the audit
must list); `tests/course/test_audit.py` runs every one.
"""

PASSING = 'bl.Report((bl.Check("x", True, "pass", "fine"),))'

TAMPERS = [
    ("replace check_by_hand",
     f"bl.check_by_hand = lambda *a, **k: {PASSING}\n",
     "rebinds bl.check_by_hand"),
    ("replace check_exercise",
     "bl.check_exercise = lambda *a, **k: None\n",
     "rebinds bl.check_exercise"),
    ("patch compare inside the package",
     f"import backproplab.course.slips\nbackproplab.course.slips.compare = lambda *a, **k: {PASSING}\n",
     "rebinds backproplab.course.slips.compare"),
    ("patch Report.assert_ok",
     "from backproplab.check import Report\nReport.assert_ok = lambda self: None\n",
     "rebinds Report.assert_ok"),
    ("patch forbid_autograd",
     "import contextlib\nimport backproplab.course.grading as ex\n"
     "ex.forbid_autograd = lambda *a, **k: contextlib.nullcontext()\n",
     "rebinds ex.forbid_autograd"),
    ("setattr on the package",
     f"setattr(bl, 'check_by_hand', lambda *a, **k: {PASSING})\n",
     "sets an attribute by name (setattr)"),
    ("swap autograd's engine",
     "from torch.autograd.variable import Variable\n"
     "Variable._execution_engine = Variable._execution_engine\n",
     "touches autograd's engine (_execution_engine)"),
    ("replace the code of a checker",
     "import backproplab.course.grading as ex\nex._judge.__code__ = (lambda *a, **k: None).__code__\n",
     "reads or replaces a function's code (__code__)"),
    ("an input transformer that blanks later cells",
     "get_ipython().input_transformers_post.append(lambda lines: [])\n",
     "installs an IPython input transformer"),
    ("sys.modules swap",
     "import sys, types\nsys.modules['backproplab'] = types.SimpleNamespace()\n",
     "edits sys.modules"),
    ("rebind the name bl",
     "import types\nbl = types.SimpleNamespace(check_exercise=lambda *a, **k: None)\n",
     "rebinds the name bl"),
    ("a signal handler",
     "import signal\nsignal.signal(signal.SIGALRM, lambda *a: None)\n",
     "installs a signal handler"),
    ("exec of a hidden string",
     "exec('bl.check_exercise = print')\n",
     "runs code from a string (exec)"),
    ("a cell magic",
     "%%capture\nx = 1\n",
     "uses the magic %%capture"),
    ("grad mode through torch._C",
     "torch._C._set_grad_enabled(True)\n",
     "switches grad mode through torch._C"),
]
