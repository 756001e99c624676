"""Plausible wrong answers for the exercises of 23-backward-across-processes.ipynb."""

HOOK = "def fp16_average(state, bucket):\n{}"
BUCKETS = """def bucketed_averaging(model, cap):
    world = {world}
    count = len(list(model.parameters()))
    bucket, ready_so_far = [], []

    def send():
        flat = torch.cat([p.grad.flatten() for p in bucket])
        dist.all_reduce(flat)
{divide}
        start = 0
        for p in bucket:
{write}
            start += p.numel()
        bucket.clear()

    def ready(p):
        bucket.append(p)
        ready_so_far.append(p)
        full = {full}
        if {send_when}:
            send()
{reset}
    for p in model.parameters():
        p.register_post_accumulate_grad_hook(ready)
"""
RIGHT = {
    "world": "dist.get_world_size()",
    "divide": "        flat /= world",
    "write": "            p.grad.copy_(flat[start:start + p.numel()].view_as(p.grad))",
    "full": "sum(q.numel() * q.element_size() for q in bucket) >= cap",
    "send_when": "full or len(ready_so_far) == count",
    "reset": "        if len(ready_so_far) == count:\n            ready_so_far.clear()\n",
}


def _buckets(**slip):
    return BUCKETS.format(**(RIGHT | slip))


# The buckets planned in the order model.parameters() lists them, each sent once all of it
# is ready.
FORWARD_PLAN = """def bucketed_averaging(model, cap):
    world = dist.get_world_size()
    plan, current, size = [], [], 0
    for p in model.parameters():
        current.append(p)
        size += p.numel() * 4
        if size >= cap:
            plan.append(current)
            current, size = [], 0
    if current:
        plan.append(current)
    ready_so_far = set()

    def ready(p):
        ready_so_far.add(id(p))
        for bucket in plan:
            ids = [id(q) for q in bucket]
            if id(p) in ids and all(i in ready_so_far for i in ids):
                flat = torch.cat([q.grad.flatten() for q in bucket])
                dist.all_reduce(flat)
                flat /= world
                start = 0
                for q in bucket:
                    q.grad.copy_(flat[start:start + q.numel()].view_as(q.grad))
                    start += q.numel()
        if len(ready_so_far) == sum(len(b) for b in plan):
            ready_so_far.clear()

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(ready)
"""
# The right buckets, all sent from the last gradient's hook.
AT_THE_END = """def bucketed_averaging(model, cap):
    world = dist.get_world_size()
    params = list(model.parameters())
    order = []

    def ready(p):
        order.append(p)
        if len(order) < len(params):
            return
        bucket = []
        for k, q in enumerate(order):
            bucket.append(q)
            if sum(r.numel() * 4 for r in bucket) >= cap or k == len(order) - 1:
                flat = torch.cat([r.grad.flatten() for r in bucket])
                dist.all_reduce(flat)
                flat /= world
                start = 0
                for r in bucket:
                    r.grad.copy_(flat[start:start + r.numel()].view_as(r.grad))
                    start += r.numel()
                bucket = []
        order.clear()

    for p in params:
        p.register_post_accumulate_grad_hook(ready)
"""
# A bucket closed before the gradient that would pass the cap.
BEFORE_PASSING = """def bucketed_averaging(model, cap):
    world = dist.get_world_size()
    count = len(list(model.parameters()))
    bucket, ready_so_far = [], []

    def send():
        flat = torch.cat([p.grad.flatten() for p in bucket])
        dist.all_reduce(flat)
        flat /= world
        start = 0
        for p in bucket:
            p.grad.copy_(flat[start:start + p.numel()].view_as(p.grad))
            start += p.numel()
        bucket.clear()

    def ready(p):
        if bucket and sum(q.numel() * 4 for q in bucket) + p.numel() * 4 > cap:
            send()
        bucket.append(p)
        ready_so_far.append(p)
        if len(ready_so_far) == count:
            send()
            ready_so_far.clear()

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(ready)
"""


# Blocking point-to-point loops for shard_mean, each over every other rank.
SENDS = ("    for other in range(world):\n"
         "        if other != rank:\n"
         "            dist.send(grad[other * size:(other + 1) * size].contiguous(), other)\n")
RECEIVES = ("    for other in range(world):\n"
            "        if other != rank:\n"
            "            part = torch.empty_like(total)\n"
            "            dist.recv(part, other)\n"
            "            total += part\n")


