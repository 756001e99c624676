"""Lesson 11, pitfalls and tools: its exercises and its predictions.

Both exercises are method checks: the answer is not a gradient but code that
autograd runs, a tensor hook (Exercise 1) and a norm whose backward stays
finite at zero (Exercise 2). Each check builds new tensors from its seed,
runs a real backward pass through the learner's code and names the slip it
sees, when one fits.
"""

from __future__ import annotations

import torch

from ...graph import describe
from ._spec import Method, Prediction, Report, attempt, passed
from ._spec import failed as _fail

# --------------------------------------------------------------------------- Exercise 1

CLIP = "clip_hook"




def clip_cases(seed: int) -> list[tuple[torch.Tensor, float]]:
    """Gradients (float64) to send through the hook, each with its max_norm: two whose norm
    is above max_norm and one below, in a new order and of new sizes for every seed."""
    gen = torch.Generator().manual_seed(seed)
    cases = []
    for scale in (5.0, 0.05, 3.0):
        n = int(torch.randint(3, 8, (1,), generator=gen))
        max_norm = 0.5 + float(torch.rand((), generator=gen))
        grad = torch.randn(n, generator=gen, dtype=torch.float64)
        cases.append((grad * (scale * max_norm / grad.norm()), max_norm))
    order = torch.randperm(3, generator=gen).tolist()
    return [cases[i] for i in order]


def _clipped(grad: torch.Tensor, max_norm: float) -> torch.Tensor:
    norm = grad.norm()
    return grad * (max_norm / norm) if norm > max_norm else grad


