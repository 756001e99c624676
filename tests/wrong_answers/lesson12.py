"""Plausible wrong answers for the exercises of 12-backprop-through-a-classifier.ipynb.

Each fragment is part of the message only the right diagnosis gives: a slip must be
named as the slip it is (a correct sum is never told it forgot to sum, a `+=` through
advanced indexing is told why it keeps one lookup, a forgotten gain is named). An
exercise returns the gradient at every tensor of its lines, so a slip early in them
carries into the later gradients: each answer below makes one slip and derives the rest
right from it, as a learner would.
"""


def _fn(signature: str, body: str) -> str:
    """A whole solution cell: the function with the given body (indented lines)."""
    return f"def {signature}:\n" + "".join(f"    {line}\n" for line in body.strip("\n").split("\n"))


PICK_LOG = "pick_log_backward(probs, y)"
PICK = ("n = len(probs)\ndlogprobs = torch.zeros_like(probs)\n"
        "dlogprobs[torch.arange(n), y] = {value}\nreturn dlogprobs, {dprobs}")


def _pick(value="-1.0 / n", dprobs="dlogprobs / probs"):
    return _fn(PICK_LOG, PICK.format(value=value, dprobs=dprobs))


NORMALISE = "normalise_backward(counts, counts_sum, dprobs)"


def _normalise(dinv="(dprobs * counts).sum(1, keepdim=True)", dsum="-dinv / counts_sum**2",
               dcounts="dprobs / counts_sum + dsum"):
    return _fn(NORMALISE, f"dinv = {dinv}\ndsum = {dsum}\nreturn dinv, dsum, {dcounts}")


SHIFT = "shift_backward(logits, counts, dcounts)"


def _shift(dshifted="dcounts * counts", dmaxes="-dshifted.sum(1, keepdim=True)",
           dlogits="dshifted + largest * dmaxes"):
    return _fn(SHIFT, f"dshifted = {dshifted}\ndmaxes = {dmaxes}\n"
                      "largest = F.one_hot(logits.argmax(1), num_classes=logits.shape[1])\n"
                      f"return dshifted, dmaxes, {dlogits}")


WEIGHTED = "weighted_dlogits(logits, y, weight)"


def _weighted(scale="w[:, None]", total="w.sum()"):
    return _fn(WEIGHTED, "w = weight[y]\nprobs = torch.softmax(logits, dim=1)\n"
                         "target = F.one_hot(y, num_classes=logits.shape[1])\n"
                         f"return {scale} * (probs - target) / {total}")


SCALE = "scale_normalise_backward(diff, invstd, gain, dhbn)"


def _scale(dxhat="gain * dhbn", dgain="(dhbn * xhat).sum(0)", dbias="dhbn.sum(0)",
           dinvstd="(dxhat * diff).sum(0, keepdim=True)", order="dxhat, dgain, dbias, dinvstd"):
    return _fn(SCALE, f"xhat = diff * invstd\ndxhat = {dxhat}\ndgain = {dgain}\n"
                      f"dbias = {dbias}\ndinvstd = {dinvstd}\nreturn {order}")


CENTRE = "centre_backward(diff, var, eps, dxhat, dinvstd)"


def _centre(dvar="-0.5 * dinvstd * (var + eps) ** -1.5", ddiff2="dvar.expand_as(diff) / n",
            ddiff="dxhat * (var + eps) ** -0.5 + 2 * diff * ddiff2",
            dmean="-ddiff.sum(0, keepdim=True)", dhpre="ddiff + dmean.expand_as(ddiff) / n"):
    return _fn(CENTRE, f"n = diff.shape[0]\ndvar = {dvar}\nddiff2 = {ddiff2}\nddiff = {ddiff}\n"
                       f"dmean = {dmean}\ndhpre = {dhpre}\n"
                       "return dvar, ddiff2, ddiff, dmean, dhpre")


EMBEDDING = "embedding_backward(dxin, tokens, num_rows)"


