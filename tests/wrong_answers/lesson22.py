"""Plausible wrong answers for the exercises of 22-where-calculus-runs-out.ipynb.

Each fragment is part of the message only the right diagnosis gives: a conjugate left out
is told apart from the conjugate of torch's answer (the other convention) and from the
factor 2 of |z|**2; each of torch's choices at a kink is named when another was made
there; a NaN kept, a NaN cleaned up after the fact and a different function are told
apart in the where rewrite.
"""


def _fn(signature: str, body: str) -> str:
    """A whole solution cell: the function with the given body (indented lines)."""
    return f"def {signature}:\n" + "".join(f"    {line}\n" for line in body.strip("\n").split("\n"))


VJPS = "complex_vjps(z, w, g, r)"
LINEAR = "complex_linear_backward(x, W, b, G)"
HINGE = "hinge_grad(X, y, w, lam)"
SOFT = "safe_soft_relu(x, beta)"

RIGHT_ABS2, RIGHT_EXP = "2 * r * z", "g * torch.exp(z).conj()"
RIGHT_MUL = "g * w.conj(), g * z.conj()"

# hinge_grad with its three choices as parameters: relu's slope at 0, the clip's bounds, norm at 0.
HINGE_BODY = """
s = X @ w
margin = 1 - y * F.hardtanh(s, -2.0, 2.0)
active = (margin {relu} 0).to(s.dtype)
passes = {passes}
pairs = w.view(-1, 2)
lengths = pairs.norm(dim=1, keepdim=True)
unit = {unit}
return X.T @ (-y * active * passes) + lam * unit.flatten()
"""
BOUNDS_OUT = "((s > -2.0) & (s < 2.0)).to(s.dtype)"
SAFE_UNIT = "torch.where(lengths > 0, pairs / torch.where(lengths > 0, lengths, 1.0), 0.0)"


def _hinge(relu=">", passes=BOUNDS_OUT, unit=SAFE_UNIT):
    return _fn(HINGE, HINGE_BODY.format(relu=relu, passes=passes, unit=unit))


