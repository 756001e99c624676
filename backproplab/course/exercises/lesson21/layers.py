"""Lesson 21, Exercise 2 (``l21-layers``): a report per module, as soon as the gradients
a backward pass computes for its parameters exist."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from .._spec import Method, call_answer, count_autograd, failure, plain, seeded

LAYERS = "watch_layers"


class ScaledNet(nn.Sequential):
    """A Sequential with a parameter of its own, a scale on each input feature: the root
    module (name "") has parameters too, as "every module of model" includes it."""

    def __init__(self, width: int, *layers: nn.Module) -> None:
        super().__init__(*layers)
        # (1, width): the first of model.parameters() still has the input width as shape[1]
        self.scale = nn.Parameter(torch.ones(1, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x * self.scale)


def layer_model(gen: torch.Generator) -> tuple[nn.Module, list[torch.Tensor]]:
    """A new small network in float64 (sizes, layers and weights from ``gen``), and three
    input batches. The first block is nested (its layers are "0.0", "0.2"...), and the root
    has a parameter of its own, so that a walk over the top level alone, or one that skips
    the root, misses some. The global random generator is left as it was."""
    sizes = [int(torch.randint(2, 5, (1,), generator=gen)) for _ in range(3)]
    with seeded():
        block: list[nn.Module] = [nn.Linear(sizes[0], sizes[1]), nn.Tanh()]
        if bool(torch.rand((), generator=gen) < 0.5):
            block.append(nn.LayerNorm(sizes[1]))
        model = ScaledNet(sizes[0], nn.Sequential(*block),
                          nn.Linear(sizes[1], sizes[2],
                                    bias=bool(torch.rand((), generator=gen) < 0.5)),
                          nn.Tanh(), nn.Linear(sizes[2], 1)).double()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64))
    batches = [torch.randn(int(torch.randint(2, 5, (1,), generator=gen)), sizes[0],
                           generator=gen, dtype=torch.float64) for _ in range(3)]
    return model, batches


PASSES = ("a first backward pass", "a second backward pass (.grad not zeroed in between)",
          "a pass with inputs=[first layer's weight, last parameter]")


def _own(model: nn.Module) -> dict[str, dict[str, torch.Tensor]]:
    """Module name -> its own parameters by name, for modules that have any."""
    return {name: dict(m.named_parameters(recurse=False)) for name, m in model.named_modules()
            if dict(m.named_parameters(recurse=False))}


def _passes(model: nn.Module, batches: list[torch.Tensor]) -> list[Callable[[], None]]:
    """The backward passes the check runs, in the order of `PASSES`."""
    layers = [params for name, params in _own(model).items() if name]  # the root's aside
    some = [layers[0]["weight"], list(layers[-1].values())[-1]]

    def full(x: torch.Tensor) -> Callable[[], None]:
        return lambda: model(x).pow(2).sum().backward()
    return [full(batches[0]), full(batches[1]),
            lambda: model(batches[2]).pow(2).sum().backward(inputs=some)]


def layers_inputs(gen: torch.Generator) -> dict[str, int]:
    """The seed the network and its batches are made from (seed * 7 + 3)."""
    return {"seed": gen.initial_seed() * 7 + 3}


def _report_event(model: nn.Module, name: Any, grads: Any) -> dict[str, Any]:
    """A report as plain data: the name, what the grads are, their values by key, and the
    keys whose value *is* that parameter's .grad."""
    module = dict(model.named_modules()).get(name) if isinstance(name, str) else None
    own = dict(module.named_parameters(recurse=False)) if module is not None else {}
    given = grads if isinstance(grads, dict) else None
    return {"kind": "report", "name": name if isinstance(name, str) else repr(name),
            "type": type(grads).__name__,
            "keys": None if given is None else sorted(str(k) for k in given),
            "values": None if given is None else {str(k): plain(v) for k, v in given.items()},
            "held": sorted(str(k) for k, v in (given or {}).items()
                           if k in own and v is not None and v is own[k].grad)}


