"""Lesson 16's Exercise 3 (``l16-checkpoint-by-hooks``): checkpointing built from
saved-tensor hooks. The check runs the learner's function on new blocks (dropout in some,
an input that requires grad in some, the first block called twice), looks with weak
references (and, once, through every live tensor) for what the block made and should not
keep, counts the block's runs and their grad mode, compares the gradients with the plain
block's, and the global random state after the forward and the backward pass with where
a plain run leaves it.
"""

from __future__ import annotations

import collections
import functools
import gc
import inspect
import types
import weakref

import torch
from torch import nn

from .._spec import Method, as_plain, call_answer, every_case, kind_of, same, seeded

HOOKED = "checkpoint_by_hooks"


def first_error(err: Exception) -> str:
    """An exception in one line: its type and the first line of its message."""
    return f"raised {type(err).__name__}: {str(err).splitlines()[0]}"


_ACTIVATIONS = (nn.Tanh, nn.Sigmoid, nn.GELU, nn.ReLU)
_KINDS = ((False, False), (False, True), (True, False), (True, True))  # dropout, x wants grad


def _hooked_inputs(gen: torch.Generator) -> dict:
    """Four new blocks (dropout in two, an input that requires grad in two), each as its
    sizes, its two activations and the seed of its weights, with its input, the gradient
    that arrives at its output, and the seed of its run (its dropout mask).

    The first block is called a second time right after it (``again``): a function that
    keeps something from one call to the next (a list as a default argument, or at module
    level) meets it there, on a block it has just passed, before a new kind of block
    could take the blame."""
    cases = []
    for dropout, wants_grad in _KINDS:
        width, hidden, batch, seed = (int(torch.randint(low, high, (1,), generator=gen))
                                      for low, high in ((3, 7), (6, 13), (4, 9), (0, 2**31)))
        activations = torch.randperm(len(_ACTIVATIONS), generator=gen)[:2].tolist()
        x = torch.randn(batch, width, generator=gen, dtype=torch.float64)
        cases.append({"width": width, "hidden": hidden, "seed": seed, "dropout": dropout,
                      "activations": activations, "x": x, "wants_grad": wants_grad,
                      "upstream": torch.randn(x.shape, generator=gen, dtype=torch.float64),
                      "run_seed": int(torch.randint(0, 2**31, (1,), generator=gen)),
                      "again": False})
    cases.insert(1, dict(cases[0], again=True))
    return {"blocks": cases}


def _block(case: dict) -> nn.Sequential:
    """A case's block (float64, two activations, a dropout layer when asked)."""
    first, second = (_ACTIVATIONS[i] for i in case["activations"])
    width, hidden = case["width"], case["hidden"]
    with seeded(case["seed"]):
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


def _seed_the_run(seed) -> torch.Tensor:
    """Seed the global generator for one run, then draw once, so that the state at the call
    is not one a seed starts (reseeding with torch.initial_seed() cannot stand in for the
    saved state); the state at the call. The CPU generator alone, as `seeded` seeds it: the
    dropout masks draw from it, and torch.manual_seed would also queue a CUDA seeding."""
    torch.default_generator.manual_seed(seed)
    torch.rand(1)
    return torch.get_rng_state()


def _between_the_passes() -> torch.Tensor:
    """A draw between the forward and the backward pass, as a later dropout layer makes
    (a backward that sets the global state back would lose it); the state before backward."""
    torch.rand(1)
    return torch.get_rng_state()


def _plain_run(block, x, wants_grad, upstream, seed):
    """The block run plainly: its output, the gradients of (out * upstream).sum(), and the
    global random state after the forward and after the backward pass."""
    leaf = x.clone().requires_grad_(wants_grad)
    _seed_the_run(seed)
    out = block(leaf * 1.0 if wants_grad else leaf)
    after_forward = torch.get_rng_state()
    _between_the_passes()
    block.zero_grad()
    (out * upstream).sum().backward()
    return (out.detach(), [p.grad.clone() for p in block.parameters()] + [leaf.grad],
            {"forward": after_forward, "backward": torch.get_rng_state()})


def _hooked_reference(inputs: dict) -> list[dict]:
    """Each block's output, gradients and random states, run plainly."""
    want = []
    for case in inputs["blocks"]:
        with torch.random.fork_rng():
            out, grads, rng = _plain_run(_block(case), case["x"], case["wants_grad"],
                                         case["upstream"], case["run_seed"])
        want.append({"out": out, "grads": grads, "rng": rng})
    return want


def _observe_hooked(answer, inputs: dict) -> list | dict:
    """Each block's run through the answer (see `_watched`), up to the first that failed
    or used torch's own checkpoint."""
    seen, held = [], _held(answer)
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
            seen.append(dict(ran, held=held) if k == 0 and held else ran)
            if ran["used"]:
                break
    finally:
        # This thaws a caller's own freeze too: CPython thaws only all at once, and asking
        # whether anything was frozen before (gc.get_freeze_count) walks every frozen
        # object, tens of milliseconds a call in a process that holds torch.
        gc.unfreeze()
    return seen


