"""Lesson 11's facts, read from the stored outputs and measured again on the lesson's own
engine (its cells run in a namespace of their own): every rule against torch on new
shapes, lesson 10's network trained to torch's loss at every step, the graph's gradient
shapes (the bias's (5,) out of a (256, 5), the squared error's two gradients on one
arrow, the -1 and 1/256), the chain's depth, the three gradients that reach y, the
examples of Exercises 1 and 2, and the checks: the solutions pass on several
seeds, and every kept wrong answer fails on four seeds with the same named slip.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
from pathlib import Path

import nbformat
import pytest
import torch
from cells import run_cell
from stored import flat_text as _text

import backproplab as bl
from backproplab.course.exercises import lesson11

ROOT = Path(__file__).parents[2]
NOTEBOOK = ROOT / "notebooks" / "11-a-tensor-engine-of-your-own.ipynb"
ENGINE = ("l11-01", "l11-03", "l11-05", "l11-07", "l11-09", "l11-11", "l11-13")


@pytest.fixture(scope="module")
def cells() -> dict[str, nbformat.NotebookNode]:
    return {c.id: c for c in nbformat.read(NOTEBOOK, as_version=4).cells}


def _engine() -> dict:
    """The engine's cells, run in a namespace of their own (as a notebook would)."""
    sources = {c.id: c.source for c in nbformat.read(NOTEBOOK, as_version=4).cells}
    space = {"__name__": "__main__"}
    for cid in ENGINE:
        source = sources[cid].replace("bl.short_tracebacks()", "")
        with contextlib.redirect_stdout(io.StringIO()):
            run_cell(source, space)
    return space


def _solution(cells, cid: str) -> str:
    return "\n".join(line for line in cells[cid].source.splitlines()
                     if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line)


