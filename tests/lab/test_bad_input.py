"""Bad input across the public API: a clear error that names the argument, or a right answer.

Every public function appears below with calls a careful user might get
wrong. Each must raise TypeError or ValueError (CourseError is a ValueError)
whose message starts with the argument's name, never an error from deep
inside torch, numpy, matplotlib or re. Properties of `compare` that no
silently wrong verdict may break are checked with hypothesis.
"""

from __future__ import annotations

import inspect
import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import backproplab as bl  # noqa: E402
from backproplab import data, plot, widgets  # noqa: E402
from backproplab.course import assignment as course  # noqa: E402
from backproplab.course import handout  # noqa: E402


def _leaf():
    return torch.tensor(2.0, requires_grad=True)


def _trace():
    a = _leaf()
    return bl.trace_backward(a * a, names={"a": a})


CALLS = [
    # graph
    ("describe", lambda: bl.describe(3), "outputs"),
    ("describe", lambda: bl.describe([]), "outputs"),
    ("describe", lambda: bl.describe(torch.ones(2)), "outputs"),
    ("describe", lambda: bl.describe(_leaf() * 2, names=[1]), "names"),
    ("describe", lambda: bl.describe(_leaf() * 2, names={1: _leaf()}), "names"),
    ("Graph.node", lambda: bl.describe(_leaf() * 2).node(2.5), "key"),
    ("Graph.node", lambda: bl.describe(_leaf() * 2).node(99), "key"),
    # trace
    ("trace_backward", lambda: bl.trace_backward("loss"), "loss"),
    ("trace_backward", lambda: bl.trace_backward(_leaf() * 2, retain_graph="yes"), "retain_graph"),
    ("trace_backward", lambda: bl.trace_backward(_leaf() * torch.ones(2)), "gradient"),
    ("trace_backward", lambda: bl.trace_backward(_leaf() * 1j), "loss"),
    ("Trace.leaf_grad", lambda: _trace().leaf_grad(3), "name"),
    # check
    ("compare", lambda: bl.compare(3, 1.0, 1.0), "name"),
    ("compare", lambda: bl.compare("g", "1", 1.0), "manual"),
    ("compare", lambda: bl.compare("g", 1.0, True), "reference"),
    ("compare", lambda: bl.compare("g", 1.0, 1.0, atol=math.nan), "atol"),
    ("compare", lambda: bl.compare("g", 1.0, 1.0, rtol=-1), "rtol"),
    ("diagnose", lambda: bl.diagnose(None, 1.0), "manual"),
    ("numerical_grad", lambda: bl.numerical_grad(3, torch.ones(1)), "f"),
    ("numerical_grad", lambda: bl.numerical_grad(lambda x: x.sum(), torch.ones(1), eps=math.inf),
     "eps"),
    ("numerical_grad", lambda: bl.numerical_grad(lambda x: x.sum()), "inputs"),
    ("numerical_grad", lambda: bl.numerical_grad(lambda x: x.float().sum(), torch.ones(2)), "f"),
    ("numerical_grad", lambda: bl.numerical_grad(lambda x: x.add_(1).sum(), torch.ones(2)), "f"),
    ("check_grad", lambda: bl.check_grad(lambda x: x.sum(), [], []), "inputs"),
    ("check_grad", lambda: bl.check_grad(lambda x: x.sum(), [torch.ones(1)], [1.0], names=5),
     "names"),
    ("check_grad", lambda: bl.check_grad(3, [torch.ones(1)], [1.0]), "f"),
    ("check_function", lambda: bl.check_function(int, torch.ones(1)), "fn_class"),
    ("check_graph", lambda: bl.check_graph(3, ["A"]), "prediction"),
    ("check_graph", lambda: bl.check_graph(["A"], 3), "output"),
    # exercise
    ("check_by_hand", lambda: bl.check_by_hand(abs, 3, lambda g: ()), "reference"),
    ("check_by_hand", lambda: bl.check_by_hand(abs, abs, 3), "make_inputs"),
    ("check_by_hand", lambda: bl.check_by_hand(abs, abs, lambda g: (), trials=1), "trials"),
    ("check_prediction", lambda: bl.check_prediction(3, 1), "prediction"),
    ("check_prediction", lambda: bl.check_prediction("p", 1), "prediction"),
    ("check_prediction", lambda: bl.check_prediction("l99-predict-x", 1), "prediction"),
    ("check_exercise", lambda: bl.check_exercise("cubic", abs), "key"),
    ("check_exercise", lambda: bl.check_exercise("l02-nothing", abs), "key"),
    ("check_exercise", lambda: bl.check_exercise("l02-cubic", abs, seed="1"), "seed"),
    # plot
    ("loss_curve", lambda: plot.loss_curve("abc"), "losses"),
    ("loss_curve", lambda: plot.loss_curve(torch.ones(3, 4)), "losses"),
    ("loss_curve", lambda: plot.loss_curve({1: [1.0], "1": [2.0]}), "losses"),
    ("fit_plot", lambda: plot.fit_plot([1, 2], [1, 2], {"a": "12"}), "lines"),
    ("fit_plot", lambda: plot.fit_plot([1, 2], [1], {}), "x, y"),
    ("grad_flow", lambda: plot.grad_flow([torch.ones(1)]), "model"),
    ("jacobian_heatmap", lambda: plot.jacobian_heatmap(None), "jac"),
    ("jacobian_heatmap", lambda: plot.jacobian_heatmap(torch.eye(2), in_labels=5), "in_labels"),
    ("tangent_plot", lambda: plot.tangent_plot(torch.log, 0.0), "f"),
    ("tangent_plot", lambda: plot.tangent_plot(torch.sin, math.nan), "x0"),
    ("tangent_plot", lambda: plot.tangent_plot(torch.sin, 0.0, xlim=(1, math.inf)), "xlim"),
    ("draw_graph", lambda: plot.draw_graph(bl.describe(_leaf() * 2), edge_grads=True),
     "edge_grads"),
    ("draw_graph", lambda: plot.draw_graph(_leaf() * 2, max_nodes=0), "max_nodes"),
    ("draw_dag", lambda: plot.draw_dag(["a"], [(0, 1)]), "edges"),
    ("draw_dag", lambda: plot.draw_dag(["a", "b"], [(0, 1), (1, 0)]), "edges"),
    # widgets
    ("render_step", lambda: widgets.render_step(_trace(), 7), "step"),
    ("backward_stepper", lambda: widgets.backward_stepper("trace"), "trace"),
    ("train_linear", lambda: widgets.train_linear([1.0], [1.0], lr=-1, epochs=3), "lr"),
    ("lr_explorer", lambda: widgets.lr_explorer([1.0], [1.0], epochs=0), "epochs"),
    # data
    ("linear_data", lambda: data.linear_data(slope=math.nan), "slope"),
    ("linear_data", lambda: data.linear_data(slope=torch.tensor([1.0, 2.0])), "slope"),
    ("linear_data", lambda: data.linear_data(noise="1"), "noise"),
    ("linear_data", lambda: data.linear_data(seed=2**70), "seed"),
    ("regression_data", lambda: data.regression_data(features=0), "features"),
    ("spiral_data", lambda: data.spiral_data(classes=0), "classes"),
    # course
    ("validate", lambda: course.validate(None), "nb"),
    ("validate", lambda: course.validate(nbformat.v4.new_notebook(), lesson="("), "lesson"),
    ("validate_course", lambda: course.validate_course("notebooks"), "paths"),
    ("student_version", lambda: course.student_version("nb"), "nb"),
    ("regions", lambda: course.regions(None, course.SOLUTION), "source"),
    ("release", lambda: handout.release(None, "out"), "src"),
    ("release", lambda: handout.release("notebooks", "out", log=3), "log"),
    ("learn", lambda: handout.learn("notebooks", 5), "dest"),
    ("find_notebooks", lambda: handout.find_notebooks("no/such/folder"), "no/such/folder"),
]