def _observe_layers(answer: Any, inputs: dict[str, int]) -> dict[str, Any] | dict:
    """Each pass's events in order (the check's own tensor hooks, registered first, log
    every parameter's gradient as the engine makes it; the learner's reports come between),
    then what the returned handles are and whether reports stop once they are removed."""
    model, batches = layer_model(torch.Generator().manual_seed(inputs["seed"]))
    events: list[dict[str, Any]] = []
    for name, p in model.named_parameters():
        p.register_hook(lambda grad, name=name: events.append(
            {"kind": "grad", "name": name, "value": plain(grad)}))
    with count_autograd() as seen:
        handles, failed = call_answer(answer, model, lambda name, grads: events.append(
            _report_event(model, name, grads)))
    if failed is not None:
        return failed
    if seen.reverse:
        return failure("autograd", f"your function ran a backward pass ({seen.calls[0]}); it "
                                   "only arranges the hooks, and the check runs the passes.")
    passes = []
    for run in _passes(model, batches):
        events.clear()
        try:
            run()
        except Exception as err:  # raised inside the learner's hook: no pass after it
            return {"passes": [*passes, {"events": list(events), "raised": f"{type(err).__name__}"
                                                                          f": {err}"}]}
        passes.append({"events": list(events), "raised": None})
    found = list(handles) if isinstance(handles, (list, tuple)) else [handles] if hasattr(
        handles, "remove") else []
    removable = bool(found) and all(hasattr(h, "remove") for h in found)
    events.clear()
    if removable:
        for handle in found:
            handle.remove()
        model(batches[0]).pow(2).sum().backward()
    return {"passes": passes, "returned": type(handles).__name__, "removable": removable,
            "after": sum(e["kind"] == "report" for e in events)}


def _reference(inputs: dict[str, int]) -> dict[str, list[str]]:
    """The modules with parameters of their own, each with its parameters' names: what a
    right answer reports on (its reports are held against the run's own gradients)."""
    model, _ = layer_model(torch.Generator().manual_seed(inputs["seed"]))
    return {name: list(params) for name, params in _own(model).items()}


def _pass_problem(own: dict[str, list[str]], events: list[dict], what: str) -> str | None:
    """What is wrong with the reports of one backward pass, or None."""
    reports = [(k, e) for k, e in enumerate(events) if e["kind"] == "report"]
    names = [e["name"] for _, e in reports]
    if len(set(names)) == 1 and len(names) > 1 and len(own) > 1:
        return (f"in {what}, every report named {names[0]!r}. A function made in a loop looks "
                "its loop variables up when it runs, by then their last values: bind them when "
                "you make it (lambda grads, name=name: ...).")
    for name in names:
        if name not in own:
            return (f"in {what}, you reported {name!r}, which has no parameters of its own. "
                    "Report each module that has (named_parameters(recurse=False)), under its "
                    "name in model.named_modules().")
        if names.count(name) > 1:
            why = ("a hook on each parameter reports once per parameter: wait for all of the "
                   "module's gradients (register_multi_grad_hook)" if what == PASSES[0] else
                   "does a count or a record carry over from the pass before?")
            return (f"in {what}, you reported {name!r} {names.count(name)} times; once per pass "
                    f"({why}).")
    # The root last: its parameter is the first used in forward, so the last one backward
    # reaches, and a slip shows first on the layers (as on a model without one).
    for module, params in sorted(own.items(), key=lambda item: item[0] == ""):
        full = {f"{module}.{k}" if module else k: k for k in params}
        grads = [(k, e) for k, e in enumerate(events) if e["kind"] == "grad" and e["name"] in full]
        mine = [(k, e) for k, e in reports if e["name"] == module]
        if not grads and mine:
            return (f"in {what}, you reported {module!r}, though this pass computes none of "
                    "its gradients.")
        if grads and not mine:
            computed = {e["name"] for e in events if e["kind"] == "grad"}
            missed = [m for m, ps in own.items() if m not in names
                      and any((f"{m}.{k}" if m else k) in computed for k in ps)]
            return _never(missed, what, len(grads), len(params))
        if not grads:
            continue
        (at, report), last = mine[0], grads[-1][0]
        if at < last:
            done = sum(1 for k, _ in grads if k < at)
            if done == 0:
                return (f"in {what}, you reported {module!r} before any of the gradients this "
                        "pass computes for it existed. A module's backward hook runs when the "
                        "gradient reaches the module, before the engine reaches its "
                        "parameters' AccumulateGrad nodes: hook the parameters.")
            return (f"in {what}, you reported {module!r} after {done} of the {len(grads)} "
                    "gradients this pass computes for it: a report waits for all of them "
                    "(register_multi_grad_hook's mode 'any' fires at the first).")
        if any(e["kind"] == "grad" for e in events[last + 1:at]):
            return (f"in {what}, you reported {module!r} only after later gradients had come: "
                    "report as soon as its own last gradient exists.")
        problem = _values_problem(module, params, full, grads, report, what)
        if problem is not None:
            return problem
    return None


