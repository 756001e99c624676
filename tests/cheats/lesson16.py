"""Shortcuts for the exercises of 16-what-backward-keeps.ipynb (tests/lessons/test_exercises.py).


The byte-count formula is checked like a gradient by hand, so its shortcuts are the
ways of measuring instead of working it out: the lesson's own `bytes_for_backward`,
grad mode switched back on to build the graph, and a table of the visible check's
inputs. Exercise 3's, checkpointing built from saved-tensor hooks: torch's own checkpoint
called instead, bare or dressed in hooks for show. Exercise 4's: a fixed choice that fits the
visible stack only.
"""

CHEATS = {
    "l16-bytes-formula": [
        # The lesson's own worked function on the network itself: no graph with autograd off.
        (
            "def bytes_formula(batch, widths, activation):\n"
            "    acts = {'relu': nn.ReLU, 'tanh': nn.Tanh, 'sigmoid': nn.Sigmoid,\n"
            "            'gelu': nn.GELU}\n"
            "    layers = []\n"
            "    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):\n"
            "        layers += ([acts[activation]()] if i else []) + [nn.Linear(a, b)]\n"
            "    net, batch_in = nn.Sequential(*layers), torch.randn(batch, widths[0])\n"
            "    return bytes_for_backward(net, batch_in)\n",
            "bl.describe",
        ),
        # ... with grad mode switched back on first.
        (
            "def bytes_formula(batch, widths, activation):\n"
            "    acts = {'relu': nn.ReLU, 'tanh': nn.Tanh, 'sigmoid': nn.Sigmoid,\n"
            "            'gelu': nn.GELU}\n"
            "    layers = []\n"
            "    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):\n"
            "        layers += ([acts[activation]()] if i else []) + [nn.Linear(a, b)]\n"
            "    with torch.enable_grad():\n"
            "        net, batch_in = nn.Sequential(*layers), torch.randn(batch, widths[0])\n"
            "        return bytes_for_backward(net, batch_in)\n",
            "bl.describe",
        ),
        # A table of the visible check's answers: right there, a KeyError on new inputs.
        (
            "from backproplab.course.exercises.lesson16 import _bytes_reference, _new_mlp_shape\n\n"
            "TABLE = {}\n"
            "for seed in range(3):\n"
            "    shape = _new_mlp_shape(torch.Generator().manual_seed(seed))\n"
            "    TABLE[shape] = _bytes_reference(*shape)\n\n\n"
            "def bytes_formula(batch, widths, activation):\n"
            "    return TABLE[batch, tuple(widths), activation]\n",
            "raised KeyError",
        ),
    ],
    "l16-checkpoint-by-hooks": [
        # torch's own non-reentrant checkpoint does the work.
        ("def checkpoint_by_hooks(block, x):\n"
         "    return checkpoint(block, x, use_reentrant=False)\n", "did the work"),
        # The reentrant one, under a pair of hooks for show.
        ("def checkpoint_by_hooks(block, x):\n"
         "    with saved_tensors_hooks(lambda t: t, lambda t: t):\n"
         "        return checkpoint(block, x, use_reentrant=True)\n", "did the work"),
    ],
    "l16-checkpoint": [
        # One of the visible stack's cheapest choices, copied (its first two cheap blocks and
        # two of its wide ones): the hidden stack has other blocks in those places.
        (
            "def choose_checkpoints(blocks, x):\n"
            "    return {0, 1, 2, 5}\n",
            "choose_checkpoints",
        ),
    ],
}