def _through_hook(hook, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Register ``hook`` on an intermediate tensor whose incoming gradient is ``grad``;
    return (what the hook passed on, the hook's argument after the call)."""
    x = torch.ones_like(grad, requires_grad=True)
    feature = x * 2
    seen = []
    feature.register_hook(lambda g: seen.append(g) or None)  # runs before the learner's
    feature.register_hook(hook)
    (feature * grad).sum().backward()
    return x.grad / 2, seen[0]


def _check_clip_hook(clip_hook, seed: int) -> Report:
    if not callable(clip_hook):
        return _fail(CLIP, f"expected the function clip_hook(max_norm), got "
                           f"{type(clip_hook).__name__}.")
    for grad, max_norm in clip_cases(seed):
        where = f"(a gradient of norm {grad.norm().item():.3g}, max_norm {max_norm:.3g})"
        hook, failure = attempt(CLIP, clip_hook, max_norm, what="clip_hook", raised=lambda err,
                                max_norm=max_norm: f"clip_hook({max_norm:.3g}) raised "
                                f"{type(err).__name__}: {err}.")
        if failure is not None:
            return failure
        if not callable(hook):
            return _fail(CLIP, f"clip_hook(max_norm) returned {type(hook).__name__}; it should "
                               "return the hook, a function of grad.")
        try:
            passed_on, argument = _through_hook(hook, grad.clone())
        except Exception as err:
            return _fail(CLIP, f"the hook raised {type(err).__name__}: {err} {where}.", "error")
        want = _clipped(grad, max_norm)
        big = grad.norm() > max_norm
        if not torch.equal(argument, grad):
            slip = ("it changes the gradient it is given in place. A hook must leave its "
                    "argument alone and return the new gradient")
        elif torch.allclose(passed_on, want, rtol=1e-5, atol=1e-12):
            continue
        elif big and torch.equal(passed_on, grad):
            slip = ("the gradient went on unchanged although its norm is above max_norm: the "
                    "hook must return the rescaled gradient (a hook that returns None, or "
                    "rebinds grad without returning it, changes nothing)")
        elif torch.allclose(passed_on, grad.clamp(-max_norm, max_norm)):
            slip = ("it clamps each entry to ±max_norm, which is clip_grad_value_; the task "
                    "rescales the whole gradient by one factor, so that its norm becomes "
                    "max_norm")
        elif not big and torch.allclose(passed_on, grad * (max_norm / grad.norm())):
            slip = ("it rescales a gradient whose norm is already below max_norm; those must "
                    "pass unchanged")
        elif big and torch.allclose(passed_on, grad / grad.norm()):
            slip = "it rescales to norm 1 instead of max_norm"
        else:
            norm = passed_on.norm().item() if passed_on.shape == grad.shape else float("nan")
            slip = (f"the gradient passed on has norm {norm:.4g}; expected "
                    f"{want.norm().item():.4g}, pointing the same way as the original")
        return _fail(CLIP, f"{where}: {slip}.")
    return passed(CLIP, "clipped when the norm is above max_norm, "
                                              "untouched otherwise, on 3 new gradients")


# --------------------------------------------------------------------------- Exercise 2

SAFE = "safe_norm"


def norm_batches(seed: int) -> list[torch.Tensor]:
    """Two batches of vectors (float64), each with one all-zero row at a new place."""
    gen = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(2):
        rows = int(torch.randint(3, 7, (1,), generator=gen))
        cols = int(torch.randint(2, 5, (1,), generator=gen))
        v = torch.randn(rows, cols, generator=gen, dtype=torch.float64)
        v[int(torch.randint(0, rows, (1,), generator=gen))] = 0.0
        batches.append(v)
    return batches


GUARDED = ("Norm", "Cdist", "Dist")  # backward nodes that already guard the zero vector


def _check_safe_norm(safe_norm, seed: int) -> Report:
    if not callable(safe_norm):
        return _fail(SAFE, f"expected the function safe_norm(v), got {type(safe_norm).__name__}.")
    for v in norm_batches(seed):
        zero = int((v.abs().sum(dim=1) == 0).nonzero()[0])
        where = f"(on a batch of shape {tuple(v.shape)}, row {zero} all zeros)"
        leaf = v.clone().requires_grad_()
        norms, failure = attempt(SAFE, safe_norm, leaf, what="safe_norm", raised=lambda err,
                                 where=where: f"raised {type(err).__name__}: {err} {where}.")
        if failure is not None:
            return failure
        if not isinstance(norms, torch.Tensor):
            return _fail(SAFE, f"returned {type(norms).__name__}; expected a tensor of norms.")
        if norms.grad_fn is None:
            return _fail(SAFE, "its result has no graph: compute it from v with tensor "
                               "operations (no .detach(), .item() or torch.no_grad()).")
        names = describe(norms).names()
        guarded = sorted({n for n in names if any(g in n for g in GUARDED)})
        if guarded:
            return _fail(SAFE, f"safe_norm uses torch's norm ({', '.join(guarded)}), whose "
                               "backward already guards zero; build it from sum and sqrt as "
                               "asked.")
        plain = v.norm(dim=1)
        if norms.shape != plain.shape:
            return _fail(SAFE, f"{where}: returned shape {tuple(norms.shape)}; expected "
                               f"{tuple(plain.shape)}, one norm per row.")
        values = norms.detach()
        rows_ok = torch.isclose(values, plain, rtol=1e-9, atol=1e-12)
        if not rows_ok.all():
            others = torch.ones(len(v), dtype=torch.bool)
            others[zero] = False
            if torch.allclose(values, plain**2, rtol=1e-9):
                slip = "these are the squared norms: take the square root"
            elif rows_ok[others].all():
                slip = (f"at the zero row the norm is {values[zero].item():.3g}, not 0: a small "
                        "number added inside the sqrt shifts the result; choose the input of "
                        "sqrt with torch.where instead")
            else:
                bad = int((~rows_ok).nonzero()[0])
                slip = (f"the norm of row {bad} is {values[bad].item():.6g}; expected "
                        f"{plain[bad].item():.6g}")
            return _fail(SAFE, f"{where}: {slip}.")
        weights = torch.rand(len(v), generator=torch.Generator().manual_seed(seed + 1),
                             dtype=torch.float64) + 0.5
        try:
            (norms * weights).sum().backward()
        except Exception as err:
            return _fail(SAFE, f"backward through it raised {type(err).__name__}: {err} {where}.",
                         "error")
        grad = leaf.grad
        if grad is None or not torch.isfinite(grad).all():
            return _fail(SAFE, f"{where}: the gradient holds NaN or inf. At a zero vector, "
                               "sqrt's derivative 1/(2 sqrt(0)) meets a zero, and 0 · inf is "
                               "NaN; a where around the sqrt alone does not help, because "
                               "sqrt still sees the 0. Keep the 0 away from sqrt.")
        expected = v / plain.clamp(min=1e-300)[:, None] * weights[:, None]
        expected[zero] = 0.0
        if not torch.allclose(grad, expected, rtol=1e-9, atol=1e-12):
            return _fail(SAFE, f"{where}: the gradient is finite but wrong: it should be "
                               "v / ‖v‖ on each nonzero row and 0 on the zero row (worst "
                               f"entry off by {(grad - expected).abs().max().item():.3g}).")
    return passed(SAFE, "norms and gradients right, and finite at the "
                                             "zero vector, on 2 new batches")


EXERCISES = {
    "l11-reverse": Method(check=_check_clip_hook),
    "l11-safe-sqrt": Method(check=_check_safe_norm),
}

# --------------------------------------------------------------------------- predictions


def _inplace_answer():
    """Which in-place change breaks backward: after x + 1 or after x.sigmoid()?"""

    def fails(make_y):
        leaf = torch.tensor([1.0, 2.0], requires_grad=True)
        out = make_y(leaf)
        out.mul_(2)
        try:
            out.sum().backward()
            return False
        except RuntimeError:
            return True

    return "sigmoid" if fails(torch.sigmoid) else "add"


def _pileup_answer():
    """w.grad at step 3 when a doubling hook is registered on w inside the loop."""
    w = torch.tensor(1.0, requires_grad=True)
    for _step in range(3):
        w.register_hook(lambda grad: grad * 2)
        w.grad = None
        (3 * w).backward()
    return w.grad.item()


PREDICTIONS = {
    "l11-predict-inplace": Prediction(
        question="which in-place change breaks backward, the add (y = x + 1) or the sigmoid?",
        answer=_inplace_answer,
        hint="the version counter only matters for tensors a backward node saved. Which of the "
             "two backward formulas needs the value of y itself?",
        why="SigmoidBackward0 saved its output y to compute y(1 − y), and mul_ changed y after "
            "it was saved; the addition saved nothing. So the {answer} cell fails",
        choices=("add", "sigmoid"),
    ),
    "l11-predict-pileup": Prediction(
        question="w.grad at step 3, with the doubling hook registered inside the loop",
        answer=_pileup_answer,
        hint="register_hook adds a hook; it does not replace the ones already on w. How many "
             "hooks does w carry during the third backward, and what does each one do?",
        why="each step adds one more hook, so the third backward runs three of them: "
            "3 · 2 · 2 · 2 = {answer}",
    ),
}
