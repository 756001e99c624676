"""Lesson 15's exercise (``l15-vanishing``): a search with hooks for the layer where the
gradient vanishes in a broken network. The check watches the answer on five new broken
networks (a shut gate, a saturated sigmoid, a saturated tanh, a Linear layer zeroed, the
first layer zeroed) and three healthy ones (one plain, one behind a gate that lets the
gradient back just above the threshold, one whose first sample alone saturates): the
hooks it registers, its backward passes, the hooks it leaves behind, a non-leaf .grad read,
and the layer it names; and knows the slips of that hunt: the layer under the threshold
nearest the input named (the walk started from the input), grad_output taken for
grad_input, the old register_backward_hook (on a Linear it sees the bias's gradient, so only
a Linear culprit shows it).
"""

from __future__ import annotations

import warnings
from collections import OrderedDict

import torch
from torch import nn
from torch.nn.modules import module as module_hooks
from torch.utils.hooks import RemovableHandle

from .._spec import (
    Method,
    as_plain,
    call_answer,
    count_autograd,
    every_case,
    kind_of,
    randint,
    seeded,
)

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


def _linear(n_in: int, n_out: int) -> nn.Linear:
    """A float64 Linear whose weights the caller sets: made with torch's generator `seeded`,
    so that its own first draws move neither the learner's generator nor the check's inputs."""
    with seeded():
        return nn.Linear(n_in, n_out).double()


def _draft(gen: torch.Generator, kind: str,
           first: bool = False) -> tuple[nn.Sequential, torch.Tensor, float]:
    """One random network of Linear -> tanh or sigmoid blocks with an open gate somewhere;
    ``kind`` breaks it: "gate" shuts a gate, "sigmoid" or "tanh" saturates a block's
    activation (a huge bias in front of it), "linear" zeroes a block's weight (nothing gets
    back through it), "healthy" leaves it whole. The broken block is never the first, so
    something lies below it, unless ``first``."""
    blocks, width, d_in = randint(3, 6, gen), randint(3, 7, gen), randint(2, 5, gen)
    broken = 1 if first else randint(2, blocks + 1, gen)
    gate_after = randint(1, blocks + 1, gen)
    layers, prev = [], d_in
    for k in range(1, blocks + 1):
        fc = _linear(prev, width)
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
        if kind == "linear" and k == broken:
            with torch.no_grad():
                fc.weight.zero_()
        layers += [(f"fc{k}", fc), (f"act{k}", nn.Sigmoid() if sigmoid else nn.Tanh())]
        if k == gate_after:
            layers.append((f"gate{k}", Gate(0.0 if kind == "gate" and k > 1 else 1.0)))
        prev = width
    out = _linear(prev, 1)
    with torch.no_grad():
        out.weight.copy_(torch.randn(1, prev, generator=gen, dtype=torch.float64))
        out.bias.zero_()  # no layer's input gradient depends on it
    layers.append(("out", out))
    x = torch.randn(randint(4, 9, gen), d_in, generator=gen, dtype=torch.float64)
    threshold = 10 ** -(6 + 2 * float(torch.rand((), generator=gen)))
    return nn.Sequential(OrderedDict(layers)), x, threshold


def input_grad_norms(model: nn.Sequential, x: torch.Tensor,
                     full: bool = True) -> dict[str, float]:
    """Each layer's gradient with respect to its input, as a norm, for model(x).sum():
    full backward hooks, removed afterwards. ``full=False``: what the old
    register_backward_hook sees instead, the gradients of the layer's last operation (on a
    Linear, the bias's gradient first)."""
    norms, handles = {}, []
    for name, layer in model.named_children():
        def record(module, grad_input, grad_output, name=name):
            norms[name] = grad_input[0].norm().item()
        register = layer.register_full_backward_hook if full else layer.register_backward_hook
        handles.append(register(record))
    try:
        with warnings.catch_warnings():  # the old form warns that it is deprecated
            warnings.simplefilter("ignore")
            model(x.detach().clone().requires_grad_()).sum().backward()
    finally:
        for handle in handles:
            handle.remove()
    model.zero_grad()
    return norms


def _culprit(norms: dict[str, float], names: list[str], threshold: float) -> str | None:
    return next((n for n in reversed(names) if norms[n] < threshold), None)


def broken_network(gen: torch.Generator, kind: str, first: bool = False
                   ) -> tuple[nn.Sequential, torch.Tensor, float, str | None, dict]:
    """(model, x, threshold, the layer that kills the gradient or None, every layer's input
    gradient norm): drafts until the gradient is far above the threshold down to the
    culprit and far below it there. ``first``: the first block is the broken one."""
    while True:
        model, x, threshold = _draft(gen, kind, first)
        names = [n for n, _ in model.named_children()]
        norms = input_grad_norms(model, x)
        culprit = _culprit(norms, names, threshold)
        above = names[names.index(culprit) + 1:] if culprit else names
        clear = all(norms[n] > 100 * threshold for n in above) and (
            culprit is None or norms[culprit] < threshold / 100)
        if clear and (culprit is None) == (kind == "healthy"):
            return model, x, threshold, culprit, norms


