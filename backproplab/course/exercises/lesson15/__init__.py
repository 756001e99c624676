"""Lesson 15, tools for looking inside backward: its exercise, its check and its prediction.

The exercise (``l15-vanishing``) is a method check: a search with hooks for the layer
where the gradient vanishes in a broken network. The check watches the answer on six new
broken networks (a shut gate, a saturated sigmoid, a saturated tanh, a Linear layer
zeroed, the first layer zeroed, a gate that lets the gradient back just under the
threshold) and three healthy ones (one plain, one behind a gate that lets the gradient
back just above the threshold, one whose first sample alone saturates), all made in module
``networks``. It sees the hooks the answer registers, its backward passes, the hooks it
leaves behind, a non-leaf .grad read, and the layer it names; and it knows the slips of
that hunt: the layer under the threshold nearest the input named (the walk started from
the input), grad_output taken for grad_input, the old register_backward_hook (on a Linear
it sees the bias's gradient, so only a Linear culprit shows it), a measure larger than the
norm (it misses the gate just under the threshold).
"""

from __future__ import annotations

import warnings

import torch
from torch import nn
from torch.nn.modules import module as module_hooks
from torch.utils.hooks import RemovableHandle

from .._spec import Method, Prediction, as_plain, call_answer, count_autograd, every_case, kind_of
from .networks import Gate, _culprit, _network, _vanishing_inputs, broken_network, input_grad_norms

__all__ = ["EXERCISES", "PREDICTIONS", "Gate", "broken_network", "input_grad_norms"]

VANISH = "first_vanishing_layer"


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


def _larger(names, norms, threshold, culprit):
    """What a measure a few times larger than the norm finds: the culprit, but None where
    the culprit's norm is only just under the threshold (everywhere else it is 100 times
    under)."""
    return culprit if culprit is None or norms[culprit] < threshold / 100 else None


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
_GRAD_OUTPUT = ("you found the layer just below the culprit, the one a measure of the "
                "gradient arriving at each layer's output (grad_output) finds. The layer that "
                "kills the gradient receives a healthy one and sends back a tiny one: measure "
                "what each layer sends back to its input (grad_input)")
_LARGER = ("you returned None where the gradient does vanish, its norm just under the "
           "threshold at a gate in front of a healthy network, as a measure larger than the "
           "norm does: the entries' sizes added up (the L1 norm, .abs().sum()), or each "
           "sample's norm added up over the batch. Compare the norm of the whole batch's "
           "gradient, grad_input[0].norm(), with the threshold")
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
              f"{_OLD_HOOK}.": lambda inputs: _said(inputs, _found, full=False),
              f"{_LARGER}.": lambda inputs: _said(inputs, _larger)},
    trials=1,
    agree=every_case(_hunted),
    passed="the right layer on 6 new broken networks (a shut gate, a saturated sigmoid, a "
           "saturated tanh, a Linear layer zeroed, the first layer zeroed, a gate that lets "
           "the gradient back just under the threshold) and None on 3 healthy ones (one "
           "behind a gate that lets it back just above the threshold, one whose first "
           "sample alone saturates); one backward pass, every hook removed",
)

EXERCISES = {
    "l15-vanishing": VANISHING,
}

# --------------------------------------------------------------------------- predictions


def _pileup_answer():
    """w.grad at step 3 when a doubling hook is registered on w inside the loop."""
    w = torch.tensor(1.0, requires_grad=True)
    for _step in range(3):
        w.register_hook(lambda grad: grad * 2)
        w.grad = None
        (3 * w).backward()
    return w.grad.item()


PREDICTIONS = {
    "l15-predict-pileup": Prediction(
        question="w.grad at step 3, with the doubling hook registered inside the loop",
        answer=_pileup_answer,
        hint="register_hook adds a hook; it does not replace the ones already on w. How many "
             "hooks does w carry during the third backward, and what does each one do?",
        why="each step adds one more hook, so the third backward runs three of them: "
            "3 · 2 · 2 · 2 = {answer}",
    ),
}
