"""Plausible wrong answers for the exercises of 13-classic-layers-by-hand.ipynb.

Each fragment is part of the message only the right diagnosis gives. The convolution's
input gradient is written both ways a learner may take (fold, or a correlation with the
turned kernel as lesson 26 did in 1-D), so that padding kept or cut from one side, a kernel
not turned or transposed, and a stride left out are each named; a bias summed over too
little, a kernel gradient from one example or turned; a tie settled evenly, for every
maximum, or at the last one, and overlapping windows written with = where they add; a
dropout scale missing, applied in eval, or inverted; an LSTM step with a path of its cell
state missing, the two derivatives swapped or left out; and through time, the paths of c
and h between steps, the gradient from above at every step, and W's terms adding up.
"""


def _fn(signature: str, body: str) -> str:
    """A whole solution cell: the function with the given body (indented lines)."""
    return f"def {signature}:\n" + "".join(f"    {line}\n" for line in body.strip("\n").split("\n"))


CONV_DX = "conv2d_dx(x, w, dout, stride, padding)"
CONV_DW = "conv2d_dw_db(x, w, dout, stride, padding)"
POOL = "maxpool_backward(x, dout, kernel, stride)"
DROPOUT = "dropout_backward(dout, mask, p, training)"
STEP = "lstm_step_backward(i, f, g, o, c, c_new, dh_new, dc_new)"
BPTT = "lstm_bptt(xs, h0, c0, W, b, dhs)"

# The input gradient by fold: back through the product, then fold onto {size}, then {crop}.
FOLDED = """N, C_in, H, W = x.shape
k = w.shape[-1]
dcols = w.reshape(w.shape[0], -1).T @ dout.flatten(2)
padded = F.fold(dcols, (H + 2 * padding, W + 2 * padding), k, stride=stride)
return {crop}"""

# The input gradient as lesson 26's correlation with the turned kernel, in 2-D: dout spread
# out by the stride, padded by k - 1, correlated with {kernel} (channels swapped), grown to
# the padded image's size (rows never read get 0), then the padding cut off.
TURNED = """N, C_out, H_out, W_out = dout.shape
H, W = x.shape[2:]
k = w.shape[-1]
spread = dout.new_zeros(N, C_out, (H_out - 1) * stride + 1, (W_out - 1) * stride + 1)
spread[:, :, ::stride, ::stride] = dout
full = F.conv2d(F.pad(spread, (k - 1, k - 1, k - 1, k - 1)), {kernel}.transpose(0, 1))
full = F.pad(full, (0, W + 2 * padding - full.shape[3], 0, H + 2 * padding - full.shape[2]))
return full[:, :, padding:padding + H, padding:padding + W]"""

# Stride forgotten in the same route: dout is not spread out, the border is cut all round.
NO_STRIDE = """k = w.shape[-1]
full = F.conv2d(F.pad(dout, (k - 1, k - 1, k - 1, k - 1)), w.flip(2, 3).transpose(0, 1))
return full[:, :, padding:full.shape[2] - padding, padding:full.shape[3] - padding]"""

DW = """patches = F.unfold(x, w.shape[-1], stride=stride, padding=padding)
dw = (dout.flatten(2) @ patches.transpose(1, 2)).sum(0).reshape(w.shape)
return {dw}, {db}"""

# Max-pool through unfold and fold, with {pick}: which entries of each window get its share.
PICKED = """N, C, H, W = x.shape
windows = F.unfold(x, kernel, stride=stride).reshape(N, C, kernel * kernel, -1)
{pick}
routed = share * dout.reshape(N, C, 1, -1)
return F.fold(routed.reshape(N, C * kernel * kernel, -1), (H, W), kernel, stride=stride)"""
TIED = "share = (windows == windows.amax(dim=2, keepdim=True)).to(x.dtype)"
LAST = ("last = kernel * kernel - 1 - windows.flip(2).argmax(dim=2, keepdim=True)\n"
        "share = torch.zeros_like(windows).scatter_(2, last, 1.0)")

# Max-pool window by window, each window writing (=) its gradient at its first maximum.
WRITTEN = """N, C, H, W = x.shape
H_out, W_out = dout.shape[2:]
dx = torch.zeros_like(x)
for n in range(N):
    for ch in range(C):
        for r in range(H_out):
            for q in range(W_out):
                window = x[n, ch, r * stride:r * stride + kernel, q * stride:q * stride + kernel]
                a, b = divmod(int(window.argmax()), kernel)
                dx[n, ch, r * stride + a, q * stride + b] = dout[n, ch, r, q]
return dx"""

