"""Tests of backproplab.check: compare, Report/Check and diagnose."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from backproplab.check import Check, Report, compare
from backproplab.diagnosis import diagnose

SETTINGS = settings(max_examples=25, deadline=None)



def flat(obj: object) -> str:
    """A report's text with its line wrapping undone, for looking up phrases."""
    return " ".join(str(obj).split())

def shapes(min_dims: int = 1, max_dims: int = 3, min_side: int = 2, max_side: int = 6):
    return st.lists(st.integers(min_side, max_side), min_size=min_dims, max_size=max_dims).map(
        tuple
    )


def said(manual, reference) -> str | None:
    """What `diagnose` says, in words (None when it names nothing)."""
    d = diagnose(manual, reference)
    return None if d is None else str(d)


def ref_tensor(shape: tuple[int, ...], seed: int, dtype=torch.float32) -> torch.Tensor:
    """A 'correct gradient': random, with no zeros and no accidental symmetry."""
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(shape, generator=g, dtype=torch.float64) + 0.5
    sign = torch.randint(0, 2, shape, generator=g).to(torch.float64) * 2 - 1
    return (t * sign).to(dtype)


seeds = st.integers(0, 10_000)


# --------------------------------------------------------------------------
# Report / Check
# --------------------------------------------------------------------------


def test_report_str_bool_and_assert_ok():
    good = Report((Check("dx", True, "exact", "exact match"),))
    bad = Report((Check("dx", True, "exact", "exact match"), Check("dw", False, "mismatch", "no")))
    assert str(good) == "✓ dx: exact match"
    assert str(bad).splitlines() == ["✓ dx: exact match", "✗ dw: no"]
    assert good.ok and bool(good) and not bad.ok and not bad
    assert good.assert_ok() is None  # a graded cell's value must not be a Report
    with pytest.raises(AssertionError) as info:
        bad.assert_ok()
    assert str(info.value) == "\n" + str(bad)  # on its own line, below "AssertionError:"
    assert bad["dw"].verdict == "mismatch" and bad[0].name == "dx" and len(bad) == 2


def test_report_title_and_warning_symbol():
    r = Report((Check("ctx", True, "warning", "careful"),), title="Title")
    assert str(r) == "Title\n⚠ ctx: careful"
    assert r.ok


def test_html_is_escaped_and_coloured():
    r = compare("<dz/dx>", torch.tensor([1.0, 2.0]), torch.tensor([1.0, 3.0]))
    page = r._repr_html_()
    assert "&lt;dz/dx&gt;" in page and "<dz/dx>" not in page
    assert "#cf222e" in page  # red for a failure
    assert "#1a7f37" in compare("x", 1.0, 1.0)._repr_html_()  # green for a pass


# --------------------------------------------------------------------------
# compare: verdicts and messages
# --------------------------------------------------------------------------


def test_exact_close_mismatch():
    ref = torch.tensor([1.0, 2.0, 3.0])
    exact = compare("dx", ref.clone(), ref)
    assert str(exact) == "✓ dx: exact match"
    close = compare("dx", ref + 1e-6, ref)
    assert close.ok and close[0].verdict == "close"
    assert "rtol=1.3e-06, atol=1e-05 for float32" in flat(close)
    wrong = compare("dx", torch.tensor([1.0, 2.0, 4.0]), ref)
    assert not wrong.ok and wrong[0].verdict == "mismatch"
    assert wrong[0].max_abs_diff == pytest.approx(1.0)
    assert wrong[0].rel_error == pytest.approx(1 / 3)
    assert "max abs diff 1" in flat(wrong) and "relative error 0.333" in flat(wrong)
    assert "worst entry [2]: yours 4, expected 3" in flat(wrong)


def test_shape_mismatch_message_and_transpose():
    ref = ref_tensor((5, 3), 0)
    r = compare("dW", ref.T, ref)
    assert flat(r).startswith("✗ dW: dW has shape (3, 5); expected (5, 3)")
    assert "transposed" in flat(r)
    assert r[0].verdict == "shape"
    # Reversed shape but values unrelated: still says it looks transposed.
    other = compare("dW", ref_tensor((3, 5), 1), ref)
    assert "looks transposed" in flat(other)