_STORES = (list, dict, set, collections.deque)


def _tensors_in(value) -> int:
    """How many tensors a list, dict (its values), set or deque holds directly."""
    if type(value) not in _STORES:
        return 0
    return sum(isinstance(v, torch.Tensor) for v in (value.values() if isinstance(value, dict)
                                                     else value))


def _held(answer) -> list[list]:
    """The tensors the answer holds before the check first calls it, as [where, how many]:
    in a default argument, or in a module-level name its code (or a function inside it)
    reads. A fresh answer (the grade's) holds none; one called before, by an earlier run
    of the check, may."""
    found = []
    try:
        params = inspect.signature(answer).parameters.values()
    except (TypeError, ValueError):  # not a plain function: nothing to look at
        params = ()
    for p in params:
        if p.default is not p.empty and _tensors_in(p.default):
            found.append([f"its default argument {p.name}", _tensors_in(p.default)])
    codes, names = [getattr(answer, "__code__", None)], set()
    while codes:
        code = codes.pop()
        if isinstance(code, types.CodeType):
            names.update(code.co_names)
            codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    module = getattr(answer, "__globals__", {})
    found += [[f"the module-level {type(module[name]).__name__} {name}", _tensors_in(module[name])]
              for name in sorted(names) if name in module and _tensors_in(module[name])]
    return found


def _watched(answer, block, case, watch, copies_too) -> tuple[dict, dict | None]:
    """One block through the answer: whether torch's checkpoint did the work, the output
    (and whether it requires grad), the grad mode of each forward run, the random state
    after it, how many of the tensors the block's layers made are still in memory (or
    copies of them, when ``copies_too``) once it returned, then the backward pass's error,
    its runs of the block, the gradients and the random state after it; and the answer's
    failure, if any. The random states before the call and before backward come along,
    to say where a state that moved was moved to."""
    leaf = case["x"].clone().requires_grad_(case["wants_grad"])
    before_call = _seed_the_run(case["run_seed"])
    watch.armed = True
    (out, failed), used = _torch_checkpoint_used(lambda: call_answer(
        answer, block, leaf * 1.0 if case["wants_grad"] else leaf, what="checkpoint_by_hooks",
        raised=first_error, not_callable=f"expected a function (block, x) -> output, got "
                                         f"{type(answer).__name__}"))
    watch.armed = False
    ran = {"used": used, "out": as_plain(out), "forward": list(watch.runs)}
    if used or failed is not None:
        return ran, failed
    rng = {"before call": before_call, "forward": torch.get_rng_state()}
    ran.update(kept=watch.kept(out, copies_too), made=len(watch.made), error=None,
               requires_grad=isinstance(out, torch.Tensor) and out.requires_grad)
    rng["before backward"] = _between_the_passes()
    watch.runs.clear()
    block.zero_grad()
    try:
        (out * case["upstream"]).sum().backward()
    except Exception as err:  # the learner's hooks, run by backward
        ran["error"] = first_error(err)
    rng["backward"] = torch.get_rng_state()
    ran.update(backward=list(watch.runs), rng=rng,
               grads=[as_plain(p.grad) for p in block.parameters()] + [as_plain(leaf.grad)])
    return ran, None


_exact = functools.partial(same, rtol=1e-12, atol=1e-15)  # float64 round-off, no more


def _same_rng(got: dict, want: dict) -> bool:
    """Whether the global random state after the forward and after the backward pass is
    where the plain run left it."""
    return all(torch.equal(got["rng"][k], want["rng"][k]) for k in ("forward", "backward"))


def _hooked_agree(got: dict, want: dict) -> bool:
    return (not got["used"] and len(got["forward"]) == 1 and _exact(got["out"], want["out"])
            and got["kept"] == 0 and got["error"] is None and len(got["backward"]) == 1
            and _exact(got["grads"], want["grads"]) and _same_rng(got, want))


ORDER = ("Each unpack must return the tensor its own pack received, recomputed: the "
         "recomputation saves what the forward pass saved, in the same order (the same input, "
         "requiring grad as it did, in grad mode), and backward unpacks in its own order")


