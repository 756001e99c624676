"""Lesson 24, exercise 3 (``l24-compensated-step``, method): a 16-bit weight update that
keeps what rounding drops in a 16-bit compensation."""

from __future__ import annotations

from typing import Any

import torch

from .._spec import Method, failure, is_failure

STEPS = 200  # steps of each training the check runs
WIDTH = 64  # weights per training
SECTION_4 = ([0.05, 0.3, 1.0], 0.002, 1000)  # section 4's gradient, learning rate, steps
# How far from the exact sum of its updates a compensated weight may end, in gaps: the
# rounding of the last step (half a gap) and of comp itself; every slip ends ten or more off.
LIMIT = 2.0


def gap(w: torch.Tensor) -> torch.Tensor:
    """The spacing of ``w``'s 16-bit dtype at each |w|: the gap to the next number up,
    for a normal number (float16: 2**-10 between 1 and 2; bfloat16: 2**-7), in float64."""
    info = torch.finfo(w.dtype)
    mantissa = {torch.float16: 10, torch.bfloat16: 7}[w.dtype]
    exponent = torch.floor(torch.log2(w.double().abs().clamp(min=info.tiny)))
    return torch.exp2(exponent - mantissa)


def _updates(gen: torch.Generator, w: torch.Tensor, drift: bool) -> torch.Tensor:
    """One step's float32 update for every weight: a twentieth to half a gap, all of one
    sign (``drift``: plain 16-bit steps lose every one of them) or of either sign."""
    size = torch.rand(w.shape, generator=gen, dtype=torch.float64) if drift else torch.randn(
        w.shape, generator=gen, dtype=torch.float64)
    return (gap(w) * (0.05 + 0.4 * size)).float()


def _trainings(seed: int) -> list[dict[str, Any]]:
    """Four trainings, run side by side: float16 and bfloat16 weights between 0.5 and 4 in
    size, of either sign; updates with and without a drift. The last one starts from the
    third one's weights and takes its updates with the sign turned, so a step that keeps a
    copy of its own, looked up by the 16-bit weights it is given, mixes the two up."""
    gen = torch.Generator().manual_seed(1700 + seed)
    runs = []
    for dtype, drift in ((torch.float16, True), (torch.bfloat16, False),
                         (torch.bfloat16, True), (torch.bfloat16, None)):
        size = torch.rand(WIDTH, generator=gen, dtype=torch.float64) * 3.5 + 0.5
        sign = torch.where(torch.rand(WIDTH, generator=gen) < 0.5, -1.0, 1.0)
        w = runs[-1]["w"].clone() if drift is None else (size * sign).to(dtype)
        runs.append({"dtype": dtype, "drift": drift, "w": w, "comp": torch.zeros_like(w),
                     "exact": w.double(), "gen": gen})
    return runs


def compensated_reference(w, comp, update):
    """The step the exercise asks for: where the updates add up, rounded to 16 bits, and
    what that rounding dropped, kept for the next step."""
    target = w.float() + (comp.float() + update)
    new_w = target.to(w.dtype)
    return new_w, (target - new_w.float()).to(w.dtype)


STEP_SLIPS = {
    "comp came back as it went in, so whatever rounding drops is lost for good, as in "
    "section 4: keep in comp what the new weight lacks":
        lambda w, comp, u: ((w.float() + u).to(w.dtype), comp),
    "comp came back as zeros, so whatever rounding drops is lost for good, as in section 4: "
    "keep in comp what the new weight lacks":
        lambda w, comp, u: ((w.float() + u).to(w.dtype), torch.zeros_like(comp)),
    "comp holds what this step's rounding dropped, but the next step never adds it back: "
    "it belongs in the sum the new weight is rounded from":
        lambda w, comp, u: compensated_reference(w, torch.zeros_like(comp), u),
    "comp has the wrong sign: keep in it what the new weight still lacks, the exact sum "
    "minus the rounded weight, so that the next step adds it":
        lambda w, comp, u: (lambda n: (n[0], -n[1]))(compensated_reference(w, comp, u)),
    "comp keeps what it held and adds this step's rounding error to it, but the old comp is "
    "already in the sum the new weight was rounded from: it counts twice":
        lambda w, comp, u: (lambda n: (n[0], (comp.float() + n[1].float()).to(w.dtype)))(
            compensated_reference(w, comp, u)),
}