@pytest.mark.parametrize("call, argument", [(c, a) for _, c, a in CALLS],
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(CALLS)])
def test_bad_input_names_the_argument(call, argument):
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    plt.close("all")
    message = str(info.value)
    assert message.startswith(argument), f"the message does not lead with {argument!r}: {message}"
    assert len(message) > len(argument) + 15, f"too terse: {message!r}"


finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
values = st.floats(width=64)  # NaN and inf included


@settings(max_examples=200, deadline=None)
@given(st.lists(values, min_size=1, max_size=6))
def test_a_value_matches_itself_exactly(xs):
    t = torch.tensor(xs, dtype=torch.float64)
    assert bl.compare("x", t, t.clone())[0].verdict == "exact"


@settings(max_examples=200, deadline=None)
@given(finite, finite)
def test_two_different_python_floats_are_never_an_exact_match(a, b):
    verdict = bl.compare("x", a, b)[0].verdict
    assert (verdict == "exact") == (a == b)


@settings(max_examples=200, deadline=None)
@given(st.lists(finite, min_size=1, max_size=5), st.lists(finite, min_size=1, max_size=5))
def test_the_verdict_does_not_depend_on_the_order(xs, ys):
    a = torch.tensor(xs, dtype=torch.float64)
    b = torch.tensor(ys, dtype=torch.float64)
    assert bl.compare("x", a, b).ok == bl.compare("x", b, a).ok


# --------------------------------------------------------------------------
# A fuzz of the whole public API: every required argument, each bad value
# --------------------------------------------------------------------------

FUZZ_VALUES = [None, "abc", -1, 0, 1.5, float("nan"), [], {}, (1, 2), torch.ones(2, 3),
               np.ones(3), object(), True, lambda *a: None]


def _public_functions() -> dict[str, object]:
    found = {n: getattr(bl, n) for n in bl.__all__
             if callable(getattr(bl, n)) and not inspect.isclass(getattr(bl, n))}
    for module in (plot, bl.data):
        for n in getattr(module, "__all__", []):
            f = getattr(module, n)
            if callable(f) and not inspect.isclass(f):
                found[f"{module.__name__.split('.')[-1]}.{n}"] = f
    return found


@pytest.mark.parametrize("name", sorted(_public_functions()))
def test_fuzz_every_bad_argument_gets_an_error_naming_an_argument(name):
    """Each required argument in turn gets each bad value (the others a plausible one):
    the answer is a result, a failed check, or a TypeError/ValueError that names an
    argument of the function, never an error from deep inside torch."""
    f = _public_functions()[name]
    params = [p for p in inspect.signature(f).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    names = {p.name for p in inspect.signature(f).parameters.values()}
    plausible = torch.tensor([1.0, 2.0], requires_grad=True)
    unclear = []
    for i, param in enumerate(params):
        for bad in FUZZ_VALUES:
            args = [bad if j == i else plausible for j in range(len(params))]
            try:
                f(*args)
            except AssertionError:
                pass
            except (TypeError, ValueError, KeyError) as err:
                if not any(f"{n}:" in str(err) or f"{n} " in str(err) for n in names):
                    unclear.append(f"{param.name}={bad!r:.20}: {type(err).__name__}: {err}")
            except Exception as err:  # noqa: BLE001 - any other type is the finding
                unclear.append(f"{param.name}={bad!r:.20}: {type(err).__name__}: {err}")
    plt.close("all")
    assert not unclear, "\n".join(unclear)
