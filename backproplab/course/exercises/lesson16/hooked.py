"""Lesson 16's Exercise 3 (``l16-checkpoint-by-hooks``): checkpointing built from
saved-tensor hooks. The check runs the learner's function on new blocks (dropout in some,
an input that requires grad in some), looks with weak references (and, once, through every
live tensor) for what the block made and should not keep, counts the block's runs and
their grad mode, and compares the gradients with the plain block's.
"""

from __future__ import annotations

import functools
import gc
import weakref

import torch
from torch import nn

from .._spec import Method, as_plain, call_answer, every_case, kind_of, same

HOOKED = "checkpoint_by_hooks"


def first_error(err: Exception) -> str:
    """An exception in one line: its type and the first line of its message."""
    return f"raised {type(err).__name__}: {str(err).splitlines()[0]}"


_ACTIVATIONS = (nn.Tanh, nn.Sigmoid, nn.GELU, nn.ReLU)
_KINDS = ((False, False), (False, True), (True, False), (True, True))  # dropout, x wants grad


def _hooked_inputs(gen: torch.Generator) -> dict:
    """Four new blocks (dropout in two, an input that requires grad in two), each as its
    sizes, its two activations and the seed of its weights, with its input, the gradient
    that arrives at its output, and the seed of its run (its dropout mask)."""
    cases = []
    for dropout, wants_grad in _KINDS:
        width, hidden, batch, seed = (int(torch.randint(low, high, (1,), generator=gen))
                                      for low, high in ((3, 7), (6, 13), (4, 9), (0, 2**31)))
        activations = torch.randperm(len(_ACTIVATIONS), generator=gen)[:2].tolist()
        x = torch.randn(batch, width, generator=gen, dtype=torch.float64)
        cases.append({"width": width, "hidden": hidden, "seed": seed, "dropout": dropout,
                      "activations": activations, "x": x, "wants_grad": wants_grad,
                      "upstream": torch.randn(x.shape, generator=gen, dtype=torch.float64),
                      "run_seed": int(torch.randint(0, 2**31, (1,), generator=gen))})
    return {"blocks": cases}


def _block(case: dict) -> nn.Sequential:
    """A case's block (float64, two activations, a dropout layer when asked)."""
    first, second = (_ACTIVATIONS[i] for i in case["activations"])
    width, hidden = case["width"], case["hidden"]
    with torch.random.fork_rng():
        torch.manual_seed(case["seed"])
        layers = [nn.Linear(width, hidden), first(),
                  *([nn.Dropout(0.3)] if case["dropout"] else []),
                  nn.Linear(hidden, hidden), second(), nn.Linear(hidden, width)]
        return nn.Sequential(*layers).double()


class _Watch:
    """What the check sees of a block: its runs (the grad mode of each), and, while armed,
    weak references to the storage of each tensor its layers but the last make."""

    def __init__(self, block: nn.Sequential) -> None:
        self.runs, self.made, self.values, self.armed = [], [], [], False
        self.handles = [block[0].register_forward_pre_hook(
            lambda module, args: self.runs.append(torch.is_grad_enabled()))]
        self.handles += [layer.register_forward_hook(self._made) for layer in list(block)[:-1]]

    def _made(self, module, args, out) -> None:
        if self.armed:
            self.made.append(weakref.ref(out.untyped_storage()))
            self.values.append(out.detach().clone())

    def kept(self, returned: torch.Tensor, copies_too: bool) -> int:
        """How many tensors made inside the block are still in memory, or (``copies_too``:
        a slower look through every live object) copies of them, the output aside."""
        alive = sum(ref() is not None for ref in self.made)
        if alive:  # perhaps only a cycle of garbage holds them: collect it and look again
            gc.collect()
            alive = sum(ref() is not None for ref in self.made)
        if alive or not copies_too:
            return alive
        mine = {id(v) for v in self.values} | {id(returned)}
        return sum(type(obj) is torch.Tensor and id(obj) not in mine and not obj.requires_grad
                   and any(obj.shape == v.shape and obj.dtype == v.dtype and torch.equal(obj, v)
                           for v in self.values) for obj in gc.get_objects())