# One LSTM step, with each piece replaceable.
STEP_BODY = """tanh_c = torch.tanh(c_new)
dc_all = {dc_all}
di = dc_all * g * {di}
df = dc_all * c * {df}
dg = dc_all * i * {dg}
do = dh_new * tanh_c * {do}
return torch.cat([{order}], dim=1), dc_all * f"""
BOTH_PATHS = "dc_new + dh_new * o * (1 - tanh_c**2)"


def _step(dc_all=BOTH_PATHS, di="i * (1 - i)", df="f * (1 - f)", dg="(1 - g**2)",
          do="o * (1 - o)", order="di, df, dg, do"):
    return _fn(STEP, STEP_BODY.format(dc_all=dc_all, di=di, df=df, dg=dg, do=do, order=order))


# Through time, with the learner's own lstm_step_backward (exercise 5's solution).
BPTT_BODY = """width = xs.shape[2]
h, c, kept = h0, c0, []
for x in xs:
    s = lstm_step(x, h, c, W, b)
    kept.append((torch.cat([x, h], dim=1), c, s))
    h, c = s["h_new"], s["c_new"]
dW, db = torch.zeros_like(W), torch.zeros_like(b)
dh, dc = torch.zeros_like(h0), torch.zeros_like(c0)
for t in reversed(range(len(xs))):
    xh, c_before, s = kept[t]
    dz, dc = {step}(s["i"], s["f"], s["g"], s["o"], c_before, s["c_new"], {above}, {dc})
    {accumulate}
    dh = (dz @ W.T)[:, width:]
return dW, db, dh, dc"""
ADD_UP = "dW, db = dW + xh.T @ dz, db + dz.sum(0)"


def _bptt(step="lstm_step_backward", above="dhs[t] + dh", dc="dc", accumulate=ADD_UP,
          before=""):
    return before + _fn(BPTT, BPTT_BODY.format(step=step, above=above, dc=dc,
                                               accumulate=accumulate))


# A step backward of the learner's own, inside the answer, that leaves out the path of the
# cell state through h_new.
ONE_PATH_STEP = """def step_back(i, f, g, o, c, c_new, dh_new, dc_new):
    tanh_c = torch.tanh(c_new)
    di, df, dg = dc_new * g * i * (1 - i), dc_new * c * f * (1 - f), dc_new * i * (1 - g**2)
    do = dh_new * tanh_c * o * (1 - o)
    return torch.cat([di, df, dg, do], dim=1), dc_new * f


"""

