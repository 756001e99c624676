"""Plausible wrong answers for the exercises of 10-backprop-through-a-classifier.ipynb.

Each fragment is part of the message only the right diagnosis gives: a slip must be
named as the slip it is (a correct sum is never told it forgot to sum, a `+=` through
advanced indexing is told why it keeps one lookup, a forgotten gain is named).
"""


def _fn(signature: str, body: str) -> str:
    """A whole solution cell: the function with the given body (indented lines)."""
    return f"def {signature}:\n" + "".join(f"    {line}\n" for line in body.strip("\n").split("\n"))


DLOGPROBS = "dlogprobs(logprobs, y)"
PICK = "n = len(logprobs)\ngrad = torch.zeros_like(logprobs)\ngrad[torch.arange(n), y] = {}\nreturn grad"
LINEAR = "linear_backward(inp, W, dout)"
SCALE_SHIFT = "scale_shift_backward(xhat, gain, dhbn)"
KEPT = "return gain * dhbn, (xhat * dhbn).sum(0, keepdim=True), dhbn.sum(0)"
DGAIN_UNSUMMED = "return gain * dhbn, xhat * dhbn, dhbn.sum(0)"
DBIAS_UNSUMMED = "return gain * dhbn, (xhat * dhbn).sum(0), dhbn"
EMBEDDING = "dC(tokens, demb, num_rows)"
TABLE = ("dim = demb.shape[-1]\n"
         "table = torch.zeros(num_rows, dim, dtype=demb.dtype)\n"
         "flat_ids, flat_grads = tokens.flatten(), demb.reshape(-1, dim)\n")
LAYERNORM = "layernorm_backward(dout, x, gain, eps)"
NORM = ("features = x.shape[{dim}]\n"
        "centred = x - x.mean({dim}, keepdim=True)\n"
        "inv_sd = ((centred**2).sum({dim}, keepdim=True) / {count} + eps) ** -0.5\n"
        "normed = centred * inv_sd\n"
        "g = {g}\n"
        "return inv_sd / features * ({terms})")
ALL_TERMS = "features * g - g.sum({dim}, keepdim=True) - normed * (g * normed).sum({dim}, keepdim=True)"


def _norm(dim=1, count="features", g="dout * gain", terms=ALL_TERMS):
    return NORM.format(dim=dim, count=count, g=g, terms=terms.format(dim=dim))


