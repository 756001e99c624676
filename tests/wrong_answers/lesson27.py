"""Plausible wrong answers for the exercises of 27-custom-ops.ipynb.

Exercise 1's answer is three functions in one cell; each wrong answer breaks one of them
and keeps the other two right, as a learner's slip would. Exercise 2's are the slips of a
forward-mode derivation, Exercise 1's backward formula among them.
"""

FAKE = "def rms_norm_fake(x, w, eps):\n    return torch.empty_like(x)\n"
SETUP = (
    "def rms_norm_setup_context(ctx, inputs, output):\n"
    "    x, w, eps = inputs\n"
    "    ctx.save_for_backward(x, w)\n"
    "    ctx.eps = eps\n"
)
BACKWARD = (
    "def rms_norm_backward(ctx, grad):\n"
    "    x, w = ctx.saved_tensors\n"
    "    r = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + ctx.eps)\n"
    "{}"
)
RIGHT_DX = "    dx = r * grad * w - x * r**3 * (grad * w * x).mean(dim=-1, keepdim=True)\n"
RIGHT_DW = "    dw = (grad * x * r).sum(dim=0)\n"


def cell(fake=FAKE, setup=SETUP, backward=None):
    """The solution cell with one piece swapped."""
    backward = backward or BACKWARD.format(RIGHT_DX + RIGHT_DW + "    return dx, dw, None\n")
    return f"{fake}\n\n{setup}\n\n{backward}"


JVP = (
    "def rms_norm_jvp(x, w, eps, x_t, w_t):\n"
    "    r = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)\n"
    "{}"
)
RIGHT_RT = "    r_t = -r**3 * (x * x_t).mean(dim=-1, keepdim=True)\n"
RIGHT_Y = "    return (x_t * r + x * r_t) * w + x * r * w_t\n"


def with_body(body):
    return cell(backward=BACKWARD.format(body))


# Exercise 3's solution, with parts to change.
VMAP = (
    "def rms_norm_vmap(info, in_dims, x, w, eps):\n"
    "    x_dim, w_dim, _ = in_dims\n"
    "    if x_dim is not None:\n"
    "        x = {x}\n"
    "    if w_dim is not None:\n"
    "        w = {w}\n"
    "    return rms_norm_forward(x, w, eps), {out}\n"
)


def _vmap(x="x.movedim(x_dim, 0)", w="w.movedim(w_dim, 0).unsqueeze(1)", out="0"):
    return VMAP.format(x=x, w=w, out=out)


