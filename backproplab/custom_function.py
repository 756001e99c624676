"""`check_function`: is a custom ``torch.autograd.Function``'s backward right?

For a custom ``torch.autograd.Function`` it

* builds each (output, input) Jacobian from ``backward`` (one-hot
  grad_outputs) and from central finite differences, and names the first
  wrong entry when they disagree;
* probes ``backward`` with different grad_outputs to catch one that ignores
  grad_output (a scalar output's Jacobian cannot show that);
* warns about tensors stashed as ``ctx`` attributes instead of
  ``ctx.save_for_backward``;
* runs ``torch.autograd.gradcheck`` and ``gradgradcheck``, telling "backward
  is not differentiable" (a warning) apart from "second derivatives are wrong".
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .check import Check, Report
from .diagnosis import Diagnosis, name_mistake
from .numerical import jacobian_rows
from .values import all_close, close_mask, dtype_name, fmt, index_text, type_name

__all__ = ["check_function"]

# gradcheck's own defaults: finite differences limit how tight this can be.
_JAC_RTOL, _JAC_ATOL, _JAC_EPS = 1e-3, 1e-5, 1e-6


def check_function(fn_class: type, *inputs: Any) -> Report:
    """Check a custom ``torch.autograd.Function``'s backward, readably.

    Floating-point tensor inputs are cast to float64 copies (the report says
    so). For every (input, output) pair the Jacobian from ``backward`` is
    compared with central finite differences, and a mismatch names the first
    wrong entry with both values and, when one fits, the likely mistake. Then
    ``torch.autograd.gradcheck`` and ``gradgradcheck`` run; a backward that is
    right but not itself differentiable is reported as a warning, not as
    wrong. Tensors stored as ``ctx`` attributes instead of through
    ``ctx.save_for_backward`` are warned about.

    >>> import torch
    >>> class Square(torch.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x ** 2
    ...     @staticmethod
    ...     def backward(ctx, grad):
    ...         (x,) = ctx.saved_tensors
    ...         return 2 * x * grad
    >>> print(check_function(Square, torch.tensor([1.0, 2.0])))
    check_function(Square): input 0 cast from float32 to float64 for the check
    ✓ d out/d input0: Jacobian from backward matches finite differences (2 × 2 entries)
    ✓ gradcheck: passed in float64
    ✓ gradgradcheck: passed (backward is itself differentiable and correct)
    """
    _check_arguments(fn_class, inputs)
    xs, title = _float64_leaves(fn_class, inputs)
    apply = fn_class.apply
    try:
        out = apply(*xs)
    except Exception as exc:  # the learner's forward: report, don't crash
        return Report((Check("forward", False, "error", _exc_text("forward", exc)),), title)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if not any(isinstance(o, torch.Tensor) and o.requires_grad for o in outs):
        what = type_name(out) if not isinstance(out, torch.Tensor) else "a tensor without a graph"
        message = (
            f"forward returned {what}; expected a tensor (or a tuple of tensors) computed "
            "from the inputs, so that backward has something to differentiate"
        )
        return Report((Check("forward", False, "error", message),), title)
    stash = _ctx_stash_warning(outs)
    checks: list[Check] = [stash] if stash is not None else []
    in_idx = [i for i, x in enumerate(xs) if isinstance(x, torch.Tensor) and x.requires_grad]
    out_idx = [j for j, o in enumerate(outs) if isinstance(o, torch.Tensor) and o.requires_grad]
    try:
        analytical = _analytical_jacobians(outs, xs, in_idx, out_idx)
    except Exception as exc:
        checks.append(Check("backward", False, "error", _exc_text("backward", exc)))
        return Report(tuple(checks), title)
    jac_checks, missed = _first_order_checks(apply, xs, outs, in_idx, out_idx, analytical)
    checks.extend(jac_checks)
    first_order_ok = all(c.ok for c in jac_checks)
    gc_ok, gc_err = _run_check(torch.autograd.gradcheck, apply, xs)
    if gc_ok:
        checks.append(Check("gradcheck", True, "pass", "passed in float64"))
    elif not first_order_ok:
        msg = "failed: backward does not match finite differences (details above)"
        checks.append(Check("gradcheck", False, "fail", msg))
    else:
        checks.append(Check("gradcheck", False, "fail", f"failed: {gc_err}"))
    if gc_ok and first_order_ok and not missed:
        checks.append(_gradgrad_check(apply, xs, in_idx))
    return Report(tuple(checks), title)


def _check_arguments(fn_class: Any, inputs: Sequence[Any]) -> None:
    """Refuse what cannot be checked, naming the argument."""
    if not (isinstance(fn_class, type) and issubclass(fn_class, torch.autograd.Function)):
        raise TypeError(
            "fn_class: expected a subclass of torch.autograd.Function, got "
            f"{fn_class.__name__ if isinstance(fn_class, type) else type_name(fn_class)}"
        )
    if not inputs:
        raise ValueError("inputs: expected at least one input, got none")
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor):
            continue
        if x.is_complex():
            raise TypeError(
                f"inputs[{i}]: expected real tensors, got a {dtype_name(x.dtype)} tensor "
                "(complex gradients follow other conventions and are not checked here)"
            )
        if x.is_floating_point() and x.numel() == 0:
            raise ValueError(f"inputs[{i}]: expected a tensor with elements, got an empty one")
        if x.is_floating_point() and not bool(torch.isfinite(x).all()):
            raise ValueError(
                f"inputs[{i}]: expected finite values, got NaN or inf: no derivative can be "
                "checked at such a point; pick an input where the function is finite"
            )
    if not any(isinstance(x, torch.Tensor) and x.is_floating_point() for x in inputs):
        kinds = ", ".join(
            dtype_name(x.dtype) + " tensor" if isinstance(x, torch.Tensor) else type_name(x)
            for x in inputs
        )
        raise TypeError(
            "inputs: expected at least one floating-point tensor (the gradients are checked "
            f"with respect to those), got {kinds}"
        )


def _float64_leaves(fn_class: type, inputs: Sequence[Any]) -> tuple[list[Any], str]:
    """float64 copies of the floating inputs, as leaves; and the report's title."""
    xs: list[Any] = []
    notes = []
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()):
            if x.dtype not in (torch.float64, torch.complex128):
                notes.append(f"input {i} cast from {dtype_name(x.dtype)} to float64")
                x = x.to(torch.complex128 if x.is_complex() else torch.float64)
            xs.append(x.detach().clone().requires_grad_(True))
        else:
            xs.append(x)
    title = f"check_function({fn_class.__name__}): " + (
        "; ".join(notes) + " for the check" if notes else "inputs already float64"
    )
    return xs, title