WRONG = {
    "l10-dlogprobs": [
        (_fn(DLOGPROBS, PICK.format("-1.0")), "1/n is missing"),
        (_fn(DLOGPROBS, PICK.format("1.0 / n")), "the sign is flipped"),
        (_fn(DLOGPROBS, "return torch.full_like(logprobs, -1.0 / len(logprobs))"),
         "only the picked entry of each row"),
        # The spiral's N = 300 hard-wired.
        (_fn(DLOGPROBS, PICK.format("-1.0 / 300")), "mismatch"),
    ],
    "l10-dprobs": [
        (_fn("dprobs(probs, dlogprobs)", "return dlogprobs * probs"), "derivative of log(p) is 1/p"),
        (_fn("dprobs(probs, dlogprobs)", "return 1 / probs"), "arriving from above is missing"),
    ],
    "l10-dcounts-sum-inv": [
        (_fn("dcounts_sum_inv(counts, dprobs)", "return dprobs * counts"),
         "the sum is missing: counts_sum_inv has one number per row"),
        (_fn("dcounts_sum_inv(counts, dprobs)", "return (dprobs * counts).sum(0, keepdim=True)"),
         "summed over the batch (dim 0)"),
        (_fn("dcounts_sum_inv(counts, dprobs)", "return (dprobs * counts).sum(1)"),
         "without keepdim=True"),
    ],
    "l10-dcounts-sum": [
        (_fn("dcounts_sum(counts_sum, dcounts_sum_inv)", "return dcounts_sum_inv / counts_sum**2"),
         "the sign is lost"),
        (_fn("dcounts_sum(counts_sum, dcounts_sum_inv)", "return -dcounts_sum_inv / counts_sum"),
         "the power rule gives -s**-2"),
    ],
    "l10-dcounts": [
        # = where += was meant: the path through counts_sum is dropped.
        (_fn("dcounts(counts_sum_inv, dprobs, dcounts_sum)", "return dprobs * counts_sum_inv"),
         "only the path through probs"),
        # = where += was meant, the other way round: the second write replaces the first.
        (_fn("dcounts(counts_sum_inv, dprobs, dcounts_sum)",
             "grad = torch.zeros_like(dprobs)\n"
             "grad[:] = dprobs * counts_sum_inv\n"
             "grad[:] = dcounts_sum\n"
             "return grad"),
         "only the path through counts_sum"),
    ],
    "l10-dshifted": [
        (_fn("dshifted(counts, dcounts)", "return dcounts"), "exp's local derivative is missing"),
        (_fn("dshifted(counts, dcounts)", "return counts"), "arriving from above is missing"),
    ],
    "l10-predict-maxes": [
        # The scale the question gives, taken for the answer.
        ("maxes_guess = 0.003\n", "not quite"),
        ("maxes_guess = ...\n", "no prediction yet"),
    ],
    "l10-dlogit-maxes": [
        (_fn("dlogit_maxes(dshifted)", "return -dshifted"), "the sum is missing: logit_maxes"),
        (_fn("dlogit_maxes(dshifted)", "return dshifted.sum(1, keepdim=True)"),
         "the sign is lost: logit_maxes is subtracted"),
        # The spiral's ~0 taken for the rule: zeros whatever arrives.
        (_fn("dlogit_maxes(dshifted)", "return torch.zeros(len(dshifted), 1, dtype=dshifted.dtype)"),
         "hard-coded"),
    ],
    "l10-dlogits": [
        # The max path dropped because its gradient is ~0 on the spiral.
        (_fn("dlogits(logits, dshifted, dlogit_maxes)", "return dshifted"),
         "only the direct path is there"),
        # The max's gradient broadcast over the row, as if every entry had been the max.
        (_fn("dlogits(logits, dshifted, dlogit_maxes)", "return dshifted + dlogit_maxes"),
         "went to every entry of the row"),
    ],
    "l10-linear": [
        (_fn(LINEAR, "return dout @ W.T, dout.T @ inp, dout.sum(0)"), "dW came out transposed"),
        (_fn(LINEAR, "return dout @ W.T, inp.T @ dout, dout"), "db is not summed over the batch"),
        (_fn(LINEAR, "n = len(inp)\nreturn dout @ W.T, inp.T @ dout / n, dout.sum(0) / n"),
         "divided by the batch size"),
        # db right, dW alone off: the message is about dW, never about a sum.
        (_fn(LINEAR, "return dout @ W.T, 2 * inp.T @ dout, dout.sum(0)"), "dW: on new inputs"),
        (_fn(LINEAR, "return W @ dout.T, inp.T @ dout, dout.sum(0)"), "dinp came out transposed"),
        # The sum is there; keepdim=True left (1, m): named as the shape, not as a missing sum.
        (_fn(LINEAR, "dinp = dout @ W.T\ndW = inp.T @ dout\ndb = dout.sum(0, keepdim=True)\n"
                     "return dinp, dW, db"),
         "the sum is there, but keepdim=True (or an unsqueeze) left a size-1 dimension"),
    ],
    "l10-dhbn": [
        (_fn("dhbn(h, dh)", "return dh * (1 - torch.tanh(h) ** 2)"), "tanh was applied to h again"),
        (_fn("dhbn(h, dh)", "return dh * (1 - h)"), "the square is missing"),
        (_fn("dhbn(h, dh)", "return 1 - h**2"), "arriving from above is missing"),
    ],
    "l10-scale-shift": [
        (_fn(SCALE_SHIFT, "return dhbn, (xhat * dhbn).sum(0), dhbn.sum(0)"),
         "the gain is missing from dxhat"),
        # dgain and dbias returned in each other's places.
        (_fn(SCALE_SHIFT, "return gain * dhbn, dhbn.sum(0), (xhat * dhbn).sum(0)"),
         "dgain and dbias are swapped"),
        (_fn(SCALE_SHIFT, "return gain * dhbn, xhat * dhbn, dhbn"),
         "dgain and dbias are not summed over the batch"),
        (_fn(SCALE_SHIFT, "return gain * dhbn, (gain * dhbn).sum(0), dhbn.sum(0)"),
         "dgain used the gain instead of xhat"),
        # The sum is there; keepdim=True left (1, H): named as the shape, for dgain.
        (_fn(SCALE_SHIFT, KEPT), "dgain: on new inputs"),
        (_fn(SCALE_SHIFT, KEPT), "the sum is there, but keepdim=True (or an unsqueeze) left"),
        # Only dgain unsummed: the message is about dgain alone (dbias is right), and
        # the dgain-and-dbias slip is not named.
        (_fn(SCALE_SHIFT, DGAIN_UNSUMMED), "dgain: on new inputs"),
        (_fn(SCALE_SHIFT, DGAIN_UNSUMMED),
         "you forgot to sum over dimension 0 (the broadcast batch dimension)"),
        # Only dbias unsummed: the message is about dbias alone (dgain passed before it).
        (_fn(SCALE_SHIFT, DBIAS_UNSUMMED), "dbias: on new inputs"),
        (_fn(SCALE_SHIFT, DBIAS_UNSUMMED),
         "you forgot to sum over dimension 0 (the broadcast batch dimension)"),
    ],
    "l10-dinvstd": [
        (_fn("dinvstd(diff, dxhat)", "return dxhat * diff"), "the sum is missing: invstd"),
        (_fn("dinvstd(diff, dxhat)", "return (dxhat * diff).sum(0)"), "without keepdim=True"),
        # A mean for the sum: off by exactly 1/n.
        (_fn("dinvstd(diff, dxhat)", "return (dxhat * diff).mean(0, keepdim=True)"),
         "(the size of dimension 0 of diff): a mean where the gradient needs a sum"),
    ],
    "l10-dvar": [
        (_fn("dvar(var, dinvstd, eps)", "return -0.5 * dinvstd * (var + eps) ** -0.5"),
         "lowers the exponent by one"),
        (_fn("dvar(var, dinvstd, eps)", "return 0.5 * dinvstd * (var + eps) ** -1.5"),
         "the sign is lost"),
        (_fn("dvar(var, dinvstd, eps)", "return -0.5 * dinvstd * var**-1.5"), "eps is missing"),
    ],
    "l10-ddiff2": [
        (_fn("ddiff2(diff2, dvar)", "n = diff2.shape[0]\nreturn dvar.expand_as(diff2) / (n - 1)"),
         "Bessel's correction"),
        (_fn("ddiff2(diff2, dvar)", "return dvar.expand_as(diff2).clone()"), "1/n is missing"),
        (_fn("ddiff2(diff2, dvar)", "return dvar / diff2.shape[0]"), "not spread over the batch"),
    ],
    "l10-ddiff": [
        (_fn("ddiff(diff, invstd, dxhat, ddiff2)", "return dxhat * invstd"),
         "only the path through xhat"),
        (_fn("ddiff(diff, invstd, dxhat, ddiff2)", "return 2 * diff * ddiff2"),
         "only the path through diff2"),
        (_fn("ddiff(diff, invstd, dxhat, ddiff2)", "return dxhat * invstd + diff * ddiff2"),
         "factor 2 is missing"),
    ],
    "l10-dmean": [
        (_fn("dmean(ddiff)", "return -ddiff"), "the sum is missing: mean"),
        # Only keepdim=True missing.
        (_fn("dmean(ddiff)", "return -ddiff.sum(0)"), "a missing keepdim=True"),
        (_fn("dmean(ddiff)", "return ddiff.sum(0, keepdim=True)"), "the sign is lost: the mean"),
        # A mean for the sum: off by exactly 1/n.
        (_fn("dmean(ddiff)", "return -ddiff.mean(0, keepdim=True)"),
         "(the size of dimension 0 of ddiff): a mean where the gradient needs a sum"),
    ],
    "l10-dhpre": [
        (_fn("dhpre(ddiff, dmean)", "return ddiff"), "only the direct path is there: hpre"),
        (_fn("dhpre(ddiff, dmean)", "return ddiff + dmean"), "1/n is missing on the path"),
        (_fn("dhpre(ddiff, dmean)", "return ddiff + dmean / (len(ddiff) - 1)"),
         "Bessel's correction"),
    ],
    "l10-demb": [
        (_fn("demb(dxin, emb)", "return dxin[:, :-2].reshape(emb.shape)"),
         "the first columns were taken"),
        (_fn("demb(dxin, emb)",
             "n, tokens, dim = emb.shape\n"
             "return dxin[:, 2:].reshape(n, dim, tokens).transpose(1, 2)"),
         "went back in the wrong order"),
        # The concatenation undone, the view not: named as a view, not as keepdim.
        (_fn("demb(dxin, emb)", "return dxin[:, 2:]"),
         "(a view not undone: the gradient of x.view(...)"),
    ],
    "l10-predict-rows": [
        # Every row, as if the gradient were spread over the table.
        ("nonzero_rows_guess = (0, 1, 2, 3, 4)\n", "not quite"),
        # Only the row looked up twice.
        ("nonzero_rows_guess = (3,)\n", "not quite"),
        # One row too many, as a set.
        ("nonzero_rows_guess = {0, 1, 2, 3}\n", "not quite"),
    ],
    "l10-embedding": [
        (_fn(EMBEDDING, TABLE + "table[flat_ids] = flat_grads\nreturn table"),
         "keeps only one lookup's gradient"),
        # += through advanced indexing: told why it keeps one lookup, not that it assigned.
        (_fn(EMBEDDING, TABLE + "table[tokens] += demb\nreturn table"),
         "which is the same write with advanced indexing"),
        (_fn(EMBEDDING, TABLE + "return table.index_add_(0, tokens[:, 0], demb[:, 0])"),
         "only each point's first token"),
        (_fn(EMBEDDING, TABLE + "for i, row in enumerate(flat_ids.tolist()):\n"
                                "    table[row] = flat_grads[i]\nreturn table"),
         "keeps only one lookup's gradient"),
    ],
    "l10-predict-db1": [
        # The size of dW1's entries, as if a bias learned like a weight.
        ("db1_guess = 0.01\n", "not quite"),
    ],
    "l10-layernorm": [
        # Section 5's batch-norm algebra copied, statistics over the batch.
        (_fn(LAYERNORM, _norm(dim=0)), "over the batch (dim 0)"),
        (_fn(LAYERNORM, _norm(terms="features * g - normed * (g * normed).sum({dim}, keepdim=True)")),
         "path through the mean is missing"),
        (_fn(LAYERNORM, _norm(terms="features * g - g.sum({dim}, keepdim=True)")),
         "path through the variance is missing"),
        (_fn(LAYERNORM, _norm(g="dout")), "the gain is missing"),
        (_fn(LAYERNORM, _norm(count="(features - 1)")), "Bessel's correction"),
    ],
}