WRONG = {
    "l27-predict-fake-dtype": [
        ('failing_test = "test_aot_dispatch_dynamic"\n', "not quite"),  # the compile test
        ('failing_test = "test_schema"\n', "not quite"),
        ('failing_test = "test_fake"\n', "not one of the choices"),
    ],
    "l27-predict-function-breaks": [
        ("function_breaks = 1\n", "not quite"),  # numpy taken for code Dynamo cannot read
        ("function_breaks = 2\n", "not quite"),
    ],
    "l27-rms-norm-op": [
        # setup_context keeps x only; the backward unpacks two tensors.
        (cell(setup="def rms_norm_setup_context(ctx, inputs, output):\n"
                    "    x, w, eps = inputs\n"
                    "    ctx.save_for_backward(x)\n"
                    "    ctx.eps = eps\n"), "was not saved"),
        # eps never kept on ctx: the backward reads ctx.eps.
        (cell(setup="def rms_norm_setup_context(ctx, inputs, output):\n"
                    "    x, w, eps = inputs\n"
                    "    ctx.save_for_backward(x, w)\n"), "plain number such as eps"),
        # The fake drops the row dimension.
        (cell(fake="def rms_norm_fake(x, w, eps):\n    return x.new_empty(x.shape[0])\n"),
         "wrong shape"),
        # The fake is shaped like w.
        (cell(fake="def rms_norm_fake(x, w, eps):\n    return torch.empty_like(w)\n"),
         "wrong shape"),
        # The fake in the default dtype, float32, whatever the inputs.
        (cell(fake="def rms_norm_fake(x, w, eps):\n    return torch.empty(x.shape)\n"),
         "wrong dtype"),
        # The fake runs the real forward: numpy on FakeTensors.
        (cell(fake="def rms_norm_fake(x, w, eps):\n    return rms_norm_forward(x, w, eps)\n"),
         "without data"),
        # Two gradients for three inputs: None for eps forgotten.
        (with_body(RIGHT_DX + RIGHT_DW + "    return dx, dw\n"), "three gradients"),
        # The two gradients swapped.
        (with_body(RIGHT_DX + RIGHT_DW + "    return dw, dx, None\n"), "wrong order"),
        # A gradient for the plain number eps.
        (with_body(RIGHT_DX + RIGHT_DW + "    return dx, dw, torch.zeros(())\n"),
         "return None for eps"),
        # dL/dw not summed over the rows (autograd would sum it quietly).
        (with_body(RIGHT_DX + "    dw = grad * x * r\n    return dx, dw, None\n"),
         "sum over the rows"),
        # r taken as a constant.
        (with_body("    dx = r * grad * w\n" + RIGHT_DW + "    return dx, dw, None\n"),
         "r treated as a constant"),
        # The term through r summed, not averaged.
        (with_body("    dx = r * grad * w - x * r**3 * (grad * w * x).sum(dim=-1, keepdim=True)\n"
                   + RIGHT_DW + "    return dx, dw, None\n"), "the 1/d"),
        # w left out of dL/dx.
        (with_body("    dx = r * grad - x * r**3 * (grad * x).mean(dim=-1, keepdim=True)\n"
                   + RIGHT_DW + "    return dx, dw, None\n"), "w is missing from dL/dx"),
        # eps left out of r in the backward.
        (cell(backward=BACKWARD.format(RIGHT_DX + RIGHT_DW + "    return dx, dw, None\n")
              .replace(" + ctx.eps", "")), "eps is missing from r"),
        # The sign of the term through r flipped.
        (with_body("    dx = r * grad * w + x * r**3 * (grad * w * x).mean(dim=-1, keepdim=True)\n"
                   + RIGHT_DW + "    return dx, dw, None\n"), "wrong sign"),
        # The incoming gradient left out.
        (with_body("    grad = torch.ones_like(grad)\n" + RIGHT_DX + RIGHT_DW
                   + "    return dx, dw, None\n"), "incoming gradient g is missing"),
        # dL/dw without r.
        (with_body(RIGHT_DX + "    dw = (grad * x).sum(dim=0)\n    return dx, dw, None\n"),
         "dL/dw misses r"),
        # The backward in numpy: right in eager mode, untraceable by the compiler.
        (with_body("    a, b, g, s = x.numpy(), w.numpy(), grad.numpy(), r.numpy()\n"
                   "    dx = s * g * b - a * s**3 * (g * b * a).mean(axis=-1, keepdims=True)\n"
                   "    return torch.from_numpy(dx), (grad * x * r).sum(dim=0), None\n"),
         "write the backward in torch operations"),
    ],
    "l27-rms-norm-jvp": [
        # r taken as a constant.
        (JVP.format("    return x_t * r * w + x * r * w_t\n"), "r treated as a constant"),
        # w's tangent forgotten.
        (JVP.format(RIGHT_RT + "    return (x_t * r + x * r_t) * w\n"), "w's tangent is missing"),
        # Only the path through r.
        (JVP.format(RIGHT_RT + "    return x * r_t * w + x * r * w_t\n"), "direct path from x"),
        # The row's sum for its mean.
        (JVP.format("    r_t = -r**3 * (x * x_t).sum(dim=-1, keepdim=True)\n" + RIGHT_Y),
         "sums over the row"),
        # The square's 2 forgotten: -1/2 r**3 mean(x x_t).
        (JVP.format("    r_t = -0.5 * r**3 * (x * x_t).mean(dim=-1, keepdim=True)\n" + RIGHT_Y),
         "stray factor 1/2"),
        # r squared, not cubed.
        (JVP.format("    r_t = -r**2 * (x * x_t).mean(dim=-1, keepdim=True)\n" + RIGHT_Y),
         "wrong power of r"),
        # The sign of r's tangent.
        (JVP.format("    r_t = r**3 * (x * x_t).mean(dim=-1, keepdim=True)\n" + RIGHT_Y),
         "wrong sign"),
        # Exercise 1's backward, the tangent as its gradient.
        (JVP.format("    g = x_t * w\n"
                    "    return r * g - x * r**3 * (g * x).mean(dim=-1, keepdim=True) + x * r * w_t\n"),
         "the backward's formula"),
        # The tangent of x alone, shaped like w: summed over the rows as dL/dw is.
        (JVP.format(RIGHT_RT + "    return ((x_t * r + x * r_t) * w + x * r * w_t).sum(dim=0)\n"),
         "shape"),
    ],
    "l27-rms-norm-vmap": [
        # swish's rule copied: a batched w does not line up with x
        ("def rms_norm_vmap(info, in_dims, x, w, eps):\n"
         "    return rms_norm_forward(x, w, eps), in_dims[0]\n", "raised"),
        # the batch moved to the front, but the output said to be where x's was
        (_vmap(out="in_dims[0]"), "move each batched input's batch dimension"),
        # w's batch dimension moved, but not given a row dimension to broadcast over
        (_vmap(w="w.movedim(w_dim, 0)"), "raised"),
        # the batch assumed at dim 0 for x
        (_vmap(x="x"), "shape"),
        # x's batch brought forward by a swap: its other dimensions out of order from dim 2 on
        (_vmap(x="x.transpose(0, x_dim)"), "kept in order"),
        # movedim's arguments the wrong way round: the front dimension sent to x_dim
        (_vmap(x="x.movedim(0, x_dim)"), "kept in order"),
        # one call of the forward per example
        ("def rms_norm_vmap(info, in_dims, x, w, eps):\n"
         "    x_dim, w_dim, _ = in_dims\n"
         "    xs = x.movedim(x_dim, 0) if x_dim is not None else [x] * info.batch_size\n"
         "    ws = w.movedim(w_dim, 0) if w_dim is not None else [w] * info.batch_size\n"
         "    return torch.stack([rms_norm_forward(a, b, eps) for a, b in zip(xs, ws)]), 0\n",
         "called rms_norm_forward"),
        # no batch dimension said for the output
        (_vmap(out="None"), "gave a result of shape"),
        # the batch left where x had it when w is shared: at x's last dim, w lines up with it
        ("def rms_norm_vmap(info, in_dims, x, w, eps):\n"
         "    x_dim, w_dim, _ = in_dims\n"
         "    if w_dim is None:\n"
         "        return rms_norm_forward(x, w, eps), x_dim\n"
         "    if x_dim is not None:\n"
         "        x = x.movedim(x_dim, 0)\n"
         "    return rms_norm_forward(x, w.movedim(w_dim, 0).unsqueeze(1), eps), 0\n",
         "batch dimension is its last here"),
    ],
}