class _Malformed(Exception):
    """What the learner's step returned is not (new w, new comp) in the weights' dtype."""


def _one_step(answer: Any, w, comp, u) -> tuple[torch.Tensor, torch.Tensor]:
    """The learner's step on one set of weights: (new w, new comp)."""
    got = answer(w.clone(), comp.clone(), u.clone())
    if not (isinstance(got, (tuple, list)) and len(got) == 2
            and all(isinstance(t, torch.Tensor) for t in got)):
        raise _Malformed(f"return two tensors, (new w, new comp); got {type(got).__name__}")
    for label, t in zip(("w", "comp"), got, strict=True):
        if t.dtype != w.dtype or t.shape != w.shape:
            raise _Malformed(
                f"the new {label} came back as {str(t.dtype)[6:]} of shape {tuple(t.shape)}, "
                f"for {str(w.dtype)[6:]} weights of shape {tuple(w.shape)}: both stay in the "
                "weights' dtype, 16 bits a number, or the float32 master copy this step "
                "replaces is back")
    return got[0], got[1]


def _section_4_run(answer: Any) -> torch.Tensor:
    """Section 4's 1000 steps in float16, with the learner's step: the final weights."""
    grad, lr, steps = SECTION_4
    w = torch.ones(3, dtype=torch.float16)
    comp, update = torch.zeros_like(w), -lr * torch.tensor(grad)
    for _ in range(steps):
        w, comp = _one_step(answer, w, comp, update)
    return w


def _section_4(w: torch.Tensor) -> str | None:
    """What is wrong with where section 4's run ended, against its float32 master weights."""
    grad, lr, steps = SECTION_4
    exact, update = torch.ones(3, dtype=torch.float64), -lr * torch.tensor(grad)
    for _ in range(steps):
        exact += update.double()
    off = ((w.double() - exact).abs() / gap(exact.to(w.dtype))).max().item()
    if off > LIMIT:
        return (f"section 4's run ({steps} steps of {lr} * {grad} from 1.0, float16) ends at "
                f"{[round(v, 4) for v in w.tolist()]}, {off:.0f} gaps from where its updates "
                f"add up, {[round(v, 4) for v in exact.tolist()]}")
    return None


