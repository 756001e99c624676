"""Plausible wrong answers for the exercises of 19-attention-by-hand.ipynb.

Each fragment is part of the message only the right diagnosis gives: a transposed
factor is named as the factor it is, a mask forgotten in backward is told why it
matters once P is rebuilt, a softmax VJP without its row sum is named, a missing
1/sqrt(d) and each missing path into X are named apart.
"""


def _fn(signature: str, body: str) -> str:
    """A whole solution cell: the function with the given body (indented lines)."""
    return f"def {signature}:\n" + "".join(f"    {line}\n" for line in body.strip("\n").split("\n"))


ATTEND = "attend_backward(P, V, dO)"
DSCORES = "dscores(S, lse, dP)"
SCORES = "scores_backward(Q, K, dS)"
PROJECTIONS = "projections_backward(X, Wq, Wk, Wv, dQ, dK, dV)"

# P rebuilt with the mask, then a softmax VJP written in {vjp}.
MASKED_P = ("P = torch.exp(S - lse).masked_fill(future_mask(len(S)), 0.0)\n"
            "return {vjp}")
ROW_SUM = "P * (dP - (dP * P).sum({how}))"
WEIGHTS = "X.T @ dQ, X.T @ dK, X.T @ dV"

WRONG = {
    "l19-predict-growth": [
        ('growth_guess = "x2"\n', "not quite"),
        ("growth_guess = 4\n", "is not one of the choices"),
    ],
    "l19-attend": [
        (_fn(ATTEND, "return V @ dO.T, P.T @ dO"), "dP came out transposed"),
        (_fn(ATTEND, "return dO @ V.T, P @ dO"), "dV is missing P's transpose"),
        (_fn(ATTEND, "return (dO @ V.T).tril(), P.T @ dO"), "dP was masked"),
        # Section 2's autograd gradients of the 5-token head, handed in.
        (_fn(ATTEND, 'return autograd["P"], autograd["V"]'), "hard-coded"),
        (_fn(ATTEND, "return torch.zeros_like(P), torch.zeros_like(V)"), "hard-coded"),
    ],
    "l19-dscores": [
        (_fn(DSCORES, "P = torch.exp(S - lse)\n"
                      "return P * (dP - (dP * P).sum(-1, keepdim=True))"),
         "the mask is missing in backward"),
        (_fn(DSCORES, "P = torch.exp(S - lse)\n"
                      "dS = P * (dP - (dP * P).sum(-1, keepdim=True))\n"
                      "return dS.masked_fill(future_mask(len(S)), 0.0)"),
         "the mask came too late"),
        (_fn(DSCORES, MASKED_P.format(vjp="P * dP")), "the row sum is missing"),
        (_fn(DSCORES, MASKED_P.format(vjp=ROW_SUM.format(how="0, keepdim=True"))),
         "the row sum went along the wrong dimension"),
        (_fn(DSCORES, MASKED_P.format(vjp=ROW_SUM.format(how="-1"))),
         "the row sum lost its dimension"),
        (_fn(DSCORES, "P = torch.exp(S).masked_fill(future_mask(len(S)), 0.0)\n"
                      "return P * (dP - (dP * P).sum(-1, keepdim=True))"), "without lse"),
        (_fn(DSCORES, 'return autograd["S"]'), "hard-coded"),
    ],
    "l19-scores": [
        (_fn(SCORES, "return dS @ K, dS.T @ Q"), "the 1/sqrt(d) is missing"),
        (_fn(SCORES, "d = Q.shape[1]\nreturn dS @ K / d, dS.T @ Q / d"),
         "divided by d instead of sqrt(d)"),
        (_fn(SCORES, "r = Q.shape[1] ** 0.5\nreturn dS @ K * r, dS.T @ Q * r"),
         "multiplied by sqrt(d) instead of dividing"),
        (_fn(SCORES, "r = Q.shape[1] ** 0.5\nreturn dS @ K / r, dS @ Q / r"),
         "dK is missing dS's transpose"),
        (_fn(SCORES, "r = Q.shape[1] ** 0.5\nreturn dS.T @ K / r, dS.T @ Q / r"),
         "dQ used dS's transpose"),
        # The lesson's head width D = 4 hard-wired: right only where the new head has d = 4.
        (_fn(SCORES, "return dS @ K / 2.0, dS.T @ Q / 2.0"), "it matches on"),
    ],
    "l19-projections": [
        (_fn(PROJECTIONS, f"return dQ @ Wq.T, {WEIGHTS}"), "only the path through Q"),
        # = where += was meant: each write replaces the one before.
        (_fn(PROJECTIONS, "dX = dQ @ Wq.T\ndX = dK @ Wk.T\ndX = dV @ Wv.T\n"
                          f"return dX, {WEIGHTS}"), "only the path through V"),
        (_fn(PROJECTIONS, f"return dQ @ Wq.T + dV @ Wv.T, {WEIGHTS}"),
         "the path through K is missing"),
        (_fn(PROJECTIONS, f"return dQ @ Wq.T + dK @ Wk.T, {WEIGHTS}"),
         "the path through V is missing"),
        (_fn(PROJECTIONS, f"return dK @ Wk.T + dV @ Wv.T, {WEIGHTS}"),
         "the path through Q is missing"),
        (_fn(PROJECTIONS, "dX = dQ @ Wq.T + dK @ Wk.T + dV @ Wv.T\n"
                          "return dX, X.T @ dV, X.T @ dK, X.T @ dQ"), "mixed up"),
        (_fn(PROJECTIONS, "dX = dQ @ Wq.T + dK @ Wk.T + dV @ Wv.T\n"
                          "return dX, dQ.T @ X, dK.T @ X, dV.T @ X"), "transpose"),
        # The three paths averaged instead of added (the check computes its reference
        # itself, so nothing is said about .grad accumulating).
        (_fn(PROJECTIONS, "dX = (dQ @ Wq.T + dK @ Wk.T + dV @ Wv.T) / 3\n"
                          f"return dX, {WEIGHTS}"), "exactly 1/3"),
    ],
}