# --------------------------------------------------------------------------- as plain data


def _layers(model: nn.Sequential) -> list[dict]:
    """A network as plain data: each layer's name, kind, and weights or factor."""
    found = []
    for name, layer in model.named_children():
        if isinstance(layer, nn.Linear):
            found.append({"name": name, "kind": "linear", "weight": layer.weight.detach(),
                          "bias": layer.bias.detach()})
        elif isinstance(layer, Gate):
            found.append({"name": name, "kind": "gate", "factor": layer.factor})
        else:
            found.append({"name": name, "kind": "sigmoid" if isinstance(layer, nn.Sigmoid)
                          else "tanh"})
    return found


def _network(layers: list[dict]) -> nn.Sequential:
    """The network `_layers` describes, rebuilt."""
    built = []
    for layer in layers:
        if layer["kind"] == "linear":
            fc = _linear(layer["weight"].shape[1], layer["weight"].shape[0])
            with torch.no_grad():
                fc.weight.copy_(layer["weight"])
                fc.bias.copy_(layer["bias"])
            built.append((layer["name"], fc))
        elif layer["kind"] == "gate":
            built.append((layer["name"], Gate(layer["factor"])))
        else:
            built.append((layer["name"], nn.Sigmoid() if layer["kind"] == "sigmoid"
                          else nn.Tanh()))
    return nn.Sequential(OrderedDict(built))


def _near_miss(gen: torch.Generator) -> tuple[nn.Sequential, torch.Tensor, float]:
    """A healthy network behind a nearly shut gate, "gate0" in front of fc1, the input in
    large units to match (so the rest runs as before): the gradient the gate sends back has
    a norm about 1.5 times the threshold, so it does not vanish and None is right; but a
    squared norm, a loss taken as model(x).mean(), an average of the samples' norms, the
    largest entry or the mean entry all fall under the threshold there."""
    while True:
        model, x, threshold, _, _ = broken_network(gen, "healthy")
        x = x.clone().requires_grad_()
        (g,) = torch.autograd.grad(model(x).sum(), x)
        # each of those measures is at least `short` times under the norm here
        short = min(len(x) ** 0.5, float(g.norm() / g.abs().max()))
        if short >= 2:
            break
    factor = short**0.5 * threshold / float(g.norm())
    gated = nn.Sequential(OrderedDict([("gate0", Gate(factor)), *model.named_children()]))
    return gated, (x / factor).detach(), threshold


def _one_row_saturated(gen: torch.Generator) -> tuple[nn.Sequential, torch.Tensor, float]:
    """A healthy network whose first sample alone drives block 1 into saturation (each of
    its pre-activations about 40 or more from 0): the gradient of the whole batch stays
    above the threshold at every layer, so None is right, while sample 0's alone vanishes at
    act1 (an answer measuring one sample, grad_input[0][0], names a layer)."""
    while True:
        model, x, threshold, _, _ = broken_network(gen, "healthy")
        with torch.no_grad():
            x = x.clone()
            x[0] *= 40 / (model.fc1.weight @ x[0]).abs().min()
        batch, sample0 = input_grad_norms(model, x), input_grad_norms(model, x[:1])
        if (min(batch.values()) > 100 * threshold
                and min(sample0.values()) < threshold / 100):
            return model, x, threshold


def _vanishing_inputs(gen: torch.Generator) -> dict:
    """Eight networks, each with its input and threshold; every check has all of them:
    four broken ones (a shut gate, a saturated sigmoid, a saturated tanh, a Linear zeroed,
    in a new order) and a healthy one, the culprit somewhere new; the first Linear zeroed
    (the culprit is the first layer: a walk that stops before index 0 misses it); a healthy
    network behind a gate just above the threshold (`_near_miss`: a measure other than
    the norm of model(x).sum()'s gradient names it); a healthy network whose first sample
    alone saturates (`_one_row_saturated`: a measure of one sample names a layer)."""
    kinds = [("gate", "sigmoid", "tanh", "linear")[i]
             for i in torch.randperm(4, generator=gen).tolist()]
    drawn = [broken_network(gen, kind)[:3] for kind in [*kinds, "healthy"]]
    drawn += [broken_network(gen, "linear", first=True)[:3], _near_miss(gen),
              _one_row_saturated(gen)]
    return {"networks": [{"layers": _layers(model), "x": x, "threshold": threshold}
                         for model, x, threshold in drawn]}