def _never(missed: list[str], what: str, computed: int, owned: int) -> str:
    """Words for modules this pass computes gradients for, never reported; ``computed`` and
    ``owned`` count the first one's gradients."""
    if computed < owned:
        return (f"in {what}, which computes only {computed} of the {owned} gradients of "
                f"{missed[0]!r}, you never reported it: wait for the gradients this pass "
                "computes, not for all of them, and give None for the others. "
                "register_multi_grad_hook's mode 'all' asks the engine which will come.")
    # The two ways to miss a module of named_modules(): the root, and nested ones.
    hints = [" The model itself is one of model.named_modules() (its name is ''), with "
             "parameters of its own." if "" in missed else "",
             " Modules inside other modules count too: named_modules() walks every level, "
             "named_children() only the top one." if any("." in m for m in missed) else ""]
    return f"in {what}, you never reported {', '.join(map(repr, missed))}.{''.join(hints)}"


def _values_problem(module: str, params: list[str], full: dict[str, str],
                    grads: list[tuple[int, dict]], report: dict, what: str) -> str | None:
    if report["keys"] != sorted(params):
        keys = report["keys"] if report["keys"] is not None else report["type"]
        return (f"in {what}, the grads you reported for {module!r} are {keys}; give a dict "
                f"by parameter name: {sorted(params)}.")
    if report["held"]:
        return (f"in {what}, you reported {module!r} with the parameters' .grad tensors "
                "themselves. .grad is the sum of every pass since it was last zeroed (lesson "
                "05), and the next pass adds into that very tensor, so what you handed over "
                "changes after your report. Report the gradients this pass computed: those "
                "your hooks receive (a tensor hook, register_multi_grad_hook).")
    computed = {full[e["name"]]: e["value"] for _, e in grads}
    for key in params:
        want, got = computed.get(key), report["values"][key]
        if want is None and got is not None:
            return (f"in {what}, you gave {module!r}.{key} a gradient, but this pass computes "
                    "none for it: give None.")
        if want is not None and (not isinstance(got, torch.Tensor) or not torch.equal(got, want)):
            return (f"in {what}, the gradient you reported for "
                    f"{f'{module}.{key}' if module else key} is not the one this pass computed "
                    "for it.")
    return None


def _problem(got: dict[str, Any], own: dict[str, list[str]]) -> str | None:
    for what, seen in zip(PASSES, got["passes"], strict=False):
        if seen["raised"] is not None:
            return f"in {what}, your hook raised {seen['raised']}"
        problem = _pass_problem(own, seen["events"], what)
        if problem is not None:
            return problem
    if not got.get("removable"):
        return (f"it returned {got.get('returned')}; return the handles of the hooks (a list), "
                "so that they can be removed.")
    if got["after"]:
        return ("reports still came after every handle your function returned was removed: "
                "return the handle of each hook you registered.")
    return None


LAYERS_EXERCISE = Method(
    name=LAYERS,
    make_inputs=layers_inputs,
    observe=_observe_layers,
    reference=_reference,
    explain=lambda inputs, got, want: _problem(got, want) or "it did not report as asked.",
    trials=1,
    agree=lambda got, want: len(got["passes"]) == len(PASSES) and _problem(got, want) is None,
    passed="one report per module and pass, right after its last gradient, on a new network: "
           "full, repeated and pruned passes, and none once removed",
)
