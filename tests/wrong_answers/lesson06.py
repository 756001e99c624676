"""Plausible wrong answers for the exercises of 06-zeroing-gradients.ipynb."""

# Exercise 1: a detector with its parts to fill in. It looks at what one step leaves in the
# weights and in .grad, against the full batch's gradient worked out on a copy of the model.
WHERE = (
    "import copy\n\n\n"
    "def where_zeroed(step, model, X, y, k):\n"
    "    def full_gradient():\n"
    "        twin = copy.deepcopy(model)\n"
    "        F.mse_loss(twin(X), y).backward()\n"
    "        return [p.grad for p in twin.parameters()]\n\n"
    "    def same(a, b):\n"
    "        return all(torch.allclose(u, v) for u, v in zip(a, b))\n\n"
    "    before = [p.detach().clone() for p in model.parameters()]\n"
    "    g0 = full_gradient()\n"
    "    step()\n"
    "    moved = not same([p.detach() for p in model.parameters()], before)\n"
    "    held = [p.grad for p in model.parameters()]\n"
    "    cleared = all(g is None or not g.any() for g in held)\n"
    "{}"
)
# Both right places, and a step that never moves, told apart as the solution does.
RIGHT_START = (
    "    if not moved:\n"
    "        return 'before step'\n"
    "    if cleared:\n"
    "        return 'end'\n"
)
SECOND_STEP = (
    "    held = [g.clone() for g in held]\n"
    "    g1 = full_gradient()\n"
    "    step()\n"
    "    summed = [a + b for a, b in zip(held, g1)]\n"
    "    return 'never' if same([p.grad for p in model.parameters()], summed) else 'start'\n"
)

# Exercise 2's loop by hand, with the body of its loop to fill in.
MOMENTUM = (
    "def forgot_with_momentum(x, y, w, b, lr, beta, steps):\n"
    "    grad_w, grad_b = torch.zeros_like(w), torch.zeros_like(b)\n"
    "    velocity_w, velocity_b = torch.zeros_like(w), torch.zeros_like(b)\n"
    "{}"
    "    return w, b\n"
)
GRAD = "        r = w * x + b - y\n"
SUM = ("        grad_w = grad_w + (2 * r * x).mean()\n"
       "        grad_b = grad_b + (2 * r).mean()\n")
VELOCITY = ("        velocity_w = beta * velocity_w + grad_w\n"
            "        velocity_b = beta * velocity_b + grad_b\n")
STEP = ("        w = w - lr * velocity_w\n"
        "        b = b - lr * velocity_b\n")
LOOP = "    for _ in range({}):\n"

WRONG = {
    "l06-predict-zero-grad": [
        ('zero_grad_guess = "zeros"\n', "not quite"),
        ("zero_grad_guess = 0\n", "not one of the choices"),
    ],
    "l06-predict-forgot": [
        # Expects the summed gradients to be just a slower descent.
        ('settles_guess = "yes"\n', "not quite"),
    ],
    "l06-where": [
        # One step only: a loop that never zeroes looks like a right one after its first step.
        (WHERE.format(RIGHT_START + "    return 'start' if same(held, g0) else "
                      "'each micro-batch'\n"), "after a second step"),
        # A cleared .grad read as a gradient thrown away, whether or not the weights moved.
        (WHERE.format("    if cleared:\n        return 'before step'\n"
                      "    if not same(held, g0):\n        return 'each micro-batch'\n"
                      + SECOND_STEP), "right after opt.step()"),
        # A None .grad taken for "end" before asking whether the weights moved: the step
        # that zeroes before step() with set_to_none=True leaves None too, and never moves.
        (WHERE.format("    if all(g is None for g in held):\n        return 'end'\n"
                      + RIGHT_START + "    if not same(held, g0):\n"
                      "        return 'each micro-batch'\n" + SECOND_STEP),
         "set_to_none=True): the step zeroes between the last backward and opt.step()"),
        # No comparison with the full batch's gradient: the micro-batch kind goes unseen.
        (WHERE.format(RIGHT_START + SECOND_STEP), "only the last micro-batch's part"),
        # Labels of its own.
        (WHERE.format(RIGHT_START + "    return 'fine' if same(held, g0) else 'partial'\n"),
         "expected one of"),
        # The same answer for every step.
        ("def where_zeroed(step, model, X, y, k):\n    step()\n    return 'start'\n",
         "Your function said 'start'"),
    ],
    "l06-momentum": [
        # The loop that zeroes: the buffer adds each step's own gradient.
        (MOMENTUM.format(LOOP.format("steps") + GRAD
                         + "        velocity_w = beta * velocity_w + (2 * r * x).mean()\n"
                         "        velocity_b = beta * velocity_b + (2 * r).mean()\n" + STEP),
         "loop that zeroes"),
        # Momentum left out: lesson 06's loop that forgets, without its optimizer's buffer.
        (MOMENTUM.format(LOOP.format("steps") + GRAD + SUM
                         + "        w = w - lr * grad_w\n        b = b - lr * grad_b\n"),
         "momentum is left out"),
        # The buffer damped by (1 - beta), as some momentum formulas write it.
        (MOMENTUM.format(LOOP.format("steps") + GRAD + SUM
                         + "        velocity_w = beta * velocity_w + (1 - beta) * grad_w\n"
                         "        velocity_b = beta * velocity_b + (1 - beta) * grad_b\n" + STEP),
         "dampening"),
        (MOMENTUM.format(LOOP.format("steps - 1") + GRAD + SUM + VELOCITY + STEP),
         "one step too few"),
        (MOMENTUM.format(LOOP.format("steps + 1") + GRAD + SUM + VELOCITY + STEP),
         "one step too many"),
        # The gradient taken once, at the starting weights.
        (MOMENTUM.format("    r = w * x + b - y\n" + LOOP.format("steps") + SUM + VELOCITY + STEP),
         "starting weights"),
        # The starting weights handed back.
        ("def forgot_with_momentum(x, y, w, b, lr, beta, steps):\n    return w, b\n",
         "mismatch"),
        # The real loop, run inside the check: autograd is switched off there.
        (
            "def forgot_with_momentum(x, y, w, b, lr, beta, steps):\n"
            "    w, b = w.clone().requires_grad_(), b.clone().requires_grad_()\n"
            "    opt = torch.optim.SGD([w, b], lr=lr, momentum=beta)\n"
            "    for _ in range(steps):\n"
            "        ((w * x + b - y) ** 2).mean().backward()\n"
            "        opt.step()\n"
            "    return w.detach(), b.detach()\n",
            "Tensor.backward()",
        ),
    ],
}