def _probe(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One step's weights, comp and update on which every slip gives its own result."""
    gen = torch.Generator().manual_seed(1717 + seed)
    w = (torch.rand(WIDTH, generator=gen) * 3 + 0.5).to(torch.bfloat16)
    comp = (gap(w) * (torch.rand(WIDTH, generator=gen, dtype=torch.float64) - 0.5)).to(w.dtype)
    u = (gap(w) * torch.randn(WIDTH, generator=gen, dtype=torch.float64)).float()
    return w, comp, u


def _slip(got: Any, w: torch.Tensor, slips: list[Any]) -> str | None:
    """The slip whose step the learner's equals on the probe (the weight to a gap, comp to
    a hundredth of one), if one does."""
    for words, want in zip(STEP_SLIPS, slips, strict=True):
        if all((a.double() - b.double()).abs().le(tol * gap(w)).all()
               for a, b, tol in zip(got, want, (1.0, 0.01), strict=True)):
            return words
    return None


def _trajectories(answer: Any, seed: int) -> list[torch.Tensor]:
    """The trainings of `_trainings`, a step of each in turn, with the learner's step: the
    weights each returned after every step, one row a step."""
    runs, paths = _trainings(seed), []
    for _ in range(STEPS):
        u = torch.zeros(WIDTH)
        for run in runs:  # the last run takes the update before it, turned
            u = -u if run["drift"] is None else _updates(run["gen"], run["w"], run["drift"])
            run["w"], run["comp"] = _one_step(answer, run["w"], run["comp"], u)
            paths.append(run["w"])
    return [torch.stack(paths[k::len(runs)]) for k in range(len(runs))]


def _replayed(paths: list[torch.Tensor], seed: int) -> tuple[float, str | None]:
    """The updates of the trainings drawn again, each for the weights the learner's step
    had reached: the largest distance of a final weight from the exact sum of its
    updates, in gaps, or what went wrong."""
    runs, worst = _trainings(seed), 0.0
    for step in range(STEPS):
        u = torch.zeros(WIDTH)
        for run, path in zip(runs, paths, strict=True):
            u = -u if run["drift"] is None else _updates(run["gen"], run["w"], run["drift"])
            run["w"] = path[step]
            run["exact"] += u.double()
    for run in runs:
        off = (run["w"].double() - run["exact"]).abs() / gap(run["exact"].to(run["dtype"]))
        worst = max(worst, off.max().item())
    if worst > LIMIT:
        return worst, (f"in trainings of {STEPS} steps (float16 and bfloat16 weights, updates "
                       f"mostly under half a gap) a weight ends {worst:.0f} gaps from the "
                       "exact sum of its updates; compensated, every weight stays within "
                       f"{LIMIT:g}")
    return worst, None


def _trained(answer: Any, seed: int) -> tuple[float, str | None]:
    """`_replayed` on the learner's own trainings (`_trajectories`)."""
    return _replayed(_trajectories(answer, seed), seed)


def _stage(run: Any, *args: Any) -> Any:
    """``run(*args)``, or the `failure` of the learner's step it called."""
    try:
        return run(*args)
    except _Malformed as err:
        return failure("fail", f"{err}.")
    except NotImplementedError:
        return failure("missing", "not written yet: it still raises NotImplementedError.")
    except Exception as err:  # the learner's bug, told as a failed check
        line = (str(err).strip().splitlines() or [type(err).__name__])[0]
        return failure("error", f"raised {type(err).__name__}: {line}")


def _observe_compensated(answer: Any, inputs: dict[str, Any]) -> Any:
    """Section 4's run (a `failure` if the step cannot be run), then the trainings' paths
    and the step on the probe, each or the failure it met."""
    if not callable(answer):
        return failure("fail", f"expected a function (w, comp, update) -> (w, comp), got "
                               f"{type(answer).__name__}")
    section = _stage(_section_4_run, answer)
    if is_failure(section):
        return section
    return {"section_4": section, "paths": _stage(_trajectories, answer, inputs["seed"]),
            "probe": _stage(lambda: list(_one_step(answer, *_probe(inputs["seed"]))))}


def _compensated_want(inputs: dict[str, Any]) -> dict[str, Any]:
    """The seed (the trainings are drawn again along the learner's paths) and what each
    slip's step gives on the probe."""
    probe = _probe(inputs["seed"])
    return {"seed": inputs["seed"], "slips": [list(slip(*probe)) for slip in STEP_SLIPS.values()]}


def _compensated_slip(got: dict[str, Any], want: dict[str, Any]) -> str | None:
    wrong = _section_4(got["section_4"])
    if wrong is None:
        if is_failure(got["paths"]):
            return got["paths"]["detail"]
        wrong = _replayed(got["paths"], want["seed"])[1]
    if wrong is None:
        return None
    if is_failure(got["probe"]):
        return got["probe"]["detail"]
    advice = _slip(got["probe"], _probe(want["seed"])[0], want["slips"]) or (
        "Keep in comp what the rounded weight lacks of the exact sum, and add it to the next "
        "step's update before rounding")
    return f"{advice}. {wrong[0].upper()}{wrong[1:]}."


COMPENSATED = Method(
    name="compensated_step",
    make_inputs=lambda gen: {"seed": gen.initial_seed()},
    observe=_observe_compensated,
    reference=_compensated_want,
    wrong=_compensated_slip,
    trials=1,
    passed=f"section 4's run ends where its updates add up, and in trainings of {STEPS} steps "
           f"in float16 and bfloat16 every weight ends within {LIMIT:g} gaps of the exact sum "
           "of its updates",
)