WRONG = {
    "l22-predict-abs": [
        ("abs_guess = -1.0\n", "not quite"),  # the slope on the left, as relu's seemed
        ("abs_guess = 1.0\n", "not quite"),
    ],
    "l22-predict-relu": [
        ("relu_guess = [0.0, 0.0]\n", "not quite"),  # one function, one gradient
        ("relu_guess = [0.0, 1.0]\n", "not quite"),  # maximum's tie given to x alone
    ],
    "l22-predict-complex": [
        ("complex_guess = 1 + 2j\n", "not quite"),  # ∂L/∂z* without the factor 2
        ("complex_guess = 2 - 4j\n", "not quite"),  # ∂L/∂x + i ∂L/∂y conjugated
        ("complex_guess = 5.0\n", "not quite"),  # |z|², the loss itself
    ],
    "l22-complex-vjps": [
        (_fn(VJPS, f"return g * w, g * z, {RIGHT_ABS2}, {RIGHT_EXP}"), "z * w: no conjugate"),
        (_fn(VJPS, f"return g.conj() * w, g.conj() * z, {RIGHT_ABS2}, {RIGHT_EXP}"),
         "the conjugate of torch's answer"),
        (_fn(VJPS, f"return {RIGHT_MUL}, r * z, {RIGHT_EXP}"), "the factor 2 is missing"),
        (_fn(VJPS, f"return {RIGHT_MUL}, 2 * r * z.conj(), {RIGHT_EXP}"),
         "|z|**2: conjugated. 2 * r * z.conj()"),
        (_fn(VJPS, f"return {RIGHT_MUL}, r * z.conj(), {RIGHT_EXP}"),
         "conjugated, and the factor 2 is missing"),
        (_fn(VJPS, f"return {RIGHT_MUL}, {RIGHT_ABS2}, g * torch.exp(z)"), "exp(z): no conjugate"),
        (_fn(VJPS, f"return {RIGHT_MUL}, {RIGHT_ABS2}, g.conj() * torch.exp(z)"),
         "exp(z): this is the conjugate of torch's answer"),
        # JAX's convention throughout: the first output already names it.
        (_fn(VJPS, "return (g.conj() * w, g.conj() * z, 2 * r * z.conj(), "
                   "g.conj() * torch.exp(z))"), "the other convention"),
        (_fn(VJPS, f"return {RIGHT_MUL}, {RIGHT_ABS2}"), "returned 3 value(s); expected 4"),
        (_fn(VJPS, "zero = torch.zeros_like(z)\nreturn zero, zero, zero, zero"), "hard-coded"),
    ],
    "l22-complex-linear": [
        (_fn(LINEAR, "return G @ W.T, x.T @ G, G.sum(0)"), "no conjugate in either product"),
        (_fn(LINEAR, "return G @ W.T, x.mH @ G, G.sum(0)"), "dx is missing the conjugate"),
        (_fn(LINEAR, "return G @ W.mH, x.T @ G, G.sum(0)"), "dW is missing the conjugate"),
        (_fn(LINEAR, "return (G @ W.mH).conj(), (x.mH @ G).conj(), G.sum(0).conj()"),
         "the conjugates sit on G"),
        (_fn(LINEAR, "return G @ W.mH, x.mH @ G, G.sum(0).conj()"), "db is conjugated"),
        # The conjugate put on G in one product only: that output alone is mirrored.
        (_fn(LINEAR, "return G.conj() @ W.T, x.mH @ G, G.sum(0)"), "dx is the conjugate"),
        (_fn(LINEAR, "return G @ W.mH, x.T @ G.conj(), G.sum(0)"), "dW is the conjugate"),
        (_fn(LINEAR, "return G @ W.mH, x.mH @ G, G.mean(0)"), "db is a mean"),
        (_fn(LINEAR, "return G @ W.mH, G.mH @ x, G.sum(0)"), "has shape"),
    ],
    "l22-hinge-kinks": [
        (_hinge(relu=">="), "relu's slope at its kink was taken as 1"),
        # clamp's choice at its bounds in torch 2.13, taken for hardtanh's.
        (_hinge(passes="((s >= -2.0) & (s <= 2.0)).to(s.dtype)"), "the clip's bounds let"),
        (_hinge(passes="torch.ones_like(s)"), "the clip was ignored"),
        (_hinge(unit="pairs / lengths"), "a pair of zero weights gave NaN"),
        # The minus of 1 - y * s lost: every trial has a violated margin, so it shows.
        (_hinge().replace("X.T @ (-y * active * passes)", "X.T @ (y * active * passes)"),
         "the wrong sign"),
        # The hinge averaged, as a mean loss would be.
        (_hinge().replace("X.T @ (-y * active * passes)", "X.T @ (-y * active * passes) / len(y)"),
         "averaged over the examples"),
        # The penalty taken for an L1 one: a plain mismatch, no slip of the list.
        (_hinge(unit="pairs.sign()"), "mismatch"),
        # The lesson's worked example copied in.
        (_fn(HINGE, "return torch.tensor([-0.7764, -0.4472, 1.1581, -0.5257], dtype=w.dtype)"), "hard-coded"),
    ],
    "l22-safe-softplus": [
        # The function as given: the NaN is still there.
        (_fn(SOFT, "bx = beta * x\nreturn torch.where(bx > 20, x, torch.log1p(torch.exp(bx)) "
                   "/ beta)"), "has NaN or inf"),
        # nan_to_num on the output: the NaN is made in backward, below it.
        (_fn(SOFT, "bx = beta * x\nout = torch.where(bx > 20, x, torch.log1p(torch.exp(bx)) "
                   "/ beta)\nreturn out.nan_to_num()"), "has NaN or inf"),
        # nan_to_num on the gradients, with hooks on the inputs: x's slope of 1 is lost.
        (_fn(SOFT, "x.register_hook(torch.nan_to_num)\nbeta.register_hook(torch.nan_to_num)\n"
                   "bx = beta * x\nreturn torch.where(bx > 20, x, torch.log1p(torch.exp(bx)) "
                   "/ beta)"), "replaced (nan_to_num, a hook) rather than prevented"),
        # Only the inner where: the values above 20 are no longer x.
        (_fn(SOFT, "bx = beta * x\ntame = torch.where(bx > 20, 0.0, bx)\n"
                   "return torch.log1p(torch.exp(tame)) / beta"), "the values differ"),
        # Lesson 19's stable softplus: a smooth function, not this one above 20.
        (_fn(SOFT, "bx = beta * x\n"
                   "return (bx.clamp(min=0) + torch.log1p(torch.exp(-bx.abs()))) / beta"),
         "the values differ from soft_relu's at the entries with 20 < beta * x <= 709"),
        # The unsafe branch detached: no NaN, and no gradient where it is used either.
        (_fn(SOFT, "bx = beta * x\n"
                   "return torch.where(bx > 20, x, (torch.log1p(torch.exp(bx)) / beta).detach())"),
         "at the entries with beta * x <= 20 (yours 0"),
        # The threshold moved a little off 20, on either side: the values near 20 differ.
        (_fn(SOFT, "bx = beta * x\nbig = bx > 19.75\ntame = torch.where(big, 0.0, bx)\n"
                   "return torch.where(big, x, torch.log1p(torch.exp(tame)) / beta)"),
         "the values differ from soft_relu's at the entries with beta * x <= 20"),
        (_fn(SOFT, "bx = beta * x\nbig = bx > 20.25\ntame = torch.where(big, 0.0, bx)\n"
                   "return torch.where(big, x, torch.log1p(torch.exp(tame)) / beta)"),
         "the values differ from soft_relu's at the entries with 20 < beta * x"),
        (_fn(SOFT, "return 0.0"), "returned float"),
        # float32 arithmetic: right to 1e-7, not to round-off.
        (_fn(SOFT, "bx = (beta * x).float()\nbig = bx > 20\n"
                   "tame = torch.where(big, 0.0, bx)\n"
                   "return torch.where(big, x.float(), torch.log1p(torch.exp(tame)) / beta)"),
         "the values differ"),
    ],
}