def _first_order_checks(
    apply: Callable[..., Any], xs: list[Any], outs: list[Any], in_idx: list[int],
    out_idx: list[int], analytical: Any,
) -> tuple[list[Check], list[int]]:
    """One check per (output, input) Jacobian, then one per input whose gradient ignores
    grad_output; and the inputs of the latter."""
    in_name = {i: f"input{i}" for i in in_idx}
    out_name = {j: "out" if len(outs) == 1 else f"out{j}" for j in out_idx}
    numerical = _numerical_jacobians(apply, xs, in_idx, out_idx)
    ignored = _ignores_grad_output(apply, xs, in_idx, out_idx, numerical)
    checks = []
    in_ok = dict.fromkeys(in_idx, True)
    for j in out_idx:
        for i in in_idx:
            checks.append(
                _jacobian_check(
                    f"d {out_name[j]}/d {in_name[i]}", analytical[j, i], numerical[j, i],
                    outs[j].shape, xs[i].shape, out_name[j], in_name[i],
                    ignored.get(i),
                )
            )  # fmt: skip
            in_ok[i] = in_ok[i] and checks[-1].ok
    # The Jacobian is built from one-hot grad_outputs, so with a scalar output
    # (grad_output always 1) a backward ignoring grad_output still matches it.
    missed = [i for i in ignored if in_ok[i]]
    for i in missed:
        checks.append(
            Check(
                f"grad_output → {in_name[i]}", False, "mismatch",
                "the Jacobian matches, but it only sends grad_outputs made of a single 1; "
                f"for other grad_outputs the gradient for {in_name[i]} does not change",
                diagnosis=ignored[i],
            )
        )  # fmt: skip
    return checks, missed


def _exc_text(where: str, exc: BaseException) -> str:
    first = str(exc).strip().splitlines()[0].rstrip(",:; ") if str(exc).strip() else ""
    return f"{where} raised {type(exc).__name__}: {first}"


def _ctx_stash_warning(outs: list[Any]) -> Check | None:
    """Tensors hung on ctx as attributes: they dodge save_for_backward's checks."""
    for o in outs:
        node = getattr(o, "grad_fn", None)
        if node is None:
            continue
        found = []
        for key, val in vars(node).items() if hasattr(node, "__dict__") else []:
            items = val if isinstance(val, (list, tuple)) else [val]
            if any(isinstance(t, torch.Tensor) for t in items):
                found.append(f"ctx.{key}")
        if found:
            return Check(
                "ctx", True, "warning",
                f"forward stores tensors as ctx attributes ({', '.join(found)}); use "
                "ctx.save_for_backward(...) and ctx.saved_tensors instead, so autograd can "
                "detect in-place changes to them and free them after backward",
            )  # fmt: skip
        return None
    return None