# --------------------------------------------------------------------------- the answer watched

_GLOBAL_TABLES = ("_global_forward_hooks", "_global_forward_pre_hooks",
                  "_global_backward_hooks", "_global_backward_pre_hooks")


def _left_hooks(model: nn.Module, x: torch.Tensor) -> int:
    """How many hooks are still on the model, its parameters and the input, and on every
    module (``register_module_full_backward_hook``)."""
    count = sum(len(getattr(module_hooks, table)) for table in _GLOBAL_TABLES)
    for module in model.modules():
        for table in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
                      "_backward_pre_hooks"):
            count += len(getattr(module, table, None) or {})
    for t in [*model.parameters(), x]:
        count += len(t._backward_hooks or {})
        count += len(getattr(t, "_post_accumulate_grad_hooks", None) or {})
    return count


def _observe_hunt(answer, network: dict) -> tuple[dict, dict | None]:
    """One network's hunt: what the answer said, the hooks it registered, its backward
    passes, the hooks it left, whether it read a non-leaf .grad; and its failure, if any."""
    model, x = _network(network["layers"]), network["x"].clone().requires_grad_()
    handles = RemovableHandle.next_id  # every hook registered makes one handle
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with count_autograd() as seen:
            got, failed = call_answer(answer, model, x, network["threshold"],
                                      what="first_vanishing_layer")
    non_leaf = any("not a leaf Tensor is being accessed" in str(w.message) for w in caught)
    made = RemovableHandle.next_id - handles
    return ({"said": as_plain(got), "hooks": made, "passes": seen.reverse,
             "left": _left_hooks(model, x), "non_leaf": non_leaf}, failed)


def _observe_vanishing(answer, inputs: dict) -> list | dict:
    """Each network's hunt, up to the first that failed; a failure that read no non-leaf
    .grad ends the observation with it (the non-leaf read is what a learner must hear)."""
    hunts = []
    for network in inputs["networks"]:
        hunt, failed = _observe_hunt(answer, network)
        if failed is not None and not hunt["non_leaf"]:
            return failed
        hunts.append(hunt)
        if failed is not None:
            break
    return hunts


# --------------------------------------------------------------------------- the verdict


def _hunted(got: dict, want: dict) -> bool:
    """One network's hunt done as asked: hooks, one pass, none left, the right layer."""
    return (not got["non_leaf"] and got["hooks"] > 0 and got["passes"] == 1
            and got["left"] == 0 and type(got["said"]) is type(want["said"])
            and got["said"] == want["said"])


def _facts(network: dict, full: bool = True) -> tuple[list[str], dict[str, float], str | None]:
    names = [layer["name"] for layer in network["layers"]]
    norms = input_grad_norms(_network(network["layers"]), network["x"], full)
    return names, norms, _culprit(norms, names, network["threshold"])


def _said(inputs: dict, pick, full: bool = True) -> list[dict]:
    """The observation of hunts naming ``pick(names, norms, threshold, culprit)``, the
    norms measured with full backward hooks or (``full=False``) the old ones."""
    said = []
    for network in inputs["networks"]:
        names, norms, culprit = _facts(network, full)
        said.append({"said": pick(names, norms, network["threshold"], culprit)})
    return said


def _found(names, norms, threshold, culprit):
    """The first layer from the loss whose input gradient is under the threshold."""
    return culprit


def _bottom(names, norms, threshold, culprit):
    """The first layer from the input whose input gradient is under the threshold."""
    return next((n for n in names if norms[n] < threshold), None)


def _below(names, norms, threshold, culprit):
    """The layer just below the culprit, where the gradient it sends back arrives; None
    when the culprit is the first layer (every layer's output gradient is healthy)."""
    return names[names.index(culprit) - 1] if culprit and culprit != names[0] else None


_WRONG_WAY = ("you named the layer under the threshold nearest the input, as a walk the "
              "wrong way (from the input up) finds, or a walk from the loss that goes on past "
              "the first one. Once the gradient has vanished, every layer below gets almost "
              "nothing too, so those layers are merely downstream of the damage. Walk from "
              "the loss down (the last layer first), as backward does, and stop at the first "
              "layer whose input gradient is under the threshold")
_GRAD_OUTPUT = ("you found the layer just below the culprit: you measured the gradient "
                "arriving at each layer's output (grad_output). The layer that kills the "
                "gradient receives a healthy one and sends back a tiny one: measure what each "
                "layer sends back to its input (grad_input)")
_OLD_HOOK = ("the zeroed Linear layer was missed: register_backward_hook, the old form, sees "
             "only a module's last operation, and a Linear's is adding the bias, so its "
             "grad_input[0] is the bias's gradient, healthy above a dead layer. "
             "register_full_backward_hook gives the gradient at the module's input")


