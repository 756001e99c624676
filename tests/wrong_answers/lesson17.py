"""Plausible wrong answers for the exercises of 17-lower-precision.ipynb."""

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
    "def scaled_step(model, loss_fn, batch, optimizer, state):\n"
    "{zero_first}"
    "    (loss_fn(model, batch) * state['scale']).backward()\n"
    "{zero_mid}"
    "    params = [p for p in model.parameters() if p.grad is not None]\n"
    "{clip_early}"
    "    for p in params:\n"
    "        p.grad /= state['scale']\n"
    "{again}"
    "    ok = all(bool(torch.isfinite(p.grad).all()) for p in params)\n"
    "    if ok{or_always}:\n"
    "{clip_late}"
    "        optimizer.step()\n"
    "{zero_late}"
    "    if ok:\n"
    "        state['clean_steps'] += 1\n"
    "        if {grow_when}:\n"
    "            state['scale'] *= state['growth_factor']\n"
    "            state['clean_steps'] = 0\n"
    "    else:\n"
    "{backoff}"
    "{reset}"
    "    return ok\n"
)
PARTS = {
    "zero_first": "    optimizer.zero_grad()\n",
    "zero_mid": "",
    "clip_early": "",
    "again": "",
    "or_always": "",
    "clip_late": "        nn.utils.clip_grad_norm_(params, state['max_norm'])\n",
    "zero_late": "",
    "grow_when": "state['clean_steps'] == state['growth_interval']",
    "backoff": "        state['scale'] *= state['backoff_factor']\n",
    "reset": "        state['clean_steps'] = 0\n",
}


def _step(**changes):
    return STEP.format(**{**PARTS, **changes})


WRONG = {
    "l17-predict-zero-rows": [
        ("zero_rows_guess = 0\n", "not quite"),  # 8 x 2e-8 fits, so nothing vanishes
        ("zero_rows_guess = 3\n", "not quite"),  # everything below the smallest normal
        ("zero_rows_guess = 5\n", "not one of the choices"),
    ],
    "l17-scale-range": [
        (_range(dy="    dy = 2 * residual / residual.shape[0]\n"), "N·M of them"),
        (_range(dy="    dy = residual / residual.numel()\n"), "factor 2"),
        (_range(floor="f16.tiny * f16.eps"), "smallest subnormal"),
        (_range(pick="max"), "largest entry of dL/dy"),
        (_range(big=("dy", "dy")), "highest scale was taken from dL/dy"),
        (_range(big=("dW", "dW")), "bias gradient was left out"),
        # dL/db taken as dL/dy itself, without the sum over the batch.
        (_range(big=("dW", "dy")), "column sums of dL/dy"),
        (_range(up="", down=""), "not powers of two"),
        (_range(up="torch.floor", down="torch.ceil"), "rounded the wrong way"),
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
    "l17-scaled-step": [
        (_step(clip_early="    nn.utils.clip_grad_norm_(params, state['max_norm'])\n",
               clip_late=""), "clipped the scaled gradients"),
        (_step(again="    for p in params:\n        p.grad /= state['scale']\n"),
         "divided by the scale twice"),
        (_step(or_always=" or True"), "parameters are now NaN"),
        (_step(grow_when="True"), "grew after every clean step"),
        (_step(reset=""), "starts the count again"),
        (_step(backoff=""), "scale stayed the same"),
        (_step(zero_mid="    optimizer.zero_grad()\n"), "zeroed after backward"),
        (_step(zero_first="", zero_late="        optimizer.zero_grad()\n"),
         "zeroed only after a step that was taken"),
        (_step(zero_first=""), "never zeroed"),
        # Two backward passes: one to look for overflow unscaled, one scaled.
        (
            "def scaled_step(model, loss_fn, batch, optimizer, state):\n"
            "    optimizer.zero_grad()\n"
            "    loss_fn(model, batch).backward()\n"
            "    optimizer.zero_grad()\n"
            "    (loss_fn(model, batch) * state['scale']).backward()\n"
            "    return True\n",
            "One backward per step",
        ),
        # Nothing returned.
        (_step().replace("    return ok\n", ""), "return True when the step was taken"),
        # The worked loop of section 5 as a function: its own factor 2 and interval 4, no clip.
        (
            "def scaled_step(model, loss_fn, batch, optimizer, state):\n"
            "    optimizer.zero_grad()\n"
            "    (loss_fn(model, batch) * state['scale']).backward()\n"
            "    for p in model.parameters():\n"
            "        p.grad /= state['scale']\n"
            "    if all(torch.isfinite(p.grad).all() for p in model.parameters()):\n"
            "        optimizer.step()\n"
            "        state['clean_steps'] += 1\n"
            "        if state['clean_steps'] == 4:\n"
            "            state['scale'], state['clean_steps'] = state['scale'] * 2, 0\n"
            "        return True\n"
            "    state['scale'], state['clean_steps'] = state['scale'] / 2, 0\n"
            "    return False\n",
            "at step",
        ),
    ],
}