def _analytical_jacobians(
    outs: list[Any], xs: list[Any], in_idx: list[int], out_idx: list[int]
) -> dict[tuple[int, int], torch.Tensor]:
    """Jacobians (n_out, n_in) built row by row from one-hot backward calls."""
    jac: dict[tuple[int, int], torch.Tensor] = {}
    wrt = [xs[i] for i in in_idx]
    for j in out_idx:
        o = outs[j]
        rows: dict[int, list[torch.Tensor]] = {i: [] for i in in_idx}
        for k in range(o.numel()):
            onehot = torch.zeros_like(o).reshape(-1)
            onehot[k] = 1
            grads = torch.autograd.grad(
                o, wrt, grad_outputs=onehot.reshape(o.shape), retain_graph=True,
                allow_unused=True,
            )  # fmt: skip
            for i, g in zip(in_idx, grads, strict=False):
                g = torch.zeros_like(xs[i]) if g is None else g
                rows[i].append(g.detach().reshape(-1).to(torch.float64))
        for i in in_idx:
            n_in = xs[i].numel()
            jac[j, i] = (
                torch.stack(rows[i]) if rows[i] else torch.zeros(0, n_in, dtype=torch.float64)
            )
    return jac


def _numerical_jacobians(
    apply: Callable[..., Any], xs: list[Any], in_idx: list[int], out_idx: list[int]
) -> dict[tuple[int, int], torch.Tensor]:
    plain = [x.detach() if isinstance(x, torch.Tensor) else x for x in xs]
    jac: dict[tuple[int, int], torch.Tensor] = {}
    for j in out_idx:

        def f(*args: Any, _j: int = j) -> torch.Tensor:
            out = apply(*args)
            return out[_j] if isinstance(out, (tuple, list)) else out

        for i in in_idx:
            # The loop, not vmap: a custom Function need not support vmap.
            rows = jacobian_rows(f, plain, i, _JAC_EPS)  # (n_in, n_out)
            jac[j, i] = rows.T.contiguous()
    return jac


def _jacobian_check(
    name: str,
    ana: torch.Tensor,
    num: torch.Tensor,
    out_shape: Sequence[int],
    in_shape: Sequence[int],
    out_name: str,
    in_name: str,
    ignored: Diagnosis | None = None,
) -> Check:
    size = f"{ana.shape[0]} × {ana.shape[1]} entries"
    bad = ~close_mask(ana, num, _JAC_RTOL, _JAC_ATOL)
    if not bad.any():
        msg = f"Jacobian from backward matches finite differences ({size})"
        return Check(name, True, "pass", msg)
    r, c = (int(v) for v in bad.nonzero()[0])
    where = f"d {out_name}{index_text(r, out_shape)} / d {in_name}{index_text(c, in_shape)}"
    msg = (
        f"Jacobian mismatch at entry [{r}, {c}] ({where}): "
        f"backward gives {fmt(ana[r, c].item())}, "
        f"finite differences give {fmt(num[r, c].item())}; {int(bad.sum())} of {bad.numel()} "
        f"entries differ (rtol={_JAC_RTOL:g}, atol={_JAC_ATOL:g})"
    )
    if ignored is not None:
        # Verified by probing backward directly; it explains the whole pattern of
        # wrong entries, so it wins over any fit of the Jacobian's numbers.
        diag: Diagnosis | None = ignored
    else:
        diag = name_mistake(ana, num, _JAC_RTOL, _JAC_ATOL, accumulation=False)
        if diag is not None:
            diag = dataclasses.replace(diag, subject=("backward's Jacobian", "backward's"))
    return Check(
        name, False, "mismatch", msg, diagnosis=diag, max_abs_diff=float((ana - num).abs().max())
    )