def _table(folder: str, name: str) -> dict:
    path = ROOT / "tests" / folder / "lesson11.py"
    spec = importlib.util.spec_from_file_location(f"{folder}_lesson20_facts", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


# --------------------------------------------------------------------------- the engine


def _shapes(gen):
    return [int(s) for s in torch.randint(1, 5, (3,), generator=gen)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_rule_gives_torchs_gradients_on_new_shapes(seed):
    space = _engine()
    Tensor, backward = space["Tensor"], space["backward"]
    gen = torch.Generator().manual_seed(seed)
    n, d, m = _shapes(gen)

    def rand(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    index = torch.randint(0, n, (n + 2,), generator=gen)  # repeats
    cases = [
        (lambda x, w, b: (x @ w + b).relu().tanh().mean(), rand(n, d), rand(d, m), rand(m)),
        (lambda a, c, s: ((a * c - s).exp() + 1).log().sum(dim=0), rand(n, 1), rand(1, m),
         rand(())),
        (lambda x: (x.reshape(d, n) * x.reshape(d, n).sum(-1, keepdim=True)).sum(), rand(n, d)),
        (lambda x: (x[index].sum(0) * x[0]).sum() + x[1:].mean(), rand(n + 1, d)),
    ]
    for build, *arrays in cases:
        ours = [Tensor(a) for a in arrays]
        backward(build(*ours).sum())
        theirs = [a.clone().requires_grad_() for a in arrays]
        build(*theirs).sum().backward()
        for mine, want in zip(ours, theirs, strict=True):
            assert mine.grad.shape == want.grad.shape
            torch.testing.assert_close(mine.grad, want.grad, rtol=1e-12, atol=1e-12)


def test_the_lessons_rule_checks_pass(cells):
    out = _text(cells["l11-15"])
    assert out.count("✓") == 5 and "✗" not in out, out
    assert "(3, 1), (1, 4), ()" in out  # size-1 dimensions on both sides and a 0-d scalar
    assert "torch recorded nothing: True" in _text(cells["l11-11"])


def test_backward_refuses_a_loss_of_more_than_one_number():
    space = _engine()
    with pytest.raises(ValueError, match=r"one number \(a loss\), got shape \(2, 3\)"):
        space["backward"](space["Tensor"](torch.ones(2, 3)))


# --------------------------------------------------------------------------- training


def test_lesson_09s_network_trains_to_torchs_loss(cells):
    prose = " ".join(cells["l11-16"].source.split())
    for claim in ("10 inputs, 5 hidden ReLU units, 1 output", "a learning rate of 0.05 for 300",
                  "torch.manual_seed(0)"):
        assert claim in prose
    source = cells["l11-17"].source
    assert "nn.Linear(10, 5), nn.ReLU(), nn.Linear(5, 1)" in source
    assert "LR, STEPS = 0.05, 300" in source and "torch.manual_seed(0)" in source
    assert "our engine: loss 1.3705 -> 0.0573" in _text(cells["l11-21"])
    out = _text(cells["l11-23"])
    assert "torch: loss 1.3705 -> 0.0573" in out
    assert "over 300 steps: below 1e-12" in out
    assert "the trained weights agree to 1e-12: True" in out
    lesson10 = {c.id: c for c in nbformat.read(ROOT / "notebooks" / "10-mlp-training.ipynb",
                                                as_version=4).cells}
    assert "step 299: loss 0.0573" in _text(lesson10["l10-08"])  # "where lesson 10's did"
    assert "at 0.0573" in cells["l11-25"].source
    recap = " ".join(cells["l11-45"].source.split())
    assert "from 1.3705 to 0.0573 in 300 steps" in recap and "within 1e-12" in recap


def _graph(space):
    """The lesson's graph of one step (cell l11-19), measured again."""
    Tensor, topo_order = space["Tensor"], space["topo_order"]
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(10, 5), torch.nn.ReLU(), torch.nn.Linear(5, 1))
    x, y = bl.data.regression_data()
    params = [Tensor(p.detach().double()) for p in
              (net[0].weight.T, net[0].bias, net[2].weight.T, net[2].bias)]
    errors = (Tensor(x) @ params[0] + params[1]).relu() @ params[2] + params[3] - Tensor(y)
    return (errors * errors).mean(), params, topo_order


def test_the_graphs_arrows_carry_the_gradient_shapes_the_prose_names(cells):
    loss, params, topo_order = _graph(_engine())
    b1 = params[1]
    users = [n for n in topo_order(loss) if any(p is b1 for p in n.parents)]
    assert [(u.op, u.shape) for u in users] == [("+", (256, 5))]
    assert users[0].rule(torch.ones(256, 5))[1].shape == (5,)
    squares = [n for n in topo_order(loss) if n.op == "*" and len(n.parents) == 2
               and n.parents[0] is n.parents[1]]
    assert len(squares) == 1  # one arrow carrying two gradients
    numbers = sorted(n.data.item() for n in topo_order(loss) if n.rule is None and n.shape == ())
    assert numbers == [-1.0, 1 / 256]
    prose = " ".join(cells["l11-18"].source.split())
    assert "receives a (256, 5) gradient and sends (5,) to `b1`" in prose
    assert "the -1 of the subtraction and the 1/256 of the mean" in prose
    assert any("image/png" in o.get("data", {}) for o in cells["l11-19"].outputs)


def test_the_chain_is_as_deep_as_the_prose_says(cells):
    space = _engine()
    exec(cells["l11-26"].source.split("\n\n\nagainst_torch")[0], space)
    h, c = space["Tensor"](torch.zeros(3)), space["Tensor"](torch.zeros(3))
    ops = [n for n in space["topo_order"](space["chain"](h, c)) if n.rule is not None]
    assert len(ops) == 4001  # 2,000 steps of + and tanh, and the final sum
    assert "A chain of 4,000 operations" in " ".join(cells["l11-25"].source.split())
    assert "✓ a chain 4,000 operations deep" in _text(cells["l11-26"])


def test_torch_skips_the_datas_gradient(cells):
    assert "our engine's X_t.grad: (256, 10) torch's X.grad: None" in _text(cells["l11-35"])
    assert "a (256, 10) tensor nobody asked for" in " ".join(cells["l11-34"].source.split())


# --------------------------------------------------------------------------- prediction


def test_three_gradients_reach_y(cells):
    assert lesson11._arrivals_answer() == 3
    assert "the answer is 3" in _text(cells["l11-30"])
    assert ("3 gradients arrived at y: input 1 of '+', input 0 of '*', input 1 of '*'"
            in _text(cells["l11-32"]))
    assert cells["l11-29"].metadata["nbgrader"]["points"] == 0
    prose = " ".join(cells["l11-33"].source.split())
    assert "the product alone accounts for two; the sum sends the third" in prose


# --------------------------------------------------------------------------- exercises


def test_exercise_1s_example_shapes(cells):
    prose = " ".join(cells["l11-36"].source.split())
    assert "(2, 1, 3, 4) times `b` of shape (5, 4, 6) gives (2, 5, 3, 6)" in prose
    assert torch.matmul(torch.ones(2, 1, 3, 4), torch.ones(5, 4, 6)).shape == (2, 5, 3, 6)


def test_exercise_2s_example(cells):
    prose = " ".join(cells["l11-39"].source.split())
    assert "the cumulative sum of [1, 2, 3] is [1, 3, 6]" in prose
    assert torch.tensor([1, 2, 3]).cumsum(0).tolist() == [1, 3, 6]


def test_no_lesson_before_the_exercise_shows_cumsums_rule():
    """Exercise 2 says no lesson has shown a cumulative sum's backward: no notebook up to
    this one mentions cumsum outside this exercise."""
    earlier = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))[:11]
    assert earlier[-1] == NOTEBOOK
    for path in earlier:
        for cell in nbformat.read(path, as_version=4).cells:
            grade = cell.metadata.get("nbgrader", {}).get("grade_id", "")
            if path != NOTEBOOK or not (grade.startswith("l11-cumsum")
                                        or cell.id in ("l11-00", "l11-39")):  # aim, prompt
                assert "cumsum" not in cell.source and "cumulative" not in cell.source, (
                    f"{path.name} {cell.id}")


