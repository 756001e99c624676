"""Lesson 12's Exercise 3 (``l12-checkpoint-by-hooks``): checkpointing built from
saved-tensor hooks. The check runs the learner's function on new blocks (dropout in some,
an input that requires grad in some), looks with weak references (and, once, through every
live tensor) for what the block made and should not keep, counts the block's runs and
their grad mode, and compares the gradients with the plain block's.
"""

from __future__ import annotations

import gc
import weakref

import torch
from torch import nn

from .._spec import attempt, passed
from .._spec import failed as _fail

HOOKED = "checkpoint_by_hooks"


def first_error(err: Exception) -> str:
    """An exception in one line: its type and the first line of its message."""
    return f"raised {type(err).__name__}: {str(err).splitlines()[0]}"


def hooked_case(gen: torch.Generator, dropout: bool) -> tuple[nn.Sequential, torch.Tensor]:
    """A new block (float64, two activations, a dropout layer when asked) and its input."""
    width, hidden, batch, seed = (int(torch.randint(low, high, (1,), generator=gen))
                                  for low, high in ((3, 7), (6, 13), (4, 9), (0, 2**31)))
    first, second = ([nn.Tanh, nn.Sigmoid, nn.GELU, nn.ReLU][int(i)]
                     for i in torch.randperm(4, generator=gen)[:2])
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        layers = [nn.Linear(width, hidden), first(), *([nn.Dropout(0.3)] if dropout else []),
                  nn.Linear(hidden, hidden), second(), nn.Linear(hidden, width)]
        block = nn.Sequential(*layers).double()
    return block, torch.randn(batch, width, generator=gen, dtype=torch.float64)


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


def check_hooked(answer, seed):
    if not callable(answer):
        return _fail(HOOKED, f"expected a function (block, x) -> output, got "
                             f"{type(answer).__name__}")
    gen = torch.Generator().manual_seed(seed + 12)
    passed_trials = []
    for dropout, wants_grad in ((False, False), (False, True), (True, False), (True, True)):
        block, x = hooked_case(gen, dropout)
        upstream = torch.randn(x.shape, generator=gen, dtype=torch.float64)
        run_seed = int(torch.randint(0, 2**31, (1,), generator=gen))
        where = (f"on a new block ({', '.join(type(m).__name__ for m in block)}), "
                 f"{'an input that requires grad' if wants_grad else 'an input of data'}")
        with torch.random.fork_rng():  # the learner's random state stays as it was
            want = _plain_run(block, x, wants_grad, upstream, run_seed)
            watch = _Watch(block)
            try:
                report = _run_hooked(answer, block, x, wants_grad, upstream, run_seed, want,
                                     watch, passed_trials)
            finally:
                for handle in watch.handles:
                    handle.remove()
        if report is not None:
            return _fail(HOOKED, f"{where}: {report}") if isinstance(report, str) else report
        passed_trials.append((dropout, wants_grad))
    return passed(HOOKED, "on 4 new blocks (dropout in two, an input that requires grad in "
                          "two): nothing made inside the block kept between forward and "
                          "backward, the block run once more in backward, the plain block's "
                          "gradients")


ORDER = ("Each unpack must return the tensor its own pack received, recomputed: the "
         "recomputation saves what the forward pass saved, in the same order (the same input, "
         "requiring grad as it did, in grad mode), and backward unpacks in its own order")


def _run_hooked(answer, block, x, wants_grad, upstream, run_seed, want, watch, passed_trials):
    """One trial: None when it passes, else a failed report or what went wrong, in words."""
    (want_out, want_grads), dropout = want, any(isinstance(m, nn.Dropout) for m in block)
    leaf = x.clone().requires_grad_(wants_grad)
    torch.manual_seed(run_seed)
    watch.armed = True
    (out, failure), used = _torch_checkpoint_used(
        lambda: attempt(HOOKED, answer, block, leaf * 1.0 if wants_grad else leaf,
                        what="checkpoint_by_hooks", raised=first_error))
    watch.armed = False
    if used:
        return "torch.utils.checkpoint did the work: build it from saved_tensors_hooks instead"
    if failure is not None:
        return failure
    if not isinstance(out, torch.Tensor) or out.shape != want_out.shape:
        return f"returned {type(out).__name__}; expected the block's output, block(x)"
    if len(watch.runs) != 1:
        return f"the block ran {len(watch.runs)} times in the forward pass; once is enough"
    if not torch.equal(out.detach(), want_out):
        return "the output differs from block(x) run plainly"
    kept = watch.kept(out, copies_too=not passed_trials)
    if kept:
        return (f"{kept} of the {len(watch.made)} tensors the block's layers made are still "
                "in memory (or copies of them) between the forward and the backward pass. "
                "pack must not keep what it receives, nor a copy: return a small stand-in, "
                "such as the tensor's position among the saves")
    watch.runs.clear()
    block.zero_grad()
    try:
        (out * upstream).sum().backward()
    except Exception as err:
        if watch.runs and not any(watch.runs):
            return (f"backward failed ({first_error(err)}), and the block was recomputed "
                    "with grad mode off, so its operations saved nothing: backward runs with "
                    "grad mode off. Recompute under torch.enable_grad()")
        if wants_grad and (dropout, False) in passed_trials:
            return (f"backward {first_error(err)}, where the same kind of block with an input "
                    "of data passed. With x requiring grad the forward pass saved more (the "
                    "first Linear keeps its weight, to send a gradient to x): the recomputed "
                    "input must require grad as x does, or the saves no longer line up")
        return f"backward {first_error(err)}. {ORDER}"
    if len(watch.runs) != 1:
        return (f"the block ran {len(watch.runs)} times during backward; it must run exactly "
                "once: recompute on the first unpack, and hand every later unpack its tensor "
                "from that run")
    got = [p.grad for p in block.parameters()] + [leaf.grad]
    if all((g is None and w is None) or (g is not None and w is not None and torch.allclose(
            g, w, rtol=1e-12, atol=1e-15)) for g, w in zip(got, want_grads, strict=True)):
        return None
    if dropout and (False, wants_grad) in passed_trials:
        return ("the gradients differ from the plain block's, and this block draws a dropout "
                "mask where the block without one passed: the recomputation drew a new mask. "
                "Save the random state before the forward pass (torch.get_rng_state()) and "
                "restore it for the recomputation, as preserve_rng_state does (section 3)")
    return f"the gradients differ from the plain block's. {ORDER}"