def _ignores_grad_output(
    apply: Callable[..., Any],
    xs: list[Any],
    in_idx: list[int],
    out_idx: list[int],
    numerical: dict[tuple[int, int], torch.Tensor],
) -> dict[int, Diagnosis]:
    """Inputs whose gradient from backward does not depend on grad_output at all.

    A correct backward is linear in grad_output: scaling grad_output scales
    the gradient. So if three quite different grad_outputs (all ones, all
    -0.5, and random values) give the same non-zero gradient, backward
    cannot be using grad_output. Returns input index -> diagnosis; an
    exception, or anything short of equality within tolerance, claims nothing.
    """
    if not in_idx or not out_idx:
        return {}
    gen = torch.Generator().manual_seed(0)
    probes: list[list[torch.Tensor]] = []
    try:
        outs = apply(*xs)
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        wrt = [xs[i] for i in in_idx]
        chosen = [outs[j] for j in out_idx]
        makers = (
            lambda o: torch.ones_like(o),
            lambda o: torch.full_like(o, -0.5),
            # Random in [0.5, 2.5) with random signs: no entry is 0 or ±1.
            lambda o: (torch.rand(o.shape, generator=gen, dtype=torch.float64) * 2 + 0.5)
            * torch.where(torch.rand(o.shape, generator=gen) < 0.5, -1.0, 1.0).to(
                torch.float64
            ),
        )
        for make in makers:
            vs = [make(o).to(o.dtype) for o in chosen]
            grads = torch.autograd.grad(
                chosen, wrt, grad_outputs=vs, retain_graph=True, allow_unused=True
            )
            probes.append([
                torch.zeros_like(xs[i]) if g is None else g.detach()
                for i, g in zip(in_idx, grads, strict=True)
            ])  # fmt: skip
    except Exception:  # backward errors are reported by the Jacobian check
        return {}
    found: dict[int, Diagnosis] = {}
    for k, i in enumerate(in_idx):
        first = probes[0][k].to(torch.float64).reshape(-1)
        if first.is_complex() or bool((first.abs() <= _JAC_ATOL).all()):
            continue  # an all-zero gradient is the same for every grad_output anyway
        if not all(
            all_close(p[k].to(torch.float64).reshape(-1), first, _JAC_RTOL, _JAC_ATOL)
            for p in probes[1:]
        ):
            continue
        # What backward should give when grad_output is all ones: the column
        # sums of the (finite-difference) Jacobians, i.e. the local derivative.
        local = sum(numerical[j, i].sum(dim=0) for j in out_idx)
        if all_close(first, local, _JAC_RTOL, _JAC_ATOL):
            found[i] = Diagnosis("grad-output-ignored")
        else:
            extra = name_mistake(first, local, _JAC_RTOL, _JAC_ATOL, accumulation=False)
            also = () if extra is None else (
                dataclasses.replace(extra, subject=("its result", "its")),)
            found[i] = Diagnosis("grad-output-unused", parts=also)
    return found


def _run_check(
    fn: Callable[..., Any], apply: Callable[..., Any], xs: list[Any]
) -> tuple[bool, str]:
    # gradgradcheck draws its grad_outputs from the global generator: seeded here, so that
    # the verdict depends on the inputs alone and the caller's random state is left alone.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        try:
            ok = bool(fn(apply, tuple(xs), raise_exception=True))
            return ok, ""
        except Exception as exc:  # GradcheckError, or the learner's code raising
            return False, _exc_text(fn.__name__, exc).split(": ", 1)[-1]


def _gradgrad_check(apply: Callable[..., Any], xs: list[Any], in_idx: list[int]) -> Check:
    """gradgradcheck, telling 'backward not differentiable' apart from 'wrong'."""
    not_diff = (
        "backward is correct but is not itself differentiable, so double backward "
        "(second derivatives, create_graph=True) fails: {why}. Fine for first-order "
        "training; to support it, compute backward from differentiable torch operations"
    )
    try:
        outs = apply(*xs)
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        outs = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
        grads = torch.autograd.grad(
            # grad_outputs that require grad, as gradgradcheck uses: a backward
            # that only detaches a saved tensor still has a grad_fn then, and
            # is caught below as wrong rather than excused as non-differentiable.
            outs, [xs[i] for i in in_idx],
            grad_outputs=[torch.ones_like(o, requires_grad=True) for o in outs],
            create_graph=True, allow_unused=True,
        )  # fmt: skip
    except Exception as exc:
        why = _exc_text("it", exc)
        return Check("gradgradcheck", True, "warning", not_diff.format(why=why))
    # @once_differentiable hands back results whose grad_fn is an Error node.
    if any(g is not None and g.grad_fn is not None and "Error" in g.grad_fn.name() for g in grads):
        why = "backward is marked @once_differentiable"
        return Check("gradgradcheck", True, "warning", not_diff.format(why=why))
    if all(g is None or not g.requires_grad for g in grads):
        why = (
            "its result has no grad_fn (it leaves the graph, e.g. via .detach(), .item(), "
            "numpy or no_grad)"
        )
        return Check("gradgradcheck", True, "warning", not_diff.format(why=why))
    ok, err = _run_check(torch.autograd.gradgradcheck, apply, xs)
    if ok:
        return Check(
            "gradgradcheck", True, "pass", "passed (backward is itself differentiable and correct)"
        )
    if re.search(r"once_differentiable|does not require grad|does not have a grad_fn", err):
        return Check("gradgradcheck", True, "warning", not_diff.format(why=err))
    return Check(
        "gradgradcheck", False, "fail",
        "backward gives the right first derivatives, but differentiating backward itself "
        f"gives wrong second derivatives (does backward use a detached copy of a saved "
        f"tensor?): {err}",
    )  # fmt: skip
