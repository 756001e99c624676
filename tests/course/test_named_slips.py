"""Slips named as what happened: a reduction kept as a size-1 dimension, a view not
undone, a mean where a sum belongs, an argument not followed, one output of several.

Each property builds exactly that slip on random shapes and values, and checks that
the name holds on every trial; a random other slip (a factor, a sign) does not get it.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import backproplab as bl
from backproplab.course.slips import Trial, _same_mistake
from backproplab.diagnosis import diagnose
from backproplab.mistakes import Diagnosis

SETTINGS = settings(max_examples=25, deadline=None)
seeds = st.integers(0, 10_000)
KEPT = "keepdim=True (or an unsqueeze) left a size-1 dimension"
VIEW = "a view not undone"
MEAN = "a mean where the gradient needs a sum"
SUM = "a sum where the loss takes a mean"


def flat(obj: object) -> str:
    return " ".join(str(obj).split())


def ref_tensor(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(shape, generator=g, dtype=torch.float64) + 0.5
    return t * (torch.randint(0, 2, shape, generator=g).to(torch.float64) * 2 - 1)


# -------------------------------------------------------------------- lab: diagnose


@SETTINGS
@given(batch=st.integers(2, 6), feat=st.lists(st.integers(2, 5), min_size=1, max_size=2),
       dim=st.integers(0, 2), seed=seeds)
def test_a_kept_size_one_dimension_is_named_as_the_shape(batch, feat, dim, seed):
    per_row = ref_tensor((batch, *feat), seed)
    ref = per_row.sum(0)
    kept = ref.unsqueeze(min(dim, ref.ndim))  # what sum(keepdim=True) or unsqueeze gives
    d = diagnose(kept, ref)
    assert d is not None and d.kind == "size-one-left"
    assert KEPT in str(d) and "forgot to sum" not in str(d)


@SETTINGS
@given(batch=st.integers(2, 6), feat=st.integers(2, 5), factor=st.sampled_from([-1.0, 2.0]),
       seed=seeds)
def test_a_missing_sum_or_another_slip_is_not_named_as_a_kept_dimension(batch, feat, factor,
                                                                         seed):
    per_row = ref_tensor((batch, feat), seed)
    ref = per_row.sum(0)
    assert KEPT not in str(diagnose(per_row, ref))  # the sum really is missing
    assert KEPT not in str(diagnose(factor * ref.unsqueeze(0), ref))  # and a value slip


@SETTINGS
@given(n=st.integers(2, 5), tokens=st.integers(2, 4), dim=st.integers(2, 4), seed=seeds)
def test_a_view_not_undone_is_named(n, tokens, dim, seed):
    ref = ref_tensor((n, tokens, dim), seed)
    d = diagnose(ref.reshape(n, tokens * dim), ref)
    assert d is not None and d.kind == "reshape" and VIEW in str(d) and "keepdim" not in str(d)
    # Shapes that differ only by size-1 dimensions are a squeeze, not a view.
    assert VIEW not in str(diagnose(ref.reshape(n, 1, tokens, dim), ref))
    # A view not undone with other values is not named as one.
    assert VIEW not in str(diagnose(ref.reshape(n, tokens * dim).flip(1), ref))


# ---------------------------------------------------- by hand: every trial, every output


def _inputs(gen):
    n, h = (int(torch.randint(4, 9, (1,), generator=gen)) for _ in range(2))
    return torch.randn(n, h, generator=gen), torch.randn(n, h, generator=gen)


def _reference(x, g):
    return (g * x).sum(0, keepdim=True), g.sum(0)


def _check(answer, seed):
    return bl.check_by_hand(answer, _reference, _inputs, name="pair", outputs=["dw", "db"],
                            seed=seed, mistakes={
                                "dw and db are not summed over the batch":
                                    lambda x, g: (g * x, g)})


@SETTINGS
@given(seed=seeds, which=st.integers(0, 1))
def test_a_mean_for_a_sum_is_named_as_one_over_n(seed, which):
    def answer(x, g):
        dw, db = _reference(x, g)
        return (dw / len(x), db) if which == 0 else (dw, g.mean(0))

    text = flat(_check(answer, seed))
    assert MEAN in text and "the size of dimension 0 of x" in text
    assert text.startswith(f"✗ {('dw', 'db')[which]}:")


@SETTINGS
@given(seed=seeds, factor=st.sampled_from([-1.0, 2.0, 0.5, 1.7]))
def test_another_factor_is_not_named_a_mean(seed, factor):
    text = flat(_check(lambda x, g: (factor * _reference(x, g)[0], g.sum(0)), seed))
    assert MEAN not in text and SUM not in text


@SETTINGS
@given(seed=seeds)
def test_a_sum_for_a_mean_is_named_as_n_times(seed):
    text = flat(_check(lambda x, g: (_reference(x, g)[0] * len(x), g.sum(0)), seed))
    assert SUM in text and "exactly N × the reference" in text
    assert "the size of dimension 0 of x" in text and text.startswith("✗ dw:")


@SETTINGS
@given(seed=seeds)
def test_one_unsummed_output_of_two_is_named_alone(seed):
    for which in (0, 1):
        def answer(x, g, which=which):
            dw, db = _reference(x, g)
            return (g * x, db) if which == 0 else (dw, g)

        text = flat(_check(answer, seed))
        assert "not summed over the batch" not in text  # the two-output slip is not named
        assert text.startswith(f"✗ {('dw', 'db')[which]}:") and "forgot to sum" in text
    both = flat(_check(lambda x, g: (g * x, g), seed))
    assert "dw and db are not summed over the batch" in both


def _dim_inputs(gen):
    dim = int(torch.randint(0, 2, (1,), generator=gen))
    return torch.randn(3, 4, generator=gen), dim


def _dim_reference(x, dim):
    return x.cumsum(dim)


@SETTINGS
@given(seed=seeds, fixed=st.integers(0, 1))
def test_an_argument_not_followed_is_named(seed, fixed):
    report = bl.check_by_hand(lambda x, dim: x.cumsum(fixed), _dim_reference, _dim_inputs,
                              name="cumsum", trials=6, seed=seed)
    text = flat(report)
    if "matches on" in text:  # some trials used the fixed value: the argument is named
        assert (f"right on every input where dim is {fixed} and wrong on every one where dim "
                f"is {1 - fixed}: the answer does not follow the argument dim") in text
    else:  # all trials agree, or none: nothing sets trials apart to name
        assert "does not follow the argument" not in text
    # A slip on every trial is not put down to the argument.
    other = flat(bl.check_by_hand(lambda x, dim: 2 * x.cumsum(dim), _dim_reference,
                                  _dim_inputs, name="cumsum", trials=6, seed=seed))
    assert "does not follow the argument" not in other


def _lined_up_inputs(gen):
    """dim and the number of rows drawn together: 3 rows when dim is 0, 5 when it is 1."""
    dim = int(torch.randint(0, 2, (1,), generator=gen))
    return torch.randn(3 if dim == 0 else 5, 4, generator=gen), dim


@SETTINGS
@given(seed=seeds)
def test_an_argument_that_lines_up_by_chance_is_not_named(seed):
    """An answer wrong on 5 rows is right where dim is 0 and wrong where it is 1, yet it
    follows dim: what it gives is not what the reference gives with dim = 0 put in."""
    report = bl.check_by_hand(lambda x, dim: x.cumsum(dim) * (1 if len(x) == 3 else 2),
                              _dim_reference, _lined_up_inputs, name="cumsum", trials=6,
                              seed=seed)
    text = flat(report)
    assert not report.ok or "matches on" not in text
    assert "does not follow the argument" not in text


@pytest.mark.parametrize("entries", ["xwb", [1, 2]])
def test_entries_must_be_names(entries):
    with pytest.raises(TypeError, match="entries: expected a sequence of names"):
        bl.check_by_hand(lambda x: x, reference=lambda x: 2 * x,
                         make_inputs=lambda gen: (torch.randn(3, generator=gen),),
                         entries=entries)


# ------------------------------------------ the same mistake on every trial, as data


def _trial(n: int) -> Trial:
    return Trial((torch.zeros(n),), (torch.zeros(n),), (torch.zeros(n),))


def test_trials_name_the_same_mistake_by_kind_and_field():
    four, six = _trial(4), _trial(6)
    mean4 = Diagnosis("factor", factor=Fraction(1, 4), readings=("mean",), size=4, dims=(0,))
    mean6 = Diagnosis("factor", factor=Fraction(1, 6), readings=("mean",), size=6, dims=(0,))
    # 1/N on both, N each trial's own size: the same mistake; not where N is not its size.
    assert _same_mistake(mean4, four, mean6, six)
    assert not _same_mistake(mean4, six, mean6, four)
    half = Diagnosis("factor", factor=Fraction(1, 2), readings=("missing",))
    assert _same_mistake(half, four, half, six) and not _same_mistake(half, four, mean6, six)
    assert not _same_mistake(Diagnosis("rough-factor", factor=1.3), four,
                             Diagnosis("rough-factor", factor=2.7), six)
    assert not _same_mistake(Diagnosis("sign"), four, Diagnosis("zeros"), six)

    def two(first: Diagnosis) -> Diagnosis:
        return Diagnosis("two-mistakes", parts=(first, Diagnosis("sign")))

    assert _same_mistake(two(Diagnosis("transposed")), four, two(Diagnosis("transposed")), six)
    assert not _same_mistake(two(Diagnosis("transposed")), four,
                             two(Diagnosis("reshape", shapes=((4,), (4, 1)))), six)
    assert not _same_mistake(Diagnosis("rows", rows=(1,), size=4), four,
                             Diagnosis("rows", rows=(2,), size=6), six)


def test_a_diagnosis_kind_is_checked_and_its_sentence_made_when_shown():
    with pytest.raises(ValueError, match="kind: expected one of"):
        Diagnosis("sideways")
    d = Diagnosis("missing-sum", dims=(0,), shapes=((4, 3), (3,)))
    assert str(d) == ("you forgot to sum over dimension 0 (the broadcast batch dimension): "
                      ".sum(0) of your answer matches the reference")
    assert d.likely().startswith("Likely mistake: you forgot") and d.likely().endswith(".")