WRONG = {
    "l13-conv-dx": [
        (_fn(CONV_DX, FOLDED.format(crop="padded")), "the padding is still on dx"),
        (_fn(CONV_DX, FOLDED.format(crop="padded[:, :, :H, :W]")),
         "the padding was cut from one side only"),
        (_fn(CONV_DX, TURNED.format(kernel="w")), "the kernel was not turned"),
        (_fn(CONV_DX, TURNED.format(kernel="w.transpose(2, 3)")),
         "the kernel was transposed (rows and columns swapped)"),
        (_fn(CONV_DX, NO_STRIDE), "the stride is missing"),
        # The kernel's matrix from w with its channels transposed: right only for 1 channel in.
        (_fn(CONV_DX, FOLDED.replace("w.reshape(", "w.transpose(0, 1).reshape(").format(
            crop="padded[:, :, padding:padding + H, padding:padding + W]")),
         "the kernel's matrix mixes up the channels"),
        (_fn(CONV_DX, "return F.conv_transpose2d(dout, w, stride=stride, padding=padding)"),
         "dx lacks the last rows or columns of x"),
        (_fn(CONV_DX, "return torch.zeros_like(x)"), "hard-coded"),
        # H and W swapped: right on a square image only.
        (_fn(CONV_DX, "N, C_in, H, W = x.shape\n"
                      "dcols = w.reshape(w.shape[0], -1).T @ dout.flatten(2)\n"
                      "return F.fold(dcols, (W, H), w.shape[-1], stride=stride, padding=padding)"),
         "dx has shape"),
    ],
    "l13-conv-dw": [
        (_fn(CONV_DW, DW.format(dw="dw", db="dout.sum(dim=(2, 3))")),
         "db is not summed over the batch"),
        (_fn(CONV_DW, DW.format(dw="dw", db="dout.sum(dim=0)")),
         "db is not summed over the positions"),
        (_fn(CONV_DW, DW.format(dw="dw", db="dout.mean(dim=(0, 2, 3))")),
         "a mean where the gradient needs a sum"),
        (_fn(CONV_DW, "patches = F.unfold(x, w.shape[-1], stride=stride, padding=padding)\n"
                      "dw = (dout[0].flatten(1) @ patches[0].T).reshape(w.shape)\n"
                      "return dw, dout.sum(dim=(0, 2, 3))"),
         "dw comes from the first example only"),
        (_fn(CONV_DW, DW.format(dw="dw / x.shape[0]", db="dout.sum(dim=(0, 2, 3))")),
         "(the size of dimension 0 of x)"),
        (_fn(CONV_DW, DW.format(dw="dw.flip(2, 3)", db="dout.sum(dim=(0, 2, 3))")),
         "dw came out turned 180 degrees"),
        (_fn(CONV_DW, DW.format(dw="dw.transpose(2, 3)", db="dout.sum(dim=(0, 2, 3))")),
         "dw came out transposed"),
    ],
    "l13-pool": [
        (_fn(POOL, PICKED.format(pick=TIED + "\nshare = share / share.sum(dim=2, keepdim=True)")),
         "split evenly between the tied maxima"),
        (_fn(POOL, PICKED.format(pick=TIED)), "every tied maximum received the whole gradient"),
        (_fn(POOL, PICKED.format(pick=LAST)), "the gradient went to the last of the tied maxima"),
        (_fn(POOL, WRITTEN), "kept one window's gradient"),
        # unfold's rows read channel-last: right only for one channel.
        (_fn(POOL, PICKED.replace("N, C, kernel * kernel, -1", "N, kernel * kernel, C, -1")
             .replace("N, C, 1, -1", "N, 1, C, -1").format(
                 pick="share = torch.zeros_like(windows).scatter_(\n"
                      "    1, windows.argmax(dim=1, keepdim=True), 1.0)")),
         "mixed up with the channels"),
        (_fn(POOL, PICKED.format(pick="share = torch.ones_like(windows) / (kernel * kernel)")),
         "spread over the whole window"),
        # H and W swapped: right on a square image only.
        (_fn(POOL, PICKED.replace("(H, W)", "(W, H)").format(
            pick="share = torch.zeros_like(windows).scatter_(\n"
                 "    2, windows.argmax(dim=2, keepdim=True), 1.0)")),
         "has shape"),
    ],
    "l13-dropout": [
        (_fn(DROPOUT, "return dout * mask if training else dout"), "the scale is missing"),
        (_fn(DROPOUT, "return dout * mask"), "the scale is missing"),
        (_fn(DROPOUT, "return dout * mask / (1 - p)"), "the scale was applied in eval mode"),
        (_fn(DROPOUT, "return dout / (1 - p) if training else dout"), "the mask is missing"),
        (_fn(DROPOUT, "return dout * mask / p if training else dout"),
         "divided by p instead of 1 - p"),
        (_fn(DROPOUT, "return dout * mask * (1 - p) if training else dout"),
         "multiplied by 1 - p instead of dividing"),
    ],
    "l13-lstm-step": [
        (_step(dc_all="dc_new"), "the path through h_new is missing"),
        (_step(dc_all="dh_new * o * (1 - tanh_c**2)"), "dc_new is missing"),
        (_step(di="(1 - i**2)", df="(1 - f**2)", dg="g * (1 - g)", do="(1 - o**2)"),
         "sigmoid's and tanh's derivatives were swapped"),
        (_step(di="1", df="1", do="1"), "the sigmoid's derivative is missing"),
        (_step(dg="1"), "tanh's derivative is missing from g"),
        (_step(dc_all="dc_new + dh_new * o * (1 - c_new**2)"), "1 - c_new**2"),
        (_step(order="di, df, do, dg"), "the gates are in the wrong order"),
        # Gates concatenated along the batch, then reshaped: right only for a batch of 1.
        (_step().replace("], dim=1)", "]).reshape(len(di), -1)"), "dz:"),
    ],
    "l13-lstm-bptt": [
        (_bptt(dc="torch.zeros_like(c0)"), "the cell state's path through time is missing"),
        (_bptt(above="dhs[t]"), "the hidden state's path through time is missing"),
        (_bptt(above="(dhs[t] if t == len(xs) - 1 else 0) + dh"),
         "only the last step's gradient from above"),
        (_bptt(accumulate="dW, db = xh.T @ dz, dz.sum(0)"), "one step's term only"),
        (_bptt(step="step_back", before=ONE_PATH_STEP),
         "inside the step, the path through h_new is missing"),
        # Averaged over the batch: right only for a batch of 1.
        (_bptt(accumulate="dW, db = dW + xh.T @ dz / len(dz), db + dz.mean(0)"),
         "averaged over the batch"),
        (_bptt(accumulate="dW, db = dW + xh.T @ dz, db + dz.mean(0)"), "db:"),
    ],
    "l13-predict-pool-tie": [
        ("pool_tie_guess = [0.0, 0.5, 0.5, 0.0]\n", "not quite"),
        ("pool_tie_guess = [0.0, 0.0, 1.0, 0.0]\n", "not quite"),
    ],
    "l13-predict-dropout-eval": [
        ('eval_grad_guess = "all 2"\n', "not quite"),
        ('eval_grad_guess = "ones"\n', "is not one of the choices"),
    ],
}