def test_assertion_message_reads_on_its_own():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    (x**2).sum().backward()
    with pytest.raises(AssertionError) as info:
        compare("dz/dx", -2 * x.detach(), x.grad).assert_ok()
    text = flat(info.value)
    assert text.startswith("✗ dz/dx: mismatch")
    assert "sign is flipped" in text
    assert "max abs diff 8" in text


def test_numbers_int_float_and_numpy():
    assert compare("dz/dx", 20, torch.tensor(20.0))[0].verdict == "exact"
    assert compare("dz/dx", 20.0, torch.tensor([20.0])).ok  # a number fits any 1-element shape
    assert compare("dz/dx", np.array([1.0, 2.0]), torch.tensor([1.0, 2.0])).ok
    assert compare("dz/dx", np.float32(3.0), 3).ok
    assert compare("dz/dx", [[1, 2], [3, 4]], torch.tensor([[1.0, 2], [3, 4]])).ok
    ints = compare("n", torch.tensor([1, 2]), torch.tensor([1, 3]))
    assert not ints.ok and "integers" in flat(ints)
    # Integer vs float tensors: compared by value, the dtype difference noted.
    mixed = compare("dx", torch.tensor([1, 2]), torch.tensor([1.0, 2.0]))
    assert mixed.ok and "dtype int64 vs float32" in flat(mixed)


def test_float32_vs_float64_uses_looser_tolerance_and_notes_dtype():
    ref64 = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64)
    r = compare("dx", ref64.float(), ref64)
    assert r.ok and r[0].verdict == "close"
    assert "for float32" in flat(r) and "dtype float32 vs float64" in flat(r)
    # The same values, both float64, are held to the float64 tolerance.
    # A float32 matmul copied into float64 is held to the float64 tolerance,
    # and the diagnosis recognises accumulated float32 round-off.
    x = torch.randn(30, 30, generator=torch.Generator().manual_seed(0))
    strict = compare("dx", (x @ x).double(), x.double() @ x.double())
    assert not strict.ok and "round-off" in flat(strict)


