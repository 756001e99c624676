"""Lesson 11, pitfalls and tools: its exercises and its predictions.

Both exercises are method checks: the answer is not one gradient but a mechanism
that autograd runs. Exercise 1 builds truncated backpropagation through time with
overlapping windows, TBPTT(k1, k2): every k1 steps, the losses of the last k1
steps backpropagated through the last k2. Its check recomputes every window on
new loops and names the slips by computing them: windows of k1 steps (section 6's
chunks), every loss of the window, no truncation, a window started from zeros, a
window one step short or long, one update too many. Exercise 2 searches with hooks
for the layer where the gradient vanishes in a broken network; its check counts
the hooks registered, the backward passes and the hooks left behind, and knows the
slips of that hunt: .grad read on a non-leaf, the walk started from the input,
grad_output taken for grad_input.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections import OrderedDict
from collections.abc import Iterator

import torch
from torch import nn

from ._spec import Method, Prediction, Report, attempt, count_autograd, passed
from ._spec import failed as _fail

# --------------------------------------------------------------------------- Exercise 1

WINDOWS = "tbptt_gradients"


def overlap_case(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """A new loop (W, xs) with its k1 < k2: every window reaches past the start of the one
    before it, the last window starts at step 2 or later (h_1 = tanh(x_1) does not depend
    on W, so a window from h_1 has the gradient of one from h_0), and a leftover shorter
    than k1 ends it."""
    units = int(torch.randint(2, 5, (1,), generator=gen))
    k1 = int(torch.randint(2, 5, (1,), generator=gen))
    k2 = k1 + int(torch.randint(2, 6, (1,), generator=gen))
    windows = -(-(k2 + k1 + 1) // k1) + int(torch.randint(0, 2, (1,), generator=gen))
    steps = k1 * windows + int(torch.randint(1, k1, (1,), generator=gen))
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


def _window_slips(W, xs, k1, k2) -> dict[str, list[torch.Tensor]]:
    return {
        "the gradients reach back only k1 steps: the state was detached at every update, "
        "section 6's chunks, TBPTT(k1, k1). Each window reaches k2 steps back, into the "
        "steps the previous update covered":
            window_gradients(W, xs, k1, k2, back=k1),
        "the losses of all k2 steps of the window were backpropagated. An update takes "
        "the losses of its own last k1 steps; the earlier ones belong to earlier updates, "
        "and their steps serve only as history":
            window_gradients(W, xs, k1, k2, losses=k2),
        "nothing was truncated: the gradients reach back to h_0 (no detach, or a graph kept "
        "alive with retain_graph). The state that enters the window, h_(t-k2), must count "
        "as a constant":
            window_gradients(W, xs, k1, k2, cut=False),
        "each window started from h = 0. It starts from the state the loop reached at step "
        "t - k2, detached: its value carries over, only its graph is cut":
            window_gradients(W, xs, k1, k2, from_zero=True),
        "each window reaches back k2 - 1 steps, one short: from h_(t-k2) the window runs "
        "the k2 steps t - k2 + 1 ... t":
            window_gradients(W, xs, k1, k2, back=k2 - 1),
        "each window reaches back k2 + 1 steps, one too many: from h_(t-k2) the window "
        "runs the k2 steps t - k2 + 1 ... t":
            window_gradients(W, xs, k1, k2, back=k2 + 1),
        "only the last step's loss was backpropagated; an update takes the losses of the "
        "last k1 steps":
            window_gradients(W, xs, k1, k2, losses=1),
    }


def _same(got, want, rtol: float) -> bool:
    return len(got) == len(want) and all(
        isinstance(g, torch.Tensor) and g.shape == w.shape
        and torch.allclose(g.to(w.dtype), w, rtol=rtol, atol=rtol * 1e-3)
        for g, w in zip(got, want, strict=True))


def _check_windows(answer, seed: int) -> Report:
    gen = torch.Generator().manual_seed(seed + 11)
    for _ in range(3):
        W, xs, k1, k2 = overlap_case(gen)
        where = (f"on a new loop ({W.shape[0]} units, {len(xs)} steps, k1 = {k1}, "
                 f"k2 = {k2})")
        got, failure = attempt(WINDOWS, answer, W.clone(), xs.clone(), k1, k2,
                               what="tbptt_gradients")
        if failure is not None:
            return failure
        if isinstance(got, torch.Tensor) or not isinstance(got, (list, tuple)):
            return _fail(WINDOWS, f"returned {type(got).__name__}; expected a list with one "
                                  "gradient (a tensor shaped like W) per update.")
        want = window_gradients(W, xs, k1, k2)
        if len(got) == len(want) + 1:
            rest = len(xs) % k1
            return _fail(WINDOWS, f"{where}: {len(got)} gradients, one for the {rest} leftover "
                                  f"step{'s' * (rest > 1)} at the end too. Updates come at "
                                  f"t = k1, 2 k1, ...: here {len(want)} of them; a leftover "
                                  "shorter than k1 gets none.")
        if len(got) != len(want):
            return _fail(WINDOWS, f"{where}: {len(got)} gradients; expected {len(want)}, one "
                                  f"per update at t = k1, 2 k1, ... up to {len(xs)}.")
        if _same(got, want, rtol=1e-11):
            continue
        for slip, variant in _window_slips(W, xs, k1, k2).items():
            if _same(got, variant, rtol=1e-9):
                return _fail(WINDOWS, f"{where}: {slip}.")
        first = next(i for i, (g, w) in enumerate(zip(got, want, strict=True))
                     if not _same([g], [w], rtol=1e-11))
        t = k1 * (first + 1)
        mine, expected = got[first], want[first]
        if isinstance(mine, torch.Tensor) and mine.shape == W.shape:
            off = ((mine.to(W.dtype) - expected).norm() / expected.norm()).item()
            told = f"is off by {off:.1e} relative to the expected one"
        else:
            shape = tuple(mine.shape) if isinstance(mine, torch.Tensor) else None
            told = f"is a {type(mine).__name__} of shape {shape}, not a tensor shaped like W"
        return _fail(WINDOWS, f"{where}: the gradient of the update at t = {t} {told}. It is "
                              f"the gradient of the losses of steps {t - k1 + 1} to {t}, "
                              f"backpropagated through steps {max(t - k2, 0) + 1} to {t} from "
                              f"h_{max(t - k2, 0)}, the value the loop computed there.")
    return passed(WINDOWS, "the gradient of every update matches on 3 new loops (new k1 and "
                           "k2 each time)")


# --------------------------------------------------------------------------- Exercise 2

VANISH = "first_vanishing_layer"


class Gate(nn.Module):
    """Multiplies its input by a fixed factor: open at 1, shut at 0 (then nothing gets back).

    >>> Gate(0.0)(torch.ones(2))
    tensor([0., 0.])
    """

    def __init__(self, factor: float) -> None:
        super().__init__()
        self.factor = factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.factor

    def extra_repr(self) -> str:
        return f"factor={self.factor}"


def _randint(low: int, high: int, gen: torch.Generator) -> int:
    return int(torch.randint(low, high, (1,), generator=gen))


def _draft(gen: torch.Generator, kind: str) -> tuple[nn.Sequential, torch.Tensor, float]:
    """One random network of Linear -> tanh or sigmoid blocks with an open gate somewhere;
    ``kind`` breaks it: "gate" shuts a gate, "sigmoid" or "tanh" saturates a block's
    activation (a huge bias in front of it), "healthy" leaves it whole."""
    blocks, width, d_in = _randint(3, 6, gen), _randint(3, 7, gen), _randint(2, 5, gen)
    broken = _randint(2, blocks + 1, gen)  # never the first block: something lies below
    gate_after = _randint(1, blocks + 1, gen)
    layers, prev = [], d_in
    for k in range(1, blocks + 1):
        fc = nn.Linear(prev, width).double()
        with torch.no_grad():
            fc.weight.copy_(torch.randn(width, prev, generator=gen, dtype=torch.float64)
                            / prev**0.5)
            fc.bias.copy_(0.1 * torch.randn(width, generator=gen, dtype=torch.float64))
        sigmoid = bool(torch.rand((), generator=gen) < 0.3)
        if kind in ("sigmoid", "tanh") and k == broken:
            sigmoid = kind == "sigmoid"
            with torch.no_grad():
                fc.weight.mul_(0.05)
                signs = torch.randint(0, 2, (width,), generator=gen).double() * 2 - 1
                fc.bias.copy_(signs * (25 + 10 * torch.rand(width, generator=gen,
                                                            dtype=torch.float64)))
        layers += [(f"fc{k}", fc), (f"act{k}", nn.Sigmoid() if sigmoid else nn.Tanh())]
        if k == gate_after:
            layers.append((f"gate{k}", Gate(0.0 if kind == "gate" and k > 1 else 1.0)))
        prev = width
    out = nn.Linear(prev, 1).double()
    with torch.no_grad():
        out.weight.copy_(torch.randn(1, prev, generator=gen, dtype=torch.float64))
    layers.append(("out", out))
    x = torch.randn(_randint(4, 9, gen), d_in, generator=gen, dtype=torch.float64)
    threshold = 10 ** -(6 + 2 * float(torch.rand((), generator=gen)))
    return nn.Sequential(OrderedDict(layers)), x, threshold


def input_grad_norms(model: nn.Sequential, x: torch.Tensor) -> dict[str, float]:
    """Each layer's gradient with respect to its input, as a norm, for model(x).sum():
    full backward hooks, removed afterwards."""
    norms, handles = {}, []
    for name, layer in model.named_children():
        def record(module, grad_input, grad_output, name=name):
            norms[name] = grad_input[0].norm().item()
        handles.append(layer.register_full_backward_hook(record))
    try:
        model(x.detach().clone().requires_grad_()).sum().backward()
    finally:
        for handle in handles:
            handle.remove()
    model.zero_grad()
    return norms


def _culprit(norms: dict[str, float], names: list[str], threshold: float) -> str | None:
    return next((n for n in reversed(names) if norms[n] < threshold), None)


def broken_network(gen: torch.Generator, kind: str) -> tuple[nn.Sequential, torch.Tensor,
                                                               float, str | None, dict]:
    """(model, x, threshold, the layer that kills the gradient or None, every layer's input
    gradient norm): drafts until the gradient is far above the threshold down to the
    culprit and far below it there."""
    while True:
        model, x, threshold = _draft(gen, kind)
        names = [n for n, _ in model.named_children()]
        norms = input_grad_norms(model, x)
        culprit = _culprit(norms, names, threshold)
        above = names[names.index(culprit) + 1:] if culprit else names
        clear = all(norms[n] > 100 * threshold for n in above) and (
            culprit is None or norms[culprit] < threshold / 100)
        if clear and (culprit is None) == (kind == "healthy"):
            return model, x, threshold, culprit, norms


def _left_hooks(model: nn.Module, x: torch.Tensor) -> int:
    """How many hooks are still on the model, its parameters and the input."""
    count = 0
    for module in model.modules():
        for table in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
                      "_backward_pre_hooks"):
            count += len(getattr(module, table, None) or {})
    for t in [*model.parameters(), x]:
        count += len(t._backward_hooks or {})
        count += len(getattr(t, "_post_accumulate_grad_hooks", None) or {})
    return count


_REGISTERS = [
    (torch.Tensor, "register_hook"),
    (torch.Tensor, "register_post_accumulate_grad_hook"),
    (nn.Module, "register_full_backward_hook"),
    (nn.Module, "register_full_backward_pre_hook"),
    (nn.Module, "register_backward_hook"),
    (nn.Module, "register_forward_hook"),
    (nn.Module, "register_forward_pre_hook"),
]


@contextlib.contextmanager
def _counting_registrations() -> Iterator[list[str]]:
    """Count the tensor and module hooks registered inside the block."""
    made: list[str] = []
    originals = [(owner, name, getattr(owner, name)) for owner, name in _REGISTERS]

    def counted(name, method):
        @functools.wraps(method)
        def register(*args, **kwargs):
            made.append(name)
            return method(*args, **kwargs)
        return register

    for owner, name, method in originals:
        setattr(owner, name, counted(name, method))
    try:
        yield made
    finally:
        for owner, name, method in originals:
            setattr(owner, name, method)


def _run_learner(answer, model, x, threshold):
    """(its answer, hooks registered, backward passes, read a non-leaf .grad, or a report)."""
    with warnings.catch_warnings(record=True) as caught, _counting_registrations() as made:
        warnings.simplefilter("always")
        with count_autograd() as seen:
            got, failure = attempt(VANISH, answer, model, x, threshold,
                                   what="first_vanishing_layer")
    non_leaf = any("not a leaf Tensor is being accessed" in str(w.message) for w in caught)
    return got, failure, len(made), seen.reverse, non_leaf


def _check_vanishing(answer, seed: int) -> Report:
    gen = torch.Generator().manual_seed(seed)
    kinds = [("gate", "sigmoid", "tanh")[i] for i in torch.randperm(3, generator=gen).tolist()]
    for kind in [*kinds, "healthy"]:
        model, x, threshold, culprit, norms = broken_network(gen, kind)
        names = [n for n, _ in model.named_children()]
        learner_x = x.clone().requires_grad_()
        where = (f"on a new network of {len(names)} layers ({', '.join(names)}), "
                 f"threshold {threshold:.1e}")
        got, failure, made, passes, non_leaf = _run_learner(answer, model, learner_x, threshold)
        if non_leaf:
            return _fail(VANISH, f"{where}: your code read .grad of a non-leaf tensor (a layer's "
                                 "input or output). It stays None (section 3): backward passes "
                                 "an intermediate's gradient on without storing it. Let a hook "
                                 "receive it as it passes.")
        if failure is not None:
            return failure
        if made == 0:
            return _fail(VANISH, f"{where}: no hook was registered. The exercise asks for "
                                 "hooks that record every layer's gradient as backward passes "
                                 "through it (register_full_backward_hook on each layer, or "
                                 "register_hook on each layer's input).")
        if passes != 1:
            return _fail(VANISH, f"{where}: your function ran {passes} backward passes; one is "
                                 "enough, with a hook on every layer recording as it passes.")
        left = _left_hooks(model, learner_x)
        if left:
            return _fail(VANISH, f"{where}: {left} hook(s) are still registered when your "
                                 "function returns. A hook stays until its handle removes it "
                                 "(section 4): keep the handles and call .remove() on each, "
                                 "or the next backward through this model runs them again.")
        if got is not None and not isinstance(got, str):
            return _fail(VANISH, f"returned {type(got).__name__}; expected a layer's name (a "
                                 "str, as model.named_children() gives it) or None.")
        if got == culprit:
            continue
        if culprit is None:
            return _fail(VANISH, f"{where}: the gradient stays above the threshold at every "
                                 f"layer here, yet you returned {got!r}; expected None.")
        bottom = next(n for n in names if norms[n] < threshold)
        before = names[names.index(culprit) - 1]
        if got == bottom:
            slip = ("the walk went the wrong way: from the input up. Once the gradient has "
                    "vanished, every layer below gets almost nothing too, so the first small "
                    "one from the input is merely downstream of the damage. Walk from the "
                    "loss down (the last layer first), as backward does, and stop at the "
                    "first layer whose input gradient is under the threshold")
        elif got == before:
            slip = ("you found the layer just below the culprit: you measured the gradient "
                    "arriving at each layer's output (grad_output). The layer that kills the "
                    "gradient receives a healthy one and sends back a tiny one: measure what "
                    "each layer sends back to its input (grad_input)")
        elif got is None:
            slip = "you returned None, but the gradient does vanish in this network"
        elif got not in norms:
            slip = f"{got!r} is not a layer of this network"
        else:
            slip = (f"the gradient {got!r} sends back to its input has norm "
                    f"{norms[got]:.2e}, and the layers between it and the loss are not all "
                    "above the threshold: it is not the first one, walking back from the loss")
        return _fail(VANISH, f"{where}: {slip}.")
    return passed(VANISH, "the right layer on 3 new broken networks (a shut gate, a "
                          "saturated sigmoid, a saturated tanh) and None on a healthy one; "
                          "one backward pass, every hook removed")


EXERCISES = {
    "l11-windows": Method(check=_check_windows),
    "l11-vanishing": Method(check=_check_vanishing),
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
