"""Lesson 14, recording on and off: its exercise and its prediction.

The exercise (``l14-windows``) is a method check: the answer is not one gradient but a
mechanism that autograd runs. It builds truncated backpropagation through time with
overlapping windows, TBPTT(k1, k2): every k1 steps, the losses of the last k1 steps
backpropagated through the last k2. Its check recomputes every window of three new loops
and names the slips by computing them: windows of k1 steps (section 5's chunks), every loss
of the window, no truncation, a window started from zeros, a window one step short or long,
only the last step's loss.
"""

from __future__ import annotations

import functools

import torch

from ._spec import Method, Prediction, as_plain, call_answer, every_case, kind_of, same

__all__ = ["EXERCISES", "PREDICTIONS", "overlap_case", "window_gradients"]

WINDOWS = "tbptt_gradients"


def overlap_case(gen: torch.Generator, leftover: bool = True,
                 ) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """A new loop (W, xs) with its k1 < k2: every window reaches past the start of the one
    before it, the last window starts at step 2 or later (h_1 = tanh(x_1) does not depend
    on W, so a window from h_1 has the gradient of one from h_0), and, with ``leftover``,
    a leftover shorter than k1 ends it (without, the last update falls on the last step)."""
    units = int(torch.randint(2, 5, (1,), generator=gen))
    k1 = int(torch.randint(2, 5, (1,), generator=gen))
    k2 = k1 + int(torch.randint(2, 6, (1,), generator=gen))
    windows = -(-(k2 + k1 + 1) // k1) + int(torch.randint(0, 2, (1,), generator=gen))
    steps = k1 * windows + (int(torch.randint(1, k1, (1,), generator=gen)) if leftover else 0)
    W = torch.randn(units, units, generator=gen, dtype=torch.float64)
    W = 1.2 * W / torch.linalg.eigvals(W).abs().max()  # a loop that remembers
    xs = 0.5 * torch.randn(steps, units, generator=gen, dtype=torch.float64)
    return W, xs, k1, k2


def window_gradients(W: torch.Tensor, xs: torch.Tensor, k1: int, k2: int, *,
                     back: int | None = None, losses: int | None = None, cut: bool = True,
                     from_zero: bool = False, leftover: bool = False) -> list[torch.Tensor]:
    """TBPTT(k1, k2) for h_t = tanh(W h_(t-1) + x_t) from h_0 = 0, the loss (h_s ** 2).sum()
    at every step: at t = k1, 2 k1, ..., the gradient with respect to W of the losses of
    the last ``losses`` (k1) steps, through the last ``back`` (k2) steps, each window
    recomputed from the state that enters it. The keywords make the slips."""
    back, losses = k2 if back is None else back, k1 if losses is None else losses
    states = [torch.zeros(W.shape[0], dtype=W.dtype)]
    with torch.no_grad():
        for x_t in xs:
            states.append(torch.tanh(W @ states[-1] + x_t))
    ends = list(range(k1, len(xs) + 1, k1))
    if leftover and len(xs) % k1:
        ends.append(len(xs))
    grads = []
    for t in ends:
        start = max(0, t - back) if cut else 0
        W_leaf = W.detach().clone().requires_grad_()
        h = torch.zeros_like(states[0]) if from_zero else states[start]
        loss = torch.zeros((), dtype=W.dtype)
        for s in range(start + 1, t + 1):
            h = torch.tanh(W_leaf @ h + xs[s - 1])
            if s > t - losses:
                loss = loss + (h**2).sum()
        grads.append(torch.autograd.grad(loss, W_leaf)[0])
    return grads


def _windows_inputs(gen: torch.Generator) -> dict:
    """Three new loops, each with its k1 and k2; the last has no leftover steps, so an
    update falls on the last step (a loop over range(k1, len(xs), k1) misses it)."""
    loops = []
    for leftover in (True, True, False):
        W, xs, k1, k2 = overlap_case(gen, leftover)
        loops.append({"W": W, "xs": xs, "k1": k1, "k2": k2})
    return {"loops": loops}


def _observe_windows(answer, inputs: dict) -> list | dict:
    """What the answer returned for each loop."""
    got_all = []
    for loop in inputs["loops"]:
        got, failed = call_answer(answer, loop["W"].clone(), loop["xs"].clone(), loop["k1"],
                                  loop["k2"], what="tbptt_gradients")
        if failed is not None:
            return failed
        got_all.append(as_plain(got))
    return got_all


def _each_loop(inputs: dict, slip=None) -> list:
    """`window_gradients` on every loop of the trial, with the switches ``slip(k1, k2)``
    gives (none: the right gradients)."""
    return [window_gradients(loop["W"], loop["xs"], loop["k1"], loop["k2"],
                             **(slip(loop["k1"], loop["k2"]) if slip else {}))
            for loop in inputs["loops"]]


# A window's gradients computed another way differ by round-off (~1e-15); a numerical
# estimate of them by ~1e-10, and is told apart.
_agree = functools.partial(same, rtol=1e-11, atol=1e-14)

_SLIPS = {
    "the gradients reach back only k1 steps: the state was detached at every update, "
    "section 5's chunks, TBPTT(k1, k1). Each window reaches k2 steps back, into the "
    "steps the previous update covered.": lambda k1, k2: {"back": k1},
    "the losses of all k2 steps of the window were backpropagated. An update takes "
    "the losses of its own last k1 steps; the earlier ones belong to earlier updates, "
    "and their steps serve only as history.": lambda k1, k2: {"losses": k2},
    "nothing was truncated: the gradients reach back to h_0 (no detach, or a graph kept "
    "alive with retain_graph). The state that enters the window, h_(t-k2), must count "
    "as a constant.": lambda k1, k2: {"cut": False},
    "each window started from h = 0. It starts from the state the loop reached at step "
    "t - k2, detached: its value carries over, only its graph is cut.":
        lambda k1, k2: {"from_zero": True},
    "each window reaches back k2 - 1 steps, one short: from h_(t-k2) the window runs "
    "the k2 steps t - k2 + 1 ... t.": lambda k1, k2: {"back": k2 - 1},
    "each window reaches back k2 + 1 steps, one too many: from h_(t-k2) the window "
    "runs the k2 steps t - k2 + 1 ... t.": lambda k1, k2: {"back": k2 + 1},
    "only the last step's loss was backpropagated; an update takes the losses of the "
    "last k1 steps.": lambda k1, k2: {"losses": 1},
}


def _explain_windows(inputs: dict, got: list, want: list) -> str:
    at = next(i for i, (g, w) in enumerate(zip(got, want, strict=True)) if not _agree(g, w))
    loop, mine, right = inputs["loops"][at], got[at], want[at]
    W, xs, k1, k2 = loop["W"], loop["xs"], loop["k1"], loop["k2"]
    if not isinstance(mine, (list, tuple)):
        return (f"returned {kind_of(mine)}; expected a list with one gradient (a tensor shaped "
                "like W) per update.")
    where = f"on a new loop ({W.shape[0]} units, {len(xs)} steps, k1 = {k1}, k2 = {k2})"
    if len(mine) == len(right) + 1:
        rest = len(xs) % k1
        return (f"{where}: {len(mine)} gradients, one for the {rest} leftover "
                f"step{'s' * (rest > 1)} at the end too. Updates come at t = k1, 2 k1, ...: "
                f"here {len(right)} of them; a leftover shorter than k1 gets none.")
    if len(mine) != len(right):
        return (f"{where}: {len(mine)} gradients; expected {len(right)}, one per update at "
                f"t = k1, 2 k1, ... up to {len(xs)}.")
    first = next(i for i, (g, w) in enumerate(zip(mine, right, strict=True)) if not _agree(g, w))
    t, g, expected = k1 * (first + 1), mine[first], right[first]
    if isinstance(g, torch.Tensor) and g.shape == W.shape:
        off = ((g.to(W.dtype) - expected).norm() / expected.norm()).item()
        told = f"is off by {off:.1e} relative to the expected one"
    else:
        shape = tuple(g.shape) if isinstance(g, torch.Tensor) else None
        told = f"is a {kind_of(g)} of shape {shape}, not a tensor shaped like W"
    return (f"{where}: the gradient of the update at t = {t} {told}. It is the gradient of "
            f"the losses of steps {t - k1 + 1} to {t}, backpropagated through steps "
            f"{max(t - k2, 0) + 1} to {t} from h_{max(t - k2, 0)}, the value the loop "
            "computed there.")


TBPTT_WINDOWS = Method(
    name=WINDOWS,
    make_inputs=_windows_inputs,
    observe=_observe_windows,
    reference=_each_loop,
    explain=_explain_windows,
    mistakes={words: functools.partial(_each_loop, slip=slip)
              for words, slip in _SLIPS.items()},
    trials=1,
    agree=every_case(_agree),
    passed="the gradient of every update matches on 3 new loops (new k1 and k2 each time)",
)


EXERCISES = {
    "l14-windows": TBPTT_WINDOWS,
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


PREDICTIONS = {
    "l14-predict-inplace": Prediction(
        question="which in-place change breaks backward, the add (y = x + 1) or the sigmoid?",
        answer=_inplace_answer,
        hint="the version counter only matters for tensors a backward node saved. Which of the "
             "two backward formulas needs the value of y itself?",
        why="SigmoidBackward0 saved its output y to compute y(1 − y), and mul_ changed y after "
            "it was saved; the addition saved nothing. So the {answer} cell fails",
        choices=("add", "sigmoid"),
    ),
}
