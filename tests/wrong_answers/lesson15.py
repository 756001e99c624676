"""Plausible wrong answers for the exercises of 15-what-backward-keeps.ipynb."""

COUNTER = (
    "def make_dtype_counter():\n"
    "    totals = {{}}\n\n"
    "    def pack(t):\n"
    "{}\n\n"
    "    def unpack(t):\n"
    "        return t\n\n"
    "    return pack, unpack, totals\n"
)

WRONG = {
    "l15-predict-sigmoid": [
        ('saves_more = "sigmoid"\n', "keeps only its output"),
    ],
    "l15-dtype-counter": [
        # Elements counted instead of bytes.
        (COUNTER.format("        totals[t.dtype] = totals.get(t.dtype, 0) + t.numel()\n        return t"),
         "bytes saved as"),
        # pack forgets to hand the tensor on: backward has nothing to unpack.
        (COUNTER.format("        totals[t.dtype] = totals.get(t.dtype, 0) + t.numel() * t.element_size()"),
         "backward failed with your hooks"),
        # Everything lumped under one key.
        (COUNTER.format("        totals[torch.float32] = totals.get(torch.float32, 0) + t.numel() * t.element_size()\n        return t"),
         "dtypes counted"),
    ],
    "l15-checkpoint": [
        # No checkpoint at all.
        ("def run_within_budget(blocks, x):\n    h = x\n    for block in blocks:\n        h = block(h)\n    return h\n",
         "over the budget"),
        # Every other block: not enough.
        (
            "def run_within_budget(blocks, x):\n"
            "    h = x\n"
            "    for i, block in enumerate(blocks):\n"
            "        h = checkpoint(block, h, use_reentrant=False) if i % 2 else block(h)\n"
            "    return h\n",
            "over the budget",
        ),
        # The reentrant variant: the first block's input needs no gradient, so none flows back.
        (
            "def run_within_budget(blocks, x):\n"
            "    h = x\n"
            "    for block in blocks:\n"
            "        h = checkpoint(block, h, use_reentrant=True)\n"
            "    return h\n",
            "no parameter got a gradient",
        ),
    ],
}
