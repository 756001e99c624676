"""Shortcuts for the exercises of 24-lower-precision.ipynb (tests/lessons/test_exercises.py).

The scale range is checked like a gradient by hand, so its shortcuts are the ways of
getting the gradients without the chain rule: autograd switched back on, finite
differences through bl.numerical_grad, and a table of the visible check's inputs. The
compensated step is a method: its shortcut is a float32 copy of the weights kept outside
what the step returns, looked up by the 16-bit weights it is given.
"""

from cheats.estimates import lesson_plans, with_disguised

CHEATS = {
    "l24-scale-range": [
        # autograd with grad mode switched back on.
        (
            "def scale_range(x, W, b, t):\n"
            "    with torch.enable_grad():\n"
            "        W = W.clone().requires_grad_()\n"
            "        b = b.clone().requires_grad_()\n"
            "        y = x @ W.T + b\n"
            "        dy, dW, db = torch.autograd.grad(F.mse_loss(y, t), (y, W, b))\n"
            "    low = dy.abs().min()\n"
            "    high = torch.maximum(dW.abs().max(), db.abs().max())\n"
            "    f16 = torch.finfo(torch.float16)\n"
            "    return (2.0 ** torch.ceil(torch.log2(f16.tiny / low)),\n"
            "            2.0 ** torch.floor(torch.log2(f16.max / high)))\n",
            "enable_grad",
        ),
        # Finite differences for the weight gradient.
        (
            "def scale_range(x, W, b, t):\n"
            "    dy = 2 * (x @ W.T + b - t) / t.numel()\n"
            "    dW = bl.numerical_grad(lambda w: F.mse_loss(x @ w.T + b, t), W)\n"
            "    high = torch.maximum(dW.abs().max(), dy.sum(0).abs().max())\n"
            "    f16 = torch.finfo(torch.float16)\n"
            "    return (2.0 ** torch.ceil(torch.log2(f16.tiny / dy.abs().min())),\n"
            "            2.0 ** torch.floor(torch.log2(f16.max / high)))\n",
            "numerical",
        ),
        # A table of the visible check's answers: right there, a KeyError on new inputs.
        (
            "import importlib\n"
            "_l17 = importlib.import_module('backproplab.course.exercises.lesson24')\n"
            "TABLE = {}\n"
            "for seed in range(3):\n"
            "    gen = torch.Generator().manual_seed(seed)\n"
            "    args = [a.double() for a in _l17._new_layer(gen)]\n"
            "    answer = _l17._scale_range_reference(*args)\n"
            "    TABLE[tuple(args[0].flatten().tolist())] = answer\n\n\n"
            "def scale_range(x, W, b, t):\n"
            "    return TABLE[tuple(x.flatten().tolist())]\n",
            "raised KeyError",
        ),
    ],
    "l24-compensated-step": [
        # float32 master weights kept aside, found again by the 16-bit values.
        (
            "MASTER = {}\n\n\n"
            "def compensated_step(w, comp, update):\n"
            "    key = (w.dtype, tuple(w.tolist()))\n"
            "    exact = MASTER.get(key, w.float()) + update\n"
            "    new_w = exact.to(w.dtype)\n"
            "    MASTER[(w.dtype, tuple(new_w.tolist()))] = exact\n"
            "    return new_w, comp\n",
            "exact sum of its updates",
        ),
    ],
}

# Finite differences in disguise (tests/cheats/estimates.py): one family per exercise.
CHEATS = with_disguised(CHEATS, lesson_plans("24"))