def _explain_hooked(inputs: dict, got: list, want: list) -> str:
    at = next(i for i, (g, w) in enumerate(zip(got, want, strict=False))
              if not _hooked_agree(g, w))
    case, ran = inputs["blocks"][at], got[at]
    block = _block(case)
    where = (f"on {'the first block again' if case['again'] else 'a new block'} "
             f"({', '.join(type(m).__name__ for m in block)}), "
             f"{'an input that requires grad' if case['wants_grad'] else 'an input of data'}")
    passed = [(c["dropout"], c["wants_grad"]) for c in inputs["blocks"][:at]]
    if ran.get("held"):  # an earlier call's tensors, met by the check's first call
        held = " and ".join(f"{holder} already held {n} tensor{'s' * (n > 1)}"
                            for holder, n in ran["held"])
        return (f"{where}: the first call fails ({_symptom(ran, want[at])}), and before the "
                f"check called checkpoint_by_hooks, {held}, which it reads. "
                "Something kept from one call to the next (a list given as a default argument, "
                "def f(block, x, saved=[]), or kept at module level) hands each call what an "
                "earlier one left, such as an earlier run of this check: each call must start "
                "from nothing of an earlier one")
    return f"{where}: {_what_went_wrong(case, ran, want[at], passed)}"


def _symptom(ran: dict, want: dict) -> str:
    """What one run did differently from a right answer's, in a few words and no advice."""
    out = ran["out"]
    if not isinstance(out, torch.Tensor) or out.shape != want["out"].shape:
        return f"it returned {kind_of(out)}"
    if ran["error"] is not None:
        return f"backward {ran['error']}"
    if len(ran["backward"]) != 1:
        return f"the block ran {len(ran['backward'])} times during backward"
    if not _exact(ran["grads"], want["grads"]):
        return "the gradients differ from the plain block's"
    return "its run differs from the first call's"


# Where backward may have set the random state back to: states the check notes on the way
# (`_watched`), each in words.
_SET_BACK_TO = {"before call": "where it stood before the call",
                "forward": "where the forward pass left it"}


def _set_back_to(rng: dict) -> str | None:
    """The words for the earlier state that the state after backward equals, if any."""
    return next((words for k, words in _SET_BACK_TO.items()
                 if torch.equal(rng["backward"], rng[k])), None)


FORK = ("restore the saved state inside torch.random.fork_rng(), which puts the generator "
        "back once the recomputation is done, as torch.utils.checkpoint does")


def _rng_out_of_place(ran: dict, want: dict) -> str:
    """The words for a run whose output and gradients are right but whose global random
    state, after the forward or the backward pass, is not where a plain run leaves it."""
    said = "the output and the gradients are right, but "
    if not torch.equal(ran["rng"]["forward"], want["rng"]["forward"]):
        if torch.equal(ran["rng"]["forward"], ran["rng"]["before call"]):
            return said + (
                "after the call the global random state is where it stood before it, yet "
                "block(x) draws its dropout mask and moves the generator on: a next call would "
                "draw this same mask again. Only the recomputation belongs inside "
                "torch.random.fork_rng(), not the forward pass")
        return said + ("after the call the global random state is not where block(x) leaves "
                       "it: the forward pass must draw exactly what block(x) draws")
    back_to = _set_back_to(ran["rng"])
    if back_to is not None:
        return said + (
            f"backward set the global random state back to {back_to}, so the draws made since "
            "(among them one the check makes between the two passes) come out again. A plain "
            f"backward draws nothing and leaves the generator where it found it: {FORK}")
    return said + ("backward moved the global random state, where a plain backward draws "
                   f"nothing and leaves the generator where it found it: {FORK}")


def _what_went_wrong(case: dict, ran: dict, want: dict, passed: list) -> str:
    """The words for one block's run that is not what a right answer gives, in the order a
    learner can act on: the work done by torch, a second call that fails where the first
    passed, the forward pass, what was kept, backward, the random state."""
    if ran["used"]:
        return "torch.utils.checkpoint did the work: build it from saved_tensors_hooks instead"
    if case["again"]:  # the first block, called again right after it passed
        return (f"a second call on the same block and input fails where the first call passed "
                f"({_symptom(ran, want)}): something the first call left behind changes the "
                "second, such as a list given as a default argument (def f(block, x, "
                "saved=[])) or kept at module level. Each call must start from nothing of an "
                "earlier one")
    out = ran["out"]
    if not isinstance(out, torch.Tensor) or out.shape != want["out"].shape:
        return f"returned {kind_of(out)}; expected the block's output, block(x)"
    if len(ran["forward"]) != 1:
        return f"the block ran {len(ran['forward'])} times in the forward pass; once is enough"
    if not _exact(out, want["out"]):
        return "the output differs from block(x) run plainly"
    if not ran["requires_grad"]:
        return ("the output does not require grad, where block(x) does (the block's weights "
                "require grad), so backward cannot reach the block: return the output the "
                "block made, not a detached copy nor one made under torch.no_grad()")
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
    if _exact(ran["grads"], want["grads"]):
        return _rng_out_of_place(ran, want)
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
    passed="on 4 new blocks (dropout in two, an input that requires grad in two), the first "
           "called twice: nothing made inside the block kept between forward and backward, "
           "the block run once more in backward, the plain block's gradients, the random "
           "state left where a plain run leaves it",
)