def _blocking(first: str, then: str) -> str:
    """shard_mean with blocking sends and receives, ``first`` on every rank before ``then``."""
    return ("def shard_mean(grad):\n"
            "    rank, world = dist.get_rank(), dist.get_world_size()\n"
            "    size = math.ceil(grad.shape[0] / world)\n"
            "    total = grad[rank * size:(rank + 1) * size].clone()\n"
            + first + then + "    return total / world\n")


WRONG = {
    "l23-predict-buckets": [
        # One bucket per layer.
        ("buckets_guess = 3\n", "not quite"),
        # Everything in one bucket, as in the first step.
        ("buckets_guess = 1\n", "not quite"),
    ],
    "l23-fp16-hook": [
        # The all-reduce of the section 3 hook: right averages, but float32 on the wire.
        (
            HOOK.format(
                "    world = dist.get_world_size()\n"
                "    sent = dist.all_reduce(bucket.buffer(), async_op=True).get_future()\n"
                "    return sent.then(lambda done: done.value()[0] / world)\n"
            ),
            "sent float32",
        ),
        # The sum, never divided.
        (
            HOOK.format(
                "    half = bucket.buffer().to(torch.float16)\n"
                "    sent = dist.all_reduce(half, async_op=True).get_future()\n"
                "    return sent.then(lambda done: done.value()[0].to(torch.float32))\n"
            ),
            "the sum over the 2 processes, not the average",
        ),
        # Two processes written in: right with 2, wrong with 3.
        (
            HOOK.format(
                "    half = bucket.buffer().to(torch.float16)\n"
                "    sent = dist.all_reduce(half, async_op=True).get_future()\n"
                "    return sent.then(lambda done: done.value()[0].to(torch.float32) / 2)\n"
            ),
            "divided by 2 while 3 processes were running",
        ),
        # One all-reduce per parameter instead of one per bucket.
        (
            HOOK.format(
                "    world = dist.get_world_size()\n"
                "    for grad in bucket.gradients():\n"
                "        half = grad.to(torch.float16)\n"
                "        dist.all_reduce(half)\n"
                "        grad.copy_(half / world)\n"
                "    done = torch.futures.Future()\n"
                "    done.set_result(bucket.buffer())\n"
                "    return done\n"
            ),
            "in one call",
        ),
        # All-reduced in place, but no Future handed back (DDP would crash on None).
        (
            HOOK.format(
                "    half = bucket.buffer().to(torch.float16)\n"
                "    dist.all_reduce(half)\n"
                "    bucket.buffer().copy_(half / dist.get_world_size())\n"
            ),
            "not a torch.futures.Future",
        ),
        # A copy all-reduced, and the untouched buffer returned.
        (
            HOOK.format(
                "    half = bucket.buffer().to(torch.float16)\n"
                "    dist.all_reduce(half)\n"
                "    done = torch.futures.Future()\n"
                "    done.set_result(bucket.buffer())\n"
                "    return done\n"
            ),
            "each rank kept its own gradient",
        ),
        # Sum first, divide after: right for small gradients, but the float16 sum of
        # gradients near 40,000 passes 65,504 and is inf before the division.
        (
            HOOK.format(
                "    half = bucket.buffer().to(torch.float16)\n"
                "    sent = dist.all_reduce(half, async_op=True).get_future()\n"
                "    world = dist.get_world_size()\n"
                "    return sent.then(lambda done: done.value()[0].to(torch.float32) / world)\n"
            ),
            "the float16 sum over the processes passed 65,504",
        ),
        # Converted to float16 first and divided after, before the all-reduce: right while
        # every rank's gradients fit float16, inf where one rank's pass 65,504 although the
        # average does not.
        (
            HOOK.format(
                "    world = dist.get_world_size()\n"
                "    half = bucket.buffer().to(torch.float16) / world\n"
                "    sent = dist.all_reduce(half, async_op=True).get_future()\n"
                "    return sent.then(lambda done: done.value()[0].to(torch.float32))\n"
            ),
            "as converting to float16 before dividing gives",
        ),
        # The average handed back in float16, where the task asks for float32.
        (
            HOOK.format(
                "    half = (bucket.buffer() / dist.get_world_size()).to(torch.float16)\n"
                "    sent = dist.all_reduce(half, async_op=True).get_future()\n"
                "    return sent.then(lambda done: done.value()[0])\n"
            ),
            "expected float32, got float16",
        ),
        # torch's own hook doing the work.
        (
            HOOK.format(
                "    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks\n"
                "    return default_hooks.fp16_compress_hook(None, bucket)\n"
            ),
            "ready-made fp16_compress_hook",
        ),
        # Sum first in float16 and, where that overflowed, the bucket all-reduced again in
        # float32: right averages, but two calls for a bucket, one of them float32.
        (
            HOOK.format(
                "    world = dist.get_world_size()\n"
                "    half = bucket.buffer().to(torch.float16)\n"
                "    dist.all_reduce(half)\n"
                "    if torch.isfinite(half).all():\n"
                "        result = half.to(torch.float32) / world\n"
                "    else:\n"
                "        full = bucket.buffer().clone()\n"
                "        dist.all_reduce(full)\n"
                "        result = full / world\n"
                "    done = torch.futures.Future()\n"
                "    done.set_result(result)\n"
                "    return done\n"
            ),
            "sending float16 and float32, for the 1 bucket",
        ),
        # Divided first, but scaled by 1024 as a loss scale would be: the float16 conversion
        # itself overflows, before any sum.
        (
            HOOK.format(
                "    world = dist.get_world_size()\n"
                "    half = (bucket.buffer() * 1024 / world).to(torch.float16)\n"
                "    sent = dist.all_reduce(half, async_op=True).get_future()\n"
                "    return sent.then(lambda done: done.value()[0].to(torch.float32) / 1024)\n"
            ),
            "held inf already, before any sum",
        ),
        # dist.all_gather and a local sum: the right average, but no all-reduce.
        (
            HOOK.format(
                "    world = dist.get_world_size()\n"
                "    half = (bucket.buffer() / world).to(torch.float16)\n"
                "    parts = [torch.empty_like(half) for _ in range(world)]\n"
                "    dist.all_gather(parts, half)\n"
                "    done = torch.futures.Future()\n"
                "    done.set_result(torch.stack(parts).sum(0).to(torch.float32))\n"
                "    return done\n"
            ),
            "made no dist.all_reduce call; the exercise asks for one per bucket",
        ),
        # dist.reduce: only rank 0 gets the sum.
        (
            HOOK.format(
                "    half = (bucket.buffer() / dist.get_world_size()).to(torch.float16)\n"
                "    dist.reduce(half, dst=0)\n"
                "    done = torch.futures.Future()\n"
                "    done.set_result(half.to(torch.float32))\n"
                "    return done\n"
            ),
            "made no dist.all_reduce call; the exercise asks for one per bucket",
        ),
    ],
    "l23-buckets": [
        (_buckets(full="sum(q.numel() for q in bucket) >= cap"), "counted in values"),
        # a bucket that holds exactly the cap left open: > where the rule says "or more"
        (_buckets(full="sum(q.numel() * q.element_size() for q in bucket) > cap"),
         "only once it held more than the cap"),
        (_buckets(send_when="full"), "the last bucket was never sent"),
        (_buckets(reset=""), "start every backward with an empty bucket"),
        (_buckets(divide=""), "the sum over the 2 processes, not the average"),
        (_buckets(world="2"), "divided by 2 while 3 processes were running"),
        # Only the ranks other than 0 divide: rank 0 keeps the sum.
        (_buckets(divide="        if dist.get_rank() != 0:\n            flat /= world"),
         "rank 0's gradients are the sum over the 2 processes"),
        # Started with async_op=True and never waited for: the sum is read while it travels.
        (_buckets().replace("dist.all_reduce(flat)", "dist.all_reduce(flat, async_op=True)"),
         "made with async_op=True were never waited for"),
        (_buckets(full="False"), "everything went in one all-reduce"),
        (_buckets(full="True"), "one all-reduce per parameter"),
        # The average computed into a copy: the .grad backward left is unchanged.
        (_buckets(write="            p.grad.clone().copy_(flat[start:start + p.numel()]"
                        ".view_as(p.grad))"), "each rank kept its own gradient"),
        (BEFORE_PASSING, "closed before the gradient that would pass the cap"),
        (FORWARD_PLAN, "the buckets follow model.parameters()"),
        # The first parameter parameters() lists taken for the last gradient of a step.
        (_buckets(send_when="full or p is next(model.parameters())"),
         "went out with the gradient of the first parameter model.parameters() lists"),
        (AT_THE_END, "later than the hook of its last gradient"),
        # DDP itself.
        ("def bucketed_averaging(model, cap):\n"
         "    DDP(model, bucket_cap_mb=cap / 2**20)\n", "without DDP"),
        # A name from the notebook, which the worker processes do not have.
        ("CAP_VALUES = 75\n\n\n" + _buckets(full="sum(q.numel() for q in bucket) >= CAP_VALUES"),
         "not the rest of this notebook"),
    ],
}