def test_every_slip_of_the_cumsum_check_changes_the_gradient():
    """Each named slip differs from the right gradient on every case of every trial (every
    sum runs over at least 3 entries), so a kept slip fails on every seed."""
    from backproplab.course.exercises.lesson11 import (
        CUMSUM_SLIPS,
        _cumsum_inputs,
        _cumsum_reference,
    )
    for seed in range(100):
        X, dim, G = _cumsum_inputs(torch.Generator().manual_seed(seed))
        assert X.shape[dim] >= 3
        right = _cumsum_reference(X.clone(), dim, G)
        for slip in CUMSUM_SLIPS.values():
            assert not torch.allclose(slip(X, dim, G), right)


def _answers(space, key):
    names = {"l11-matmul": ("broadcast_matmul", "Tensor", "backward"),
             "l11-cumsum": ("cumsum", "Tensor", "backward"),
             "l11-amax": ("amax", "Tensor", "backward")}[key]
    return tuple(space[n] for n in names)


SOLUTIONS = {"l11-matmul": "l11-37", "l11-cumsum": "l11-40", "l11-amax": "l11-43"}


@pytest.mark.parametrize("key", sorted(SOLUTIONS))
def test_the_checks_pass_the_solutions(cells, key):
    space = _engine()
    run_cell(_solution(cells, SOLUTIONS[key]), space)
    for seed in (0, 5, 2011):
        bl.check_exercise(key, _answers(space, key), seed=seed)


WRONG = _table("wrong_answers", "WRONG")
KEPT = [(key, k) for key in SOLUTIONS for k in range(len(WRONG[key]))]


@pytest.mark.parametrize(("key", "k"), KEPT, ids=[f"{key}-{k}" for key, k in KEPT])
def test_every_kept_slip_fails_on_every_seed_with_its_name(key, k):
    source, fragment = WRONG[key][k]
    for seed in (0, 1, 2, 3):
        space = _engine()
        run_cell(source, space)
        with pytest.raises(AssertionError) as info:
            bl.check_exercise(key, _answers(space, key), seed=seed)
        message = " ".join(str(info.value).split())
        assert fragment.lower() in message.lower(), f"seed {seed}: {message}"


def test_the_prediction_takes_no_answer_from_the_question(cells):
    question = cells["l11-27"].source
    assert not re.search(r"(?<![\w.])3(?![\w]|\.\d)", question.split("### Predict")[1])


def test_the_readme_row_states_what_the_lesson_computes():
    readme = (ROOT / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| 11 |"))
    for claim in ("within 1e-12 in float64", "a chain 4,000 operations deep"):
        assert claim in row