def _how(hunt: dict) -> str | None:
    """What is wrong with how one network was hunted, or None."""
    if hunt["non_leaf"]:
        return ("your code read .grad of a non-leaf tensor (a layer's input or output). It "
                "stays None (section 1): backward passes an intermediate's gradient on without "
                "storing it. Let a hook receive it as it passes.")
    if hunt["hooks"] == 0:
        return ("no hook was registered. The exercise asks for hooks that record every "
                "layer's gradient as backward passes through it (register_full_backward_hook "
                "on each layer, or register_hook on each layer's input).")
    if hunt["passes"] != 1:
        return (f"your function ran {hunt['passes']} backward passes; one is enough, with a "
                "hook on every layer recording as it passes.")
    if hunt["left"]:
        return (f"{hunt['left']} hook(s) are still registered when your function returns. A "
                "hook stays until its handle removes it (section 2): keep the handles and call "
                ".remove() on each, or the next backward through this model runs them again.")
    return None


def _diagnose(names, norms, threshold, culprit, said) -> tuple:
    """What the layer named shows on a network where the answer disagrees, as data: a tag
    and what the words need. Only what the observation tells apart is told apart."""
    if said is not None and not isinstance(said, str):
        return ("not a name", kind_of(said))
    if said is None:
        return ("missed", culprit, norms[culprit])
    if said not in norms:
        return ("not a layer", said)
    if culprit is not None and said == _bottom(names, norms, threshold, culprit):
        return ("nearest the input",)
    if culprit is not None and said == _below(names, norms, threshold, culprit):
        return ("below",)
    if norms[said] >= threshold:
        return ("above", said, norms[said], culprit is None)
    return ("not the first", said, norms[said], culprit)


def _diagnosis_words(diagnosis: tuple, threshold: float) -> str:
    """The sentence for a diagnosis of `_diagnose`."""
    tag, *facts = diagnosis
    if tag == "not a name":
        return (f"returned {facts[0]}; expected a layer's name (a str, as "
                "model.named_children() gives it) or None")
    if tag == "missed":
        culprit, norm = facts
        return (f"you returned None, but the gradient does vanish in this network: {culprit!r} "
                f"sends back to its input a gradient of norm {norm:.2e}, under the threshold")
    if tag == "not a layer":
        return f"{facts[0]!r} is not a layer of this network"
    if tag == "nearest the input":
        return _WRONG_WAY
    if tag == "below":
        return _GRAD_OUTPUT
    said, norm = facts[:2]
    sent = (f"the gradient {said!r} sends back to its input (for model(x).sum(), the whole "
            f"batch) has norm {norm:.2e}")
    if tag == "above":
        rest = ("; it stays above the threshold at every layer of this network: expected None"
                if facts[2] else "")
        return f"{sent}, above the threshold {threshold:.1e}: it does not vanish there{rest}"
    return (f"{sent}, under the threshold, but {facts[2]!r}, nearer the loss, is under it "
            "already: return the first one, walking back from the loss")


def _explain_vanishing(inputs: dict, got: list, want: list) -> str:
    at = next(i for i, (g, w) in enumerate(zip(got, want, strict=False)) if not _hunted(g, w))
    network, hunt = inputs["networks"][at], got[at]
    names, norms, culprit = _facts(network)
    where = (f"on a new network of {len(names)} layers ({', '.join(names)}), "
             f"threshold {network['threshold']:.1e}")
    if _how(hunt) is not None:
        return f"{where}: {_how(hunt)}"
    diagnosis = _diagnose(names, norms, network["threshold"], culprit, hunt["said"])
    words = _diagnosis_words(diagnosis, network["threshold"])
    return f"{words}." if diagnosis[0] == "not a name" else f"{where}: {words}."


VANISHING = Method(
    name=VANISH,
    make_inputs=_vanishing_inputs,
    observe=_observe_vanishing,
    reference=lambda inputs: _said(inputs, _found),
    explain=_explain_vanishing,
    mistakes={f"{_WRONG_WAY}.": lambda inputs: _said(inputs, _bottom),
              f"{_GRAD_OUTPUT}.": lambda inputs: _said(inputs, _below),
              f"{_OLD_HOOK}.": lambda inputs: _said(inputs, _found, full=False)},
    trials=1,
    agree=every_case(_hunted),
    passed="the right layer on 5 new broken networks (a shut gate, a saturated sigmoid, a "
           "saturated tanh, a Linear layer zeroed, the first layer zeroed) and None on 3 "
           "healthy ones (one behind a gate that lets the gradient back just above the "
           "threshold, one whose first sample alone saturates); one backward pass, every "
           "hook removed",
)
