"""Plausible wrong answers for the exercises of 16-backward-across-processes.ipynb."""

HOOK = "def fp16_average(state, bucket):\n{}"
OWN = "def average_with_hooks(model):\n{}"

WRONG = {
    "l16-predict-buckets": [
        # One bucket per layer.
        ("buckets_guess = 3\n", "not quite"),
        # Everything in one bucket, as in the first step.
        ("buckets_guess = 1\n", "not quite"),
    ],
    "l16-fp16-hook": [
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
    ],
    "l16-own-averaging": [
        # The sum, never divided.
        (
            OWN.format(
                "    for p in model.parameters():\n"
                "        p.register_post_accumulate_grad_hook(lambda p: dist.all_reduce(p.grad))\n"
            ),
            "the sum over the 2 processes, not the average",
        ),
        # Two processes written in.
        (
            OWN.format(
                "    def average(p):\n"
                "        dist.all_reduce(p.grad)\n"
                "        p.grad /= 2\n"
                "\n"
                "    for p in model.parameters():\n"
                "        p.register_post_accumulate_grad_hook(average)\n"
            ),
            "divided by 2 while 3 processes were running",
        ),
        # The all-reduce right away, before backward has made any gradient.
        (
            OWN.format(
                "    for p in model.parameters():\n"
                "        dist.all_reduce(p.grad)\n"
                "        p.grad /= dist.get_world_size()\n"
            ),
            "a .grad is None until backward has reached its parameter",
        ),
        # The parameters averaged instead of the gradients.
        (
            OWN.format(
                "    for p in model.parameters():\n"
                "        dist.all_reduce(p.data)\n"
                "        p.data /= dist.get_world_size()\n"
            ),
            "all ran before backward",
        ),
        # A copy all-reduced: the .grad that backward leaves is untouched.
        (
            OWN.format(
                "    def average(p):\n"
                "        total = p.grad.clone()\n"
                "        dist.all_reduce(total)\n"
                "        total /= dist.get_world_size()\n"
                "\n"
                "    for p in model.parameters():\n"
                "        p.register_post_accumulate_grad_hook(average)\n"
            ),
            "each rank kept its own gradient",
        ),
        # DDP itself.
        (OWN.format("    DDP(model)\n"), "without DDP"),
        # A name from the notebook, which the worker processes do not have.
        (
            "WORLD = 2\n\n\n"
            + OWN.format(
                "    def average(p):\n"
                "        dist.all_reduce(p.grad)\n"
                "        p.grad /= WORLD\n"
                "\n"
                "    for p in model.parameters():\n"
                "        p.register_post_accumulate_grad_hook(average)\n"
            ),
            "not the rest of this notebook",
        ),
    ],
}