def test_float32_round_off_is_named_only_where_the_values_are_float32s():
    x = torch.randn(30, 30, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    exact = x @ x
    # A float64 estimate, each entry off by about 1e-6 of the scale: near, and nothing
    # said of float32.
    noise = torch.randn(30, 30, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    estimate = compare("dx", exact * (1 + 1e-6 * noise), exact)
    assert not estimate.ok and estimate[0].diagnosis.kind == "near"
    assert "float32" not in str(estimate[0].diagnosis).replace("not float32's", "")
    # A product of the same size made in float32: float32 round-off.
    rounded = compare("dx", (x.float() @ x.float()).double(), exact)
    assert not rounded.ok and rounded[0].diagnosis.kind == "round-off-32"


def test_a_factor_within_round_off_of_one_is_not_named_a_factor():
    x = torch.randn(30, 30, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    # A uniform scale of 1 + 1e-6: near, not "off by a constant factor of about 1".
    scaled = compare("dx", x * (1 + 1e-6), x)
    assert not scaled.ok and scaled[0].diagnosis.kind == "near"
    # A scale just past the tolerance is a factor, said with the digits that tell it from 1.
    off = compare("dx", x * 1.00012, x)
    assert off[0].diagnosis.kind == "rough-factor"
    assert "about 1.00012 " in str(off[0].diagnosis)


def test_explicit_tolerance_overrides_default():
    r = compare("dx", 1.01, 1.0, rtol=0.02)
    assert r.ok and "rtol=0.02" in flat(r)
    assert not compare("dx", 1.01, 1.0).ok
    with pytest.raises(ValueError, match="rtol"):
        compare("dx", 1.0, 1.0, rtol=-1)


def test_nan_and_inf_positions():
    nan = torch.tensor([1.0, math.nan])
    assert compare("dx", nan, nan.clone()).ok  # NaN in the same place on both sides
    assert compare("dx", torch.tensor([math.inf]), torch.tensor([math.inf])).ok
    r = compare("dx", nan, torch.tensor([1.0, 2.0]))
    assert not r.ok and "NaN" in flat(r)


@pytest.mark.parametrize(
    ("bad", "kind"),
    [("3", "str"), (None, "None"), (True, "bool"), ({"a": 1}, "dict"), (["a"], "list")],
)
def test_bad_inputs_name_the_argument(bad, kind):
    expected = rf"^manual: expected a tensor, number or numpy array, got.*{kind}"
    if bad is not None:  # a missing answer is a failed check instead: see below
        with pytest.raises(TypeError, match=expected):
            compare("dx", bad, torch.tensor(1.0))
    with pytest.raises(TypeError, match=r"^reference: expected a tensor"):
        compare("dx", torch.tensor(1.0), bad)
    with pytest.raises(TypeError, match=r"^manual: "):
        diagnose(bad, torch.tensor(1.0))


def test_missing_answer_is_a_failed_check_not_a_crash():
    report = compare("dx", None, torch.tensor([1.0, 2.0]))
    assert not report.ok and report.checks[0].verdict == "missing"
    assert str(report).startswith("✗ dx: dx is None")
    with pytest.raises(AssertionError, match="backward"):
        report.assert_ok()


def test_bool_tensor_and_bad_name_rejected():
    with pytest.raises(TypeError, match="manual: .*boolean tensor"):
        compare("dx", torch.tensor([True]), torch.tensor([1.0]))
    with pytest.raises(TypeError, match="name: expected a str"):
        compare(3, 1.0, 1.0)
    with pytest.raises(TypeError, match="advice: expected a str, got NoneType"):
        compare("dx", 1.0, 2.0, advice=None)


# --------------------------------------------------------------------------
# diagnose: one test per mistake, each built by applying exactly that mistake
# --------------------------------------------------------------------------


@SETTINGS
@given(m=st.integers(2, 6), n=st.integers(2, 6), seed=seeds)
def test_diagnose_transposed(m, n, seed):
    ref = ref_tensor((m, n), seed)
    d = said(ref.T.contiguous(), ref)
    assert d is not None and "transposed" in d
    assert diagnose(ref.T.contiguous(), ref).kind == "transposed"
    assert "transposed" in flat(compare("dW", ref.T, ref))
    assert compare("dW", ref.T, ref)[0].diagnosis.kind == "transposed"


@SETTINGS
@given(shape=shapes(2, 4, 2, 4), seed=seeds)
def test_diagnose_permuted_dims(shape, seed):
    ref = ref_tensor(shape, seed)
    perm = tuple(reversed(range(ref.ndim)))
    if ref.permute(perm).shape == ref.shape and ref.ndim == 2:
        perm = (1, 0)
    d = said(ref.permute(perm).contiguous(), ref)
    assert d is not None and ("transposed" in d or "wrong order" in d)


@SETTINGS
@given(batch=st.integers(2, 7), feat=shapes(1, 2), seed=seeds)
def test_diagnose_missing_sum_over_batch(batch, feat, seed):
    per_sample = ref_tensor((batch, *feat), seed)
    ref = per_sample.sum(0)
    d = said(per_sample, ref)
    assert d is not None
    assert "forgot to sum over dimension 0 (the broadcast batch dimension)" in d
    text = flat(compare("db", per_sample, ref))
    assert text.startswith("✗ db: db has shape (") and "forgot to sum over dimension 0" in text


@SETTINGS
@given(rows=st.integers(2, 5), cols=st.integers(2, 5), seed=seeds)
def test_diagnose_missing_keepdim_sum(rows, cols, seed):
    full = ref_tensor((rows, cols), seed)
    ref = full.sum(1, keepdim=True)  # a (rows, 1) bias broadcast along dim 1
    d = said(full, ref)
    assert d is not None and "forgot to sum over dimension 1" in d and "keepdim=True" in d


def test_diagnose_mean_instead_of_missing_sum():
    full = ref_tensor((4, 3), 0)
    d = said(full, full.mean(0))
    assert d is not None and "mean" in d


def test_diagnose_reduced_where_reference_keeps():
    full = ref_tensor((4, 3), 0)
    d = said(full.sum(0), full)
    assert d is not None and "summed over dimension 0" in d


def test_diagnose_right_values_wrong_shape():
    ref = ref_tensor((3, 1), 0)
    d = said(ref.reshape(3), ref)
    assert d is not None and "reshape(3, 1)" in d


@SETTINGS
@given(shape=shapes(0, 3, 1, 5), seed=seeds)
def test_diagnose_sign_flip(shape, seed):
    ref = ref_tensor(shape, seed)
    d = said(-ref, ref)
    assert d is not None and "sign is flipped" in d


@SETTINGS
@given(shape=shapes(1, 3, 4, 7), dim=st.integers(0, 2), seed=seeds)
def test_diagnose_average_instead_of_sum(shape, dim, seed):
    dim = min(dim, len(shape) - 1)
    ref = ref_tensor(shape, seed)
    n = shape[dim]
    d = said(ref / n, ref)
    assert d is not None
    assert f"off by a factor of 1/N with N = {n}, the size of dimension" in d
    assert "average instead of sum" in d
    up = said(ref * n, ref)
    assert up is not None and f"N = {n}" in up


def test_diagnose_one_over_n_message_exact_wording():
    ref = ref_tensor((5, 3), 0)
    d = said(ref / 5, ref)
    assert ("off by a factor of 1/N with N = 5, the size of dimension 0 of your answer: "
            "did you average") in d


@SETTINGS
@given(shape=shapes(0, 3, 1, 5), seed=seeds)
def test_diagnose_doubled_names_both_possibilities(shape, seed):
    ref = ref_tensor(shape, seed)
    d = said(2 * ref, ref)
    assert d is not None and "exactly 2 ×" in d
    assert "stray factor 2" in d and "zero_grad" in d and ".grad" in d
    half = said(ref / 2, ref)
    assert half is not None and "missing factor 2" in half and "zero_grad" in half


@SETTINGS
@given(shape=shapes(0, 3, 1, 5), seed=seeds)
def test_diagnose_tripled_accumulation(shape, seed):
    ref = ref_tensor(shape, seed)
    d = said(3 * ref, ref)
    assert d is not None and "3 backward passes" in d and "zero_grad" in d


# Two mistakes at once: one of arrangement, one of value.
ARRANGE = {
    "transposed": (lambda t: t.T.contiguous(), "it is transposed"),
    # four per-sample copies whose sum is the reference
    "unsummed": (lambda t: t.expand(4, *t.shape) / 4, "forgot to sum over dimension 0"),
    "reshaped": (lambda t: t.reshape(-1).contiguous(), "the shape is wrong (.reshape("),
}
VALUE = {
    "negated": (lambda t: -t, "the sign is flipped"),
    "doubled": (lambda t: 2 * t, "exactly 2 × the reference"),
    "negative half": (lambda t: -t / 2, "exactly -1/2 × the reference"),
}


@SETTINGS
@given(
    rows=st.integers(2, 5),
    cols=st.integers(2, 5),
    seed=seeds,
    arrange=st.sampled_from(sorted(ARRANGE)),
    value=st.sampled_from(sorted(VALUE)),
)
def test_diagnose_two_mistakes_names_both(rows, cols, seed, arrange, value):
    ref = ref_tensor((rows, cols), seed)
    move, move_words = ARRANGE[arrange]
    scale, value_words = VALUE[value]
    wrong = scale(move(ref))
    if arrange == "transposed" and rows == cols and torch.allclose(ref, ref.T):
        return  # a symmetric reference hides a transpose
    d = said(wrong, ref)
    assert d is not None and d.startswith("two mistakes: "), d
    assert move_words in d and value_words in d, d
    text = flat(compare("dW", wrong, ref))
    assert "Likely two mistakes: " in text and "Likely mistake" not in text


def test_diagnose_two_mistakes_permuted_and_negated():
    ref = ref_tensor((2, 3, 4), 0)
    d = said(-ref.permute(2, 0, 1).contiguous(), ref)
    assert d is not None and "wrong order (.permute(1, 2, 0))" in d and "sign is flipped" in d


def test_single_mistakes_are_not_reported_as_two():
    ref = ref_tensor((3, 4), 0)
    for wrong in (ref.T, -ref, 2 * ref, ref.expand(5, 3, 4)):
        d = diagnose(wrong.contiguous(), ref)
        assert d is not None and d.kind != "two-mistakes" and not str(d).startswith("two"), d
    # Unrelated values in a reversed shape: no pairing is claimed.
    assert diagnose(ref_tensor((4, 3), 1), ref) is None


def test_diagnose_generic_factor_and_negative_factor():
    ref = ref_tensor((4,), 0)
    d = said(1.7 * ref, ref)
    assert d is not None and "constant factor of about 1.7" in d
    neg = said(-2 * ref, ref)
    assert neg is not None and "sign is flipped" in neg and "factor of 2" in neg
    # Two scalars always differ by "some factor": that is no diagnosis.
    assert diagnose(19.0, torch.tensor(20.0)) is None


@SETTINGS
@given(shape=shapes(0, 3, 1, 5), seed=seeds)
def test_diagnose_all_zeros(shape, seed):
    ref = ref_tensor(shape, seed)
    d = said(torch.zeros_like(ref), ref)
    assert d is not None and "all zeros" in d


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_diagnose_nan_inf(bad):
    ref = ref_tensor((2, 3), 0)
    manual = ref.clone()
    manual[1, 2] = bad
    d = said(manual, ref)
    word = "NaN" if math.isnan(bad) else "inf"
    assert d is not None and word in d and "[1, 2]" in d


# --------------------------------------------------------------------------
# diagnose never accuses a right answer, nor invents a mistake
# --------------------------------------------------------------------------


@SETTINGS
@given(shape=shapes(0, 3, 1, 6), seed=seeds)
def test_correct_and_float32_roundoff_never_diagnosed(shape, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    y = torch.randn(shape, generator=g, dtype=torch.float64)
    exact = 2 * x * y + x.sin()
    f32 = 2 * x.float() * y.float() + x.float().sin()  # the same maths in float32
    for manual, ref in ((exact, exact), (f32, exact), (exact, f32), (f32, f32.double())):
        report = compare("g", manual, ref)
        assert report.ok, str(report)
        assert diagnose(manual, ref) is None


@SETTINGS
@given(shape=shapes(1, 3, 2, 5), seed=seeds)
def test_unrelated_values_get_no_diagnosis(shape, seed):
    a = ref_tensor(shape, seed)
    b = ref_tensor(shape, seed + 1)
    assert diagnose(a, b) is None


# --------------------------------------------------------------------------
# properties of compare
# --------------------------------------------------------------------------

finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False, width=32)


@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    shape=shapes(0, 2, 1, 4),
    dtype=st.sampled_from([torch.float32, torch.float64]),
)
def test_compare_symmetric_and_never_crashes(data, shape, dtype):
    n = math.prod(shape)
    a = torch.tensor(data.draw(st.lists(finite, min_size=n, max_size=n)), dtype=dtype)
    b_vals = data.draw(st.lists(finite, min_size=n, max_size=n))
    b = torch.tensor(b_vals, dtype=dtype).reshape(shape)
    a = a.reshape(shape)
    for manual, ref in ((a, b), (a, a.clone()), (a, -a), (a, 2 * a)):
        one, two = compare("g", manual, ref), compare("g", ref, manual)
        # The closeness test is symmetric, so ok and verdict never change on a swap
        # (only rel_error, which is relative to the reference, does).
        assert one.ok == two.ok
        assert one[0].verdict == two[0].verdict
        str(one), one._repr_html_()


@settings(max_examples=30, deadline=None)
@given(data=st.data(), shape=shapes(0, 3, 1, 4))
def test_compare_never_crashes_on_extreme_finite_values(data, shape):
    n = math.prod(shape)
    values = st.floats(allow_nan=False, allow_infinity=False)
    a = torch.tensor(data.draw(st.lists(values, min_size=n, max_size=n)), dtype=torch.float64)
    b = torch.tensor(data.draw(st.lists(values, min_size=n, max_size=n)), dtype=torch.float64)
    r = compare("g", a.reshape(shape), b.reshape(shape))
    assert isinstance(str(r), str) and r[0].verdict in {"exact", "close", "mismatch"}


def test_failure_messages_fit_the_lab_and_hide_the_package_frame():
    import traceback

    ref = torch.arange(12.0).reshape(3, 4)
    for wrong in (ref.T, ref * 2, ref + 100, ref.sum(0)):
        report = compare("a long gradient name dL/dW1", wrong, ref)
        assert all(len(line) <= 88 for line in str(report).splitlines()), str(report)
    with pytest.raises(AssertionError) as info:
        compare("dW", ref * 2, ref).assert_ok()
    frames = traceback.extract_tb(info.tb)
    hidden = [f for f in info.traceback if f.frame.f_locals.get("__tracebackhide__")]
    assert frames[-1].name == "assert_ok" and hidden  # IPython and pytest skip this frame
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_an_unnamed_mismatch_still_says_what_to_try_next():
    text = flat(compare("df/dx", 51.0, torch.tensor(3.0)))
    assert "no single common mistake" in text and "torch.autograd.grad of that step" in text
    assert text.index("Work out") < text.index("worst entry")  # the advice comes first


# --------------------------------------------------------------------------
# a mismatch confined to a few rows
# --------------------------------------------------------------------------


def test_repeated_index_overwritten_is_located_in_its_row():
    g = torch.Generator().manual_seed(3)
    ids = torch.tensor([0, 3, 3, 1, 4, 3, 2])
    dout = torch.randn(7, 4, generator=g, dtype=torch.float64)
    ref = torch.zeros(6, 4, dtype=torch.float64).index_add_(0, ids, dout)
    overwritten = torch.zeros(6, 4, dtype=torch.float64)
    overwritten[ids] = dout  # the last lookup of row 3 wins; the others are lost
    d = said(overwritten, ref)
    assert d is not None and d.startswith("only row 3 differs (the other 5 of 6 rows match)")
    assert "index used more than once" in d


def test_rows_with_a_flipped_sign_are_named():
    ref = ref_tensor((5, 3), 0, torch.float64)
    wrong = ref.clone()
    wrong[[1, 4]] *= -1
    d = diagnose(wrong, ref)
    assert (d.kind, d.rows, d.size) == ("sign-in-rows", (1, 4), 5)
    assert str(d) == "the sign is flipped in rows 1, 4 only (the other 3 of 5 rows match)"


def test_entries_at_the_edge_of_a_formula_are_located():
    x = torch.tensor([-1.0, 0.0, 2.0, 0.0, 3.0], dtype=torch.float64)
    d = said((x >= 0).double(), (x > 0).double())  # ReLU's slope at 0 taken as 1
    assert d is not None and d.startswith("only entries 1, 3 differ") and "x = 0" in d


@SETTINGS
@given(shape=shapes(1, 3, 4, 6), seed=seeds, data=st.data())
def test_a_row_diagnosis_names_exactly_the_rows_that_differ(shape, seed, data):
    ref = ref_tensor(shape, seed, torch.float64)
    rows = data.draw(st.sets(st.integers(0, shape[0] - 1), min_size=1, max_size=shape[0] // 2))
    wrong = ref.clone()
    wrong[sorted(rows)] += 1.0
    d = diagnose(wrong, ref)
    assert d is not None and d.kind == "rows" and d.rows == tuple(sorted(rows))
    assert f"differ{'s' if len(rows) == 1 else ''} (the other" in str(d)


def test_no_row_diagnosis_when_most_rows_differ():
    ref = ref_tensor((4, 3), 0, torch.float64)
    wrong = ref.clone()
    wrong[:3] += 1.0
    assert diagnose(wrong, ref) is None