SHARD = '''def shard_mean(grad):
    rank, world = dist.get_rank(), dist.get_world_size()
    size = math.ceil(grad.shape[0] / world)

    def rows_of(r):
        return grad[r * size:(r + 1) * size]

    mine = rows_of(rank)
    received, requests = [], []
    for other in range(world):
        if other != rank:
            requests.append(dist.isend(rows_of(other).contiguous(), other))
            received.append(torch.empty_like(mine))
            requests.append(dist.irecv(received[-1], other))
    for request in requests:
        request.wait()
    total = mine.clone()
    for part in received:
        total += part
    return total / world
'''


def _shard(*edits: tuple[str, str]) -> str:
    source = SHARD
    for old, new in edits:
        assert old in source, old
        source = source.replace(old, new)
    return source


WRONG["l23-shard-mean"] = [
    # The sum, never divided.
    (_shard(("return total / world", "return total")),
     "the sum over the 2 ranks, not the mean"),
    # Two processes written in.
    (_shard(("return total / world", "return total / 2")),
     "divided by 2 while 3 processes were running"),
    # Every rank rows // world rows: the last row is nobody's (uneven last shard).
    (_shard(("math.ceil(grad.shape[0] / world)", "grad.shape[0] // world")),
     "uneven last shard: 7 rows of layer1.weight over 2 ranks; the ranks kept rows // world"),
    # The rows spread as evenly as possible, which is not FSDP's layout.
    (_shard(("        return grad[r * size:(r + 1) * size]",
             "        return grad.tensor_split(world)[r]")),
     "spread evenly (torch.tensor_split): 3, 2, 2"),
    # The wrong shard kept: every rank keeps (and is sent) the next rank's rows.
    (_shard(("mine = rows_of(rank)", "mine = rows_of((rank + 1) % world)"),
            ("dist.isend(rows_of(other).contiguous(), other)",
             "dist.isend(rows_of((other + 1) % world).contiguous(), other)")),
     "rank 0 kept the mean of rank 1's rows"),
    # Its own rows, nothing sent or received.
    ("def shard_mean(grad):\n"
     "    size = math.ceil(grad.shape[0] / dist.get_world_size())\n"
     "    rank = dist.get_rank()\n"
     "    return grad[rank * size:(rank + 1) * size]\n",
     "kept its own gradient's rows"),
    # The whole gradient averaged on every rank, no slice kept.
    (_shard(("    total = mine.clone()\n", "    total = grad.clone()\n"),
            ("received.append(torch.empty_like(mine))", "received.append(torch.empty_like(grad))"),
            ("dist.isend(rows_of(other).contiguous(), other)", "dist.isend(grad, other)")),
     "returned the whole gradient of layer1.weight"),
    # Blocking sends first on every rank: each waits for a receive no rank has started.
    (_blocking(SENDS, RECEIVES), "A blocking dist.send waits until the other rank receives"),
    # Blocking receives first on every rank: each waits for a send no rank has started.
    (_blocking(RECEIVES, SENDS), "A blocking dist.recv waits until the other rank sends"),
    # Receive buffers made with torch.empty(shape): float32, for float64 rows.
    (_shard(("received.append(torch.empty_like(mine))",
             "received.append(torch.empty(mine.shape))")),
     "Check that every send has a matching receive on the other rank"),
    # Each rank sends every other rank its own rows, sized for itself, not for the receiver.
    (_shard(("dist.isend(rows_of(other).contiguous(), other)",
             "dist.isend(rows_of(rank).contiguous(), other)")),
     "Check that every send has a matching receive on the other rank"),
    # The mean computed but not returned.
    (_shard(("    return total / world", "    total /= world")), "returned NoneType"),
]
