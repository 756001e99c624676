"""Lesson 23, backward across processes: its exercises and its prediction.

Every exercise runs the learner's function inside real worker processes
(`backproplab.distributed.run`: gloo, on the CPU), first in 2 processes and
then in 3, so that an answer which assumes two workers is caught:

- ``l23-fp16-hook`` (`fp16`): a DDP communication hook that averages each
  bucket in float16, also where a float16 sum over the ranks would overflow.
- ``l23-buckets`` (`buckets`): DDP's buckets built from gradient hooks on a
  plain model, without DDP: the all-reduce calls (their sizes, and when each
  is made) and the gradients compared with what DDP does.
- ``l23-shard-mean`` (`sharding`): a reduce-scatter built from ``send`` and
  ``recv``, in FSDP's layout.

The shared parts (what the workers watch, running in 2 and 3 processes, the
readings of a gradient off by a factor) are in `common`. The prediction runs
DDP with a given bucket cap and counts the all-reduce calls of one step, after
DDP has rebuilt its buckets. The messages name the slip the numbers show (a
sum where an average was due, a world size of 2 written in, float32 sent) and
only when the numbers show it.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from ...distributed import counting_average, make_batch, run
from .._spec import Prediction
from .buckets import BUCKETS
from .common import TIMEOUT
from .fp16 import FP16_HOOK
from .sharding import SHARD_MEAN

# What the grade's sandbox loads before an answer runs (its audit hook refuses imports
# after, in the worker processes too, which it forks): what multiprocessing imports to fork
# them, what reading their results (pickled tensors) imports, and what DDP imports when a
# communication hook is registered.
PRELOAD = ("multiprocessing.popen_fork", "torch.utils.serialization",
           "torch.utils.serialization.config", "torch.distributed.algorithms.ddp_comm_hooks")

EXERCISES = {
    "l23-fp16-hook": FP16_HOOK,
    "l23-buckets": BUCKETS,
    "l23-shard-mean": SHARD_MEAN,
}


# --------------------------------------------------------------------------
# The prediction: all-reduce calls in one step, for a given bucket cap
# --------------------------------------------------------------------------

PREDICTION_CAP = 4000  # bytes


def _prediction_model() -> nn.Sequential:
    """The model of the lesson's prediction cell."""
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(32, 32), nn.ReLU(),
        nn.Linear(32, 32), nn.ReLU(),
        nn.Linear(32, 10),
    )


def _calls_per_step(steps: int = 3) -> list[int]:
    """All-reduce calls in each of ``steps`` training steps (runs in each worker)."""
    ddp = DDP(_prediction_model(), bucket_cap_mb=PREDICTION_CAP / 2**20)
    calls: list[int] = []
    ddp.register_comm_hook(state=None, hook=counting_average(calls))
    x = make_batch(4, seed=2)[0].repeat(1, 4)  # 32 features
    per_step = []
    for _ in range(steps):
        before = len(calls)
        ddp.zero_grad()
        ddp(x).pow(2).mean().backward()
        per_step.append(len(calls) - before)
    return per_step


def _buckets_answer() -> int:
    """All-reduce calls in the third step, once DDP has rebuilt its buckets."""
    return run(_calls_per_step, 2, timeout=TIMEOUT)[0][-1]


PREDICTIONS = {
    "l23-predict-buckets": Prediction(
        question="all-reduce calls in one step (after the first) with a 4,000-byte bucket cap",
        answer=_buckets_answer,
        hint="list the parameters in the order their gradients become ready (last layer "
             "first, each bias before its weight) with their bytes (4 per float32 value), "
             "and close a bucket as soon as it holds 4,000 bytes or more; what is left at the "
             "end makes one more bucket.",
        why="the gradients arrive as the last layer's bias (40 bytes) and weight (1,280), the "
            "middle layer's bias (128) and weight (4,096): with that weight bucket 0 holds "
            "5,544 bytes, past the cap, and is sent. The first layer's bias and weight (4,224 "
            "bytes) make bucket 1. {answer} buckets, {answer} all-reduce calls per step (the "
            "very first step sends everything in one bucket, before DDP has seen the order)",
    ),
}