def _torch_checkpoint_used(run):
    """``run()``'s result, and whether torch.utils.checkpoint did the work (either variant)."""
    import torch.utils.checkpoint as torch_checkpoint

    used, places = [], [(torch_checkpoint, "_checkpoint_without_reentrant_generator"),
                        (torch_checkpoint.CheckpointFunction, "apply")]
    own = [vars(owner).get(name) for owner, name in places]  # None: inherited
    for owner, name in places:
        original = getattr(owner, name)
        setattr(owner, name, lambda *a, original=original, **k: used.append(1) or original(*a, **k))
    try:
        return run(), bool(used)
    finally:
        for (owner, name), value in zip(places, own, strict=True):
            if value is None:
                delattr(owner, name)
            else:
                setattr(owner, name, value)


def _plain_run(block, x, wants_grad, upstream, seed):
    """The block run plainly: its output, and the gradients of (out * upstream).sum()."""
    leaf = x.clone().requires_grad_(wants_grad)
    torch.manual_seed(seed)
    out = block(leaf * 1.0 if wants_grad else leaf)
    block.zero_grad()
    (out * upstream).sum().backward()
    return out.detach(), [p.grad.clone() for p in block.parameters()] + [leaf.grad]


def _hooked_reference(inputs: dict) -> list[dict]:
    """Each block's output and gradients, run plainly."""
    want = []
    for case in inputs["blocks"]:
        with torch.random.fork_rng():
            out, grads = _plain_run(_block(case), case["x"], case["wants_grad"],
                                    case["upstream"], case["run_seed"])
        want.append({"out": out, "grads": grads})
    return want


def _observe_hooked(answer, inputs: dict) -> list | dict:
    """Each block's run through the answer (see `_watched`), up to the first that failed
    or used torch's own checkpoint."""
    seen = []
    # Whatever lived before the run cannot be a copy the answer made: frozen, it is left
    # out of the collections and of the look through live objects (`_Watch.kept`), which
    # then cost what the answer made, not what the whole process holds.
    gc.freeze()
    try:
        for k, case in enumerate(inputs["blocks"]):
            block = _block(case)
            with torch.random.fork_rng():  # the learner's random state stays as it was
                watch = _Watch(block)
                try:
                    ran, failed = _watched(answer, block, case, watch, copies_too=k == 0)
                finally:
                    for handle in watch.handles:
                        handle.remove()
            if failed is not None and not ran["used"]:
                return failed
            seen.append(ran)
            if ran["used"]:
                break
    finally:
        # This thaws a caller's own freeze too: CPython thaws only all at once, and asking
        # whether anything was frozen before (gc.get_freeze_count) walks every frozen
        # object, tens of milliseconds a call in a process that holds torch.
        gc.unfreeze()
    return seen


def _watched(answer, block, case, watch, copies_too) -> tuple[dict, dict | None]:
    """One block through the answer: whether torch's checkpoint did the work, the output,
    the grad mode of each forward run, how many of the tensors the block's layers made are
    still in memory (or copies of them, when ``copies_too``) once it returned, then the
    backward pass's error, its runs of the block and the gradients; and the answer's
    failure, if any."""
    leaf = case["x"].clone().requires_grad_(case["wants_grad"])
    torch.manual_seed(case["run_seed"])
    watch.armed = True
    (out, failed), used = _torch_checkpoint_used(lambda: call_answer(
        answer, block, leaf * 1.0 if case["wants_grad"] else leaf, what="checkpoint_by_hooks",
        raised=first_error, not_callable=f"expected a function (block, x) -> output, got "
                                         f"{type(answer).__name__}"))
    watch.armed = False
    ran = {"used": used, "out": as_plain(out), "forward": list(watch.runs)}
    if used or failed is not None:
        return ran, failed
    ran.update(kept=watch.kept(out, copies_too), made=len(watch.made), error=None)
    watch.runs.clear()
    block.zero_grad()
    try:
        (out * case["upstream"]).sum().backward()
    except Exception as err:  # the learner's hooks, run by backward
        ran["error"] = first_error(err)
    ran.update(backward=list(watch.runs),
               grads=[as_plain(p.grad) for p in block.parameters()] + [as_plain(leaf.grad)])
    return ran, None


