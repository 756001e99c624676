"""Plausible wrong answers for the exercises of 24-lower-precision.ipynb."""

RANGE = (
    "def scale_range(x, W, b, t):\n"
    "    residual = x @ W.T + b - t\n"
    "{}"
    "    dW, db = dy.T @ x, dy.sum(dim=0)\n"
    "    f16 = torch.finfo(torch.float16)\n"
    "    smallest = dy.abs()[dy != 0].{}()\n"
    "    largest = torch.maximum({}.abs().max(), {}.abs().max())\n"
    "    lowest = 2.0 ** {}(torch.log2({} / smallest))\n"
    "    highest = 2.0 ** {}(torch.log2(f16.max / largest))\n"
    "    return lowest, highest\n"
)
RIGHT_DY = "    dy = 2 * residual / residual.numel()\n"


def _range(dy=RIGHT_DY, pick="min", big=("dW", "db"), up="torch.ceil", floor="f16.tiny",
           down="torch.floor"):
    return RANGE.format(dy, pick, big[0], big[1], up, floor, down)


STEP = (
    "def compensated_step(w, comp, update):\n"
    "    target = w.float() + ({carried}update)\n"
    "    new_w = target.to(w.dtype)\n"
    "    return new_w, {comp}\n"
)
KEPT = "(target - new_w.float()).to(w.dtype)"


def _step(carried="comp.float() + ", comp=KEPT):
    return STEP.format(carried=carried, comp=comp)


WRONG = {
    "l24-predict-zero-rows": [
        ("zero_rows_guess = 0\n", "not quite"),  # 8 x 2e-8 fits, so nothing vanishes
        ("zero_rows_guess = 3\n", "not quite"),  # everything below the smallest normal
        ("zero_rows_guess = 5\n", "not one of the choices"),
    ],
    "l24-scale-range": [
        (_range(dy="    dy = 2 * residual / residual.shape[0]\n"), "N·M of them"),
        (_range(dy="    dy = residual / residual.numel()\n"), "factor 2"),
        (_range(floor="f16.tiny * f16.eps"), "smallest subnormal"),
        (_range(pick="max"), "largest entry of dL/dy"),
        (_range(big=("dy", "dy")), "highest scale was taken from dL/dy"),
        (_range(big=("dW", "dW")), "bias gradient was left out"),
        # dL/db taken as dL/dy itself, without the sum over the batch.
        (_range(big=("dW", "dy")), "column sums of dL/dy"),
        (_range(up="", down=""), "not powers of two"),
        # The zeros of dL/dy kept: the smallest |dL/dy| is 0 and the lowest scale inf.
        (_range().replace("dy.abs()[dy != 0].min()", "dy.abs().min()"), "zero entries"),
        # The largest gradient by sign, not by size: the largest |dL/db| is negative.
        (_range().replace("torch.maximum(dW.abs().max(), db.abs().max())",
                          "torch.maximum(dW.max(), db.max())"), "without abs"),
        (_range(up="torch.floor", down="torch.ceil"), "rounded the wrong way"),
        # The next power of two as floor + 1 (2 ** frexp's exponent): twice too big where the
        # ratio is itself a power of two, which every check meets.
        (_range().replace("2.0 ** torch.ceil(", "2.0 ** (1 + torch.floor(").replace(
            "/ smallest))", "/ smallest)))"), "floor(log2 ...) + 1"),
        # The power below as ceil - 1: half too small where the ratio is itself a power of
        # two, which every check meets (the largest |dL/db| is set so on odd seeds).
        (_range().replace("2.0 ** torch.floor(torch.log2(f16.max / largest))",
                          "2.0 ** (torch.ceil(torch.log2(f16.max / largest)) - 1)"),
         "ceil(log2 ...) - 1"),
        # round for ceil: too small where the ratio's log2 has a fraction under one half.
        (_range(up="torch.round"), "lowest scale"),
        # A pair of scales that worked once, written in.
        ("def scale_range(x, W, b, t):\n    return 2.0**10, 2.0**20\n", "hard-coded"),
        # autograd instead of the chain rule.
        (
            "def scale_range(x, W, b, t):\n"
            "    W = W.clone().requires_grad_()\n"
            "    b = b.clone().requires_grad_()\n"
            "    y = x @ W.T + b\n"
            "    dy, dW, db = torch.autograd.grad(F.mse_loss(y, t), (y, W, b))\n"
            "    return dy.abs().min(), dW.abs().max()\n",
            "by hand",
        ),
    ],
    "l24-compensated-step": [
        # Section 4's plain 16-bit step: comp handed back untouched.
        (_step(carried="", comp="comp"), "comp came back as it went in"),
        (_step(carried="", comp="torch.zeros_like(comp)"), "comp came back as zeros"),
        # What rounding dropped is kept, but never added to the next step's sum.
        (_step(carried=""), "never adds it back"),
        (_step(comp="(new_w.float() - target).to(w.dtype)"), "wrong sign"),
        # The old comp kept as well as this step's error, which already holds it.
        (_step(comp="(comp.float() + target - new_w.float()).to(w.dtype)"), "counts twice"),
        # comp kept in float32: the master copy back under another name.
        (_step(comp="target - new_w.float()"), "16 bits a number"),
        # Only the weight returned.
        (
            "def compensated_step(w, comp, update):\n"
            "    return (w.float() + comp.float() + update).to(w.dtype)\n",
            "return two tensors",
        ),
    ],
}
