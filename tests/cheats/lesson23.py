"""Shortcuts for the exercises of 23-backward-across-processes.ipynb; each must fail.

Same format as tests/wrong_answers (see tests/lessons/test_exercises.py). The
reduce-scatter exercise hands over send and recv only: each shortcut below gets the
right numbers another way (torch's reduce-scatter itself, the whole gradient brought to
every rank by all_reduce, all_gather, a process group's own method, a functional
collective, or messages carrying the whole gradient), and the check names what it did.
The float16 hook's shortcut (torch's ready-made hook) is in tests/wrong_answers. The
buckets' shortcuts get the average without an all-reduce of their own: the gradients
brought to every rank with all_gather, or DDP left to do it.
"""

_SLICE = ("    size = math.ceil(grad.shape[0] / world)\n"
          "    return (total / world)[rank * size:(rank + 1) * size]\n")

CHEATS = {
    "l23-shard-mean": [
        # torch's own reduce-scatter, on a gradient padded to world * size rows.
        ("def shard_mean(grad):\n"
         "    rank, world = dist.get_rank(), dist.get_world_size()\n"
         "    size = math.ceil(grad.shape[0] / world)\n"
         "    padded = torch.zeros(size * world, *grad.shape[1:], dtype=grad.dtype)\n"
         "    padded[:grad.shape[0]] = grad\n"
         "    mine = torch.empty(size, *grad.shape[1:], dtype=grad.dtype)\n"
         "    dist.reduce_scatter_single(mine, padded)\n"
         "    kept = len(range(grad.shape[0])[rank * size:(rank + 1) * size])\n"
         "    return mine[:kept] / world\n",
         "it calls reduce_scatter itself"),
        # The whole gradient all-reduced, then sliced.
        ("def shard_mean(grad):\n"
         "    rank, world = dist.get_rank(), dist.get_world_size()\n"
         "    total = grad.clone()\n"
         "    dist.all_reduce(total)\n" + _SLICE,
         "it uses dist.all_reduce"),
        # The same through the process group's own method, not dist.all_reduce.
        ("def shard_mean(grad):\n"
         "    rank, world = dist.get_rank(), dist.get_world_size()\n"
         "    total = grad.clone()\n"
         "    dist.group.WORLD.allreduce([total]).wait()\n" + _SLICE,
         "it uses dist.all_reduce"),
        # A functional collective.
        ("def shard_mean(grad):\n"
         "    rank, world = dist.get_rank(), dist.get_world_size()\n"
         "    funcol = torch.distributed._functional_collectives\n"
         "    total = funcol.all_reduce(grad, 'sum', dist.group.WORLD)\n" + _SLICE,
         "_functional_collectives"),
        # Every rank's whole gradient gathered everywhere, then summed and sliced.
        ("def shard_mean(grad):\n"
         "    rank, world = dist.get_rank(), dist.get_world_size()\n"
         "    parts = [torch.empty_like(grad) for _ in range(world)]\n"
         "    dist.all_gather(parts, grad)\n"
         "    total = sum(parts)\n" + _SLICE,
         "it uses dist.all_gather"),
        # send and recv only, but each message carries the whole gradient.
        ("def shard_mean(grad):\n"
         "    rank, world = dist.get_rank(), dist.get_world_size()\n"
         "    total, parts, requests = grad.clone(), [], []\n"
         "    for other in range(world):\n"
         "        if other != rank:\n"
         "            requests.append(dist.isend(grad, other))\n"
         "            parts.append(torch.empty_like(grad))\n"
         "            requests.append(dist.irecv(parts[-1], other))\n"
         "    for request in requests:\n"
         "        request.wait()\n"
         "    for part in parts:\n"
         "        total += part\n" + _SLICE,
         "a reduce-scatter sends each other rank only that rank's shard"),
    ],
    "l23-buckets": [
        # Every rank's gradients gathered and averaged, one parameter at a time.
        (
            "def bucketed_averaging(model, cap):\n"
            "    def ready(p):\n"
            "        every = [torch.zeros_like(p.grad) for _ in range(dist.get_world_size())]\n"
            "        dist.all_gather(every, p.grad)\n"
            "        p.grad.copy_(torch.stack(every).mean(0))\n"
            "\n"
            "    for p in model.parameters():\n"
            "        p.register_post_accumulate_grad_hook(ready)\n",
            "made no dist.all_reduce call",
        ),
        # DDP built on the model with the given cap.
        (
            "def bucketed_averaging(model, cap):\n"
            "    return DDP(model, bucket_cap_mb=cap / 2**20)\n",
            "without DDP",
        ),
    ],
}