_exact = functools.partial(same, rtol=1e-12, atol=1e-15)  # float64 round-off, no more


def _hooked_agree(got: dict, want: dict) -> bool:
    return (not got["used"] and len(got["forward"]) == 1 and _exact(got["out"], want["out"])
            and got["kept"] == 0 and got["error"] is None and len(got["backward"]) == 1
            and _exact(got["grads"], want["grads"]))


ORDER = ("Each unpack must return the tensor its own pack received, recomputed: the "
         "recomputation saves what the forward pass saved, in the same order (the same input, "
         "requiring grad as it did, in grad mode), and backward unpacks in its own order")


def _explain_hooked(inputs: dict, got: list, want: list) -> str:
    at = next(i for i, (g, w) in enumerate(zip(got, want, strict=False))
              if not _hooked_agree(g, w))
    case, ran = inputs["blocks"][at], got[at]
    block = _block(case)
    where = (f"on a new block ({', '.join(type(m).__name__ for m in block)}), "
             f"{'an input that requires grad' if case['wants_grad'] else 'an input of data'}")
    passed = [(c["dropout"], c["wants_grad"]) for c in inputs["blocks"][:at]]
    return f"{where}: {_what_went_wrong(case, ran, want[at], passed)}"


def _what_went_wrong(case: dict, ran: dict, want: dict, passed: list) -> str:
    """The words for one block's run that is not what a right answer gives, in the order a
    learner can act on: the work done by torch, the forward pass, what was kept, backward."""
    if ran["used"]:
        return "torch.utils.checkpoint did the work: build it from saved_tensors_hooks instead"
    out = ran["out"]
    if not isinstance(out, torch.Tensor) or out.shape != want["out"].shape:
        return f"returned {kind_of(out)}; expected the block's output, block(x)"
    if len(ran["forward"]) != 1:
        return f"the block ran {len(ran['forward'])} times in the forward pass; once is enough"
    if not _exact(out, want["out"]):
        return "the output differs from block(x) run plainly"
    if ran["kept"]:
        return (f"{ran['kept']} of the {ran['made']} tensors the block's layers made are still "
                "in memory (or copies of them) between the forward and the backward pass. "
                "pack must not keep what it receives, nor a copy: return a small stand-in, "
                "such as the tensor's position among the saves")
    if ran["error"] is not None:
        if ran["backward"] and not any(ran["backward"]):
            return (f"backward failed ({ran['error']}), and the block was recomputed with grad "
                    "mode off, so its operations saved nothing: backward runs with grad mode "
                    "off. Recompute under torch.enable_grad()")
        if case["wants_grad"] and (case["dropout"], False) in passed:
            return (f"backward {ran['error']}, where the same kind of block with an input of "
                    "data passed. With x requiring grad the forward pass saved more (the first "
                    "Linear keeps its weight, to send a gradient to x): the recomputed input "
                    "must require grad as x does, or the saves no longer line up")
        return f"backward {ran['error']}. {ORDER}"
    if len(ran["backward"]) != 1:
        return (f"the block ran {len(ran['backward'])} times during backward; it must run "
                "exactly once: recompute on the first unpack, and hand every later unpack its "
                "tensor from that run")
    if case["dropout"] and (False, case["wants_grad"]) in passed:
        return ("the gradients differ from the plain block's, and this block draws a dropout "
                "mask where the block without one passed: the recomputation drew a new mask. "
                "Save the random state before the forward pass (torch.get_rng_state()) and "
                "restore it for the recomputation, as preserve_rng_state does (section 3)")
    return f"the gradients differ from the plain block's. {ORDER}"


HOOKED_CHECKPOINT = Method(
    name=HOOKED,
    make_inputs=_hooked_inputs,
    observe=_observe_hooked,
    reference=_hooked_reference,
    explain=_explain_hooked,
    trials=1,
    agree=every_case(_hooked_agree),
    passed="on 4 new blocks (dropout in two, an input that requires grad in two): nothing "
           "made inside the block kept between forward and backward, the block run once more "
           "in backward, the plain block's gradients",
)