def _embedding(demb="dxin[:, 2:].reshape(n, per_point, -1)",
               add="dC.index_add_(0, tokens.flatten(), demb.reshape(-1, dim))", back="demb"):
    return _fn(EMBEDDING, f"n, per_point = tokens.shape\ndemb = {demb}\n"
                          "dim = (dxin.shape[1] - 2) // per_point\n"
                          "dC = torch.zeros(num_rows, dim, dtype=dxin.dtype)\n"
                          f"{add}\nreturn {back}, dC")


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
    "l12-pick-log": [
        (_pick(value="-1.0"), "1/n is missing"),
        (_pick(value="1.0 / n"), "the sign is flipped"),
        (_fn(PICK_LOG, "dlogprobs = torch.full_like(probs, -1.0 / len(probs))\n"
                       "return dlogprobs, dlogprobs / probs"), "only the picked entry of each row"),
        (_pick(dprobs="dlogprobs * probs"), "the derivative of log(p) is 1/p"),
        # The spiral's N = 300 hard-wired.
        (_pick(value="-1.0 / 300"), "mismatch"),
    ],
    "l12-normalise": [
        (_normalise(dinv="dprobs * counts"),
         "the sum is missing: counts_sum_inv has one number per row"),
        (_normalise(dinv="(dprobs * counts).sum(0, keepdim=True)"), "summed over the batch (dim 0)"),
        (_normalise(dsum="dinv / counts_sum**2"), "the sign is lost"),
        (_normalise(dsum="-dinv / counts_sum"), "the power rule gives -s**-2"),
        # = where += was meant: the path through counts_sum is dropped.
        (_normalise(dcounts="dprobs / counts_sum"), "only the path through probs"),
        # = where += was meant, the other way round: the second write replaces the first.
        (_fn(NORMALISE, "dinv = (dprobs * counts).sum(1, keepdim=True)\n"
                        "dsum = -dinv / counts_sum**2\n"
                        "dcounts = torch.zeros_like(counts)\n"
                        "dcounts[:] = dprobs / counts_sum\n"
                        "dcounts[:] = dsum\n"
                        "return dinv, dsum, dcounts"), "only the path through counts_sum"),
    ],
    "l12-predict-maxes": [
        # The scale the question gives, taken for the answer.
        ("maxes_guess = 0.003\n", "not quite"),
        ("maxes_guess = ...\n", "no prediction yet"),
    ],
    "l12-shift": [
        (_shift(dshifted="dcounts"), "exp's local derivative is missing"),
        (_shift(dmaxes="-dshifted"), "the sum is missing: logit_maxes"),
        (_shift(dmaxes="dshifted.sum(1, keepdim=True)"), "logit_maxes is subtracted"),
        # The spiral's ~0 taken for the rule: zeros whatever arrives.
        (_shift(dmaxes="torch.zeros(len(dshifted), 1, dtype=dshifted.dtype)"),
         "dlogit_maxes was set to 0"),
        # The max path dropped because its gradient is ~0 on the spiral.
        (_shift(dlogits="dshifted"), "dlogits has only the direct path"),
        # The max's gradient broadcast over the row, as if every entry had been the max.
        (_shift(dlogits="dshifted + dmaxes"), "went to every entry of the row"),
        # one_hot without num_classes: a column short when the last class is no row's max.
        (_shift().replace(", num_classes=logits.shape[1]", ""), "raised RuntimeError"),
    ],
    "l12-weighted": [
        (_weighted(total="len(y)"), "not by the number of rows n"),
        (_weighted(total="weight.sum()"), "divided by the sum of every class's weight"),
        (_weighted(scale="weight[None, :]"), "weighted by its own column's class"),
        (_weighted(scale="1"), "the weights are missing from the rows"),
        # The fused form of section 3 as it stands.
        (_weighted(scale="1", total="len(y)"), "the class weights are left out"),
        # one_hot without num_classes: a column short when the last class is no row's target.
        (_weighted().replace(", num_classes=logits.shape[1]", ""), "raised RuntimeError"),
    ],
    "l12-scale-normalise": [
        (_scale(dxhat="dhbn"), "the gain is missing from dxhat"),
        # dgain and dbias returned in each other's places.
        (_scale(order="dxhat, dbias, dgain, dinvstd"), "dgain and dbias are swapped"),
        (_scale(dgain="dhbn * xhat", dbias="dhbn"), "dgain and dbias are not summed over the batch"),
        (_scale(dgain="(dhbn * gain).sum(0)"), "dgain used the gain instead of xhat"),
        # The sum is there; keepdim=True left (1, H): named as the shape, for dgain.
        (_scale(dgain="(dhbn * xhat).sum(0, keepdim=True)"),
         "the sum is there, but keepdim=True (or an unsqueeze) left"),
        # Only dgain unsummed: the message is about dgain alone (dbias is right), and the
        # dgain-and-dbias slip is not named.
        (_scale(dgain="dhbn * xhat"), "dgain: on new inputs"),
        (_scale(dgain="dhbn * xhat"),
         "you forgot to sum over dimension 0 (the broadcast batch dimension)"),
        (_scale(dinvstd="dxhat * diff"), "the sum for dinvstd is missing"),
        (_scale(dinvstd="(dxhat * diff).sum(0)"), "a missing keepdim=True"),
        # A mean for the sum: off by exactly 1/n.
        (_scale(dinvstd="(dxhat * diff).mean(0, keepdim=True)"),
         "(the size of dimension 0 of diff): a mean where the gradient needs a sum"),
        (_scale(dinvstd="(dxhat * xhat).sum(0, keepdim=True)"), "the factor beside invstd is diff"),
        (_scale(dinvstd="(dhbn * diff).sum(0, keepdim=True)"), "dinvstd was made from dhbn"),
    ],
    "l12-centre": [
        (_centre(dvar="-0.5 * dinvstd * (var + eps) ** -0.5"), "lowers the exponent by one"),
        (_centre(dvar="0.5 * dinvstd * (var + eps) ** -1.5"), "the sign of dvar is lost"),
        (_centre(dvar="-0.5 * dinvstd * var**-1.5"), "eps is missing"),
        (_centre(ddiff2="dvar.expand_as(diff) / (n - 1)"), "Bessel's correction"),
        (_centre(ddiff2="dvar.expand_as(diff).clone()"), "1/n is missing from ddiff2"),
        (_centre(ddiff2="dvar / n"), "ddiff2 is not spread over the batch"),
        (_centre(ddiff="dxhat * (var + eps) ** -0.5"), "only the path through xhat"),
        (_centre(ddiff="2 * diff * ddiff2"), "only the path through diff2"),
        (_centre(ddiff="dxhat * (var + eps) ** -0.5 + diff * ddiff2"), "factor 2 is missing"),
        (_centre(dmean="-ddiff"), "the sum for dmean is missing"),
        # Only keepdim=True missing: dhpre broadcasts it right, dmean is told its shape.
        (_centre(dmean="-ddiff.sum(0)"), "a missing keepdim=True"),
        (_centre(dmean="ddiff.sum(0, keepdim=True)"), "the sign of dmean is lost"),
        # A mean for the sum: off by exactly 1/n.
        (_centre(dmean="-ddiff.mean(0, keepdim=True)"),
         "(the size of dimension 0 of diff): a mean where the gradient needs a sum"),
        (_centre(dhpre="ddiff"), "dhpre has only the direct path"),
        (_centre(dhpre="ddiff + dmean"), "1/n is missing on dhpre's path"),
        (_centre(dhpre="ddiff + dmean / (n - 1)"), "Bessel's correction"),
    ],
    "l12-embedding": [
        (_embedding(add="dC[tokens.flatten()] = demb.reshape(-1, dim)"),
         "keeps only one lookup's gradient"),
        # += through advanced indexing: told why it keeps one lookup, not that it assigned.
        (_embedding(add="dC[tokens] += demb"), "which is the same write with advanced indexing"),
        (_embedding(add="dC.index_add_(0, tokens[:, 0], demb[:, 0])"), "only each point's first token"),
        (_embedding(add="for i, row in enumerate(tokens.flatten().tolist()):\n"
                        "    dC[row] = demb.reshape(-1, dim)[i]"),
         "keeps only one lookup's gradient"),
        (_embedding(demb="dxin[:, :-2].reshape(n, per_point, -1)"), "the first columns were taken"),
        (_embedding(demb="dxin[:, 2:].reshape(n, -1, per_point).transpose(1, 2)"),
         "went back in the wrong order"),
        # The concatenation undone, the view not: named as a view, not as keepdim.
        (_embedding(back="dxin[:, 2:]"), "(a view not undone: the gradient of x.view(...)"),
        # The table sized from the tokens: a row short when its last row is never looked up.
        (_embedding(add="dC = F.one_hot(tokens.flatten()).to(dxin.dtype).T @ "
                        "demb.reshape(-1, dim)"), "dC has shape"),
        (_embedding(add="dC = torch.zeros(int(tokens.max()) + 1, dim, dtype=dxin.dtype)\n"
                        "dC.index_add_(0, tokens.flatten(), demb.reshape(-1, dim))"),
         "dC has shape"),
    ],
    "l12-predict-db1": [
        # The size of dW1's entries, as if a bias learned like a weight.
        ("db1_guess = 0.01\n", "not quite"),
    ],
    "l12-layernorm": [
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
