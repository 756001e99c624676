"""The networks of lesson 15's check: random stacks of Linear and tanh or sigmoid blocks,
broken in one of four ways (a shut gate, a saturated sigmoid or tanh, a zeroed Linear) or
healthy, each checked to hold a gradient far above the threshold down to its culprit and
far below it there; the near misses that tell a norm from smaller and larger measures; and
each network as plain data (its layers' names, kinds and weights), rebuilt where the answer
runs.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict

import torch
from torch import nn

from .._spec import randint


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
    """A float64 Linear whose weights the caller sets. Its initialisation is not run: it
    would draw from the learner's random generator. Set up as ``nn.Linear.__init__`` does
    it, less that draw, this takes a tenth of ``nn.utils.skip_init``'s time, which showed
    in a check that builds a few thousand layers."""
    fc = nn.Linear.__new__(nn.Linear)
    nn.Module.__init__(fc)
    fc.in_features, fc.out_features = n_in, n_out
    fc.weight = nn.Parameter(torch.zeros(n_out, n_in, dtype=torch.float64))
    fc.bias = nn.Parameter(torch.zeros(n_out, dtype=torch.float64))
    return fc


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


def _near_miss(gen: torch.Generator,
               under: bool = False) -> tuple[nn.Sequential, torch.Tensor, float]:
    """A healthy network behind a nearly shut gate, "gate0" in front of fc1, the input in
    large units to match (so the rest runs as before): the gradient the gate sends back has
    a norm about 1.5 times the threshold, so it does not vanish and None is right; but a
    squared norm, a loss taken as model(x).mean(), an average of the samples' norms, the
    largest entry or the mean entry all fall under the threshold there. ``under``: the norm
    is about 1.5 times under the threshold instead, so "gate0" is right; but a measure
    larger than the norm (the entries' sizes added up, or the samples' norms added up)
    stays above the threshold there."""
    while True:
        model, x, threshold, _, _ = broken_network(gen, "healthy")
        x = x.clone().requires_grad_()
        (g,) = torch.autograd.grad(model(x).sum(), x)
        norm = float(g.norm())
        # each of those measures is at least `apart` times under (above) the norm here
        apart = (min(float(g.abs().sum()), float(g.norm(dim=1).sum())) / norm if under
                 else min(len(x) ** 0.5, norm / float(g.abs().max())))
        if apart >= 2:
            break
    factor = apart ** (-0.5 if under else 0.5) * threshold / norm
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
    """Nine networks, each with its input and threshold; every check has all of them:
    four broken ones (a shut gate, a saturated sigmoid, a saturated tanh, a Linear zeroed,
    in a new order) and a healthy one, the culprit somewhere new; the first Linear zeroed
    (the culprit is the first layer: a walk that stops before index 0 misses it); a healthy
    network behind a gate just above the threshold (`_near_miss`: a measure smaller than
    the norm of model(x).sum()'s gradient names it); a healthy network whose first sample
    alone saturates (`_one_row_saturated`: a measure of one sample names a layer); a healthy
    network behind a gate just under the threshold (`_near_miss` ``under``: the gate is the
    culprit, and a measure larger than the norm, such as the L1 norm, misses it)."""
    kinds = [("gate", "sigmoid", "tanh", "linear")[i]
             for i in torch.randperm(4, generator=gen).tolist()]
    drawn = [broken_network(gen, kind)[:3] for kind in [*kinds, "healthy"]]
    drawn += [broken_network(gen, "linear", first=True)[:3], _near_miss(gen),
              _one_row_saturated(gen), _near_miss(gen, under=True)]
    return {"networks": [{"layers": _layers(model), "x": x, "threshold": threshold}
                         for model, x, threshold in drawn]}
