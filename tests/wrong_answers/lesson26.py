"""Plausible wrong answers for the exercises of 26-attention-by-hand.ipynb.

Each fragment is part of the message only the right diagnosis gives: a mask forgotten
in backward is told why it matters once P is rebuilt, a softmax VJP without its row
sum is named, the head width read from the heads' dimension, a missing 1/sqrt(d) and a
transpose over the last two dimensions are named apart; in the blockwise backward, a
row sum over one block, a block's mask counted from 0, a forgotten last block and a dQ
overwritten are named, and the full (T, T) answer is refused for its size.
"""


def _fn(signature: str, body: str) -> str:
    """A whole solution cell: the function with the given body (indented lines)."""
    return f"def {signature}:\n" + "".join(f"    {line}\n" for line in body.strip("\n").split("\n"))


DSCORES = "dscores(S, lse, dP)"
HEADS = "attention_backward(Q, K, V, lse, dO)"
FLASH = "flash_backward(Q, K, V, O, lse, dO, block)"

# P rebuilt with the mask, then a softmax VJP written in {vjp}.
MASKED_P = ("P = torch.exp(S - lse).masked_fill(future_mask(len(S)), 0.0)\n"
            "return {vjp}")
ROW_SUM = "P * (dP - (dP * P).sum({how}))"

# The attention core for (B, H, T, d), with {width}, {mask}, {dS}, {dQ}, {dK}, {dV} as a slip
# writes them.
CORE = """d = {width}
P = torch.exp(Q @ K.mT / math.sqrt(d) - lse){mask}
dP = dO @ V.mT
dS = {dS}
return {dQ}, {dK}, {dV}"""
RIGHT = {"width": "Q.shape[-1]", "mask": ".masked_fill(future_mask(Q.shape[-2]), 0.0)",
         "dS": "P * (dP - (dP * P).sum(-1, keepdim=True))", "dQ": "dS @ K / math.sqrt(d)",
         "dK": "dS.mT @ Q / math.sqrt(d)", "dV": "P.mT @ dO"}


def _core(**slip: str) -> str:
    return _fn(HEADS, CORE.format(**(RIGHT | slip)))


# The blockwise backward, with {row}, {mask}, {blocks}, {dQ}, {dK} as a slip writes them.
BLOCKS = """T, scale = Q.shape[-2], Q.shape[-1] ** -0.5
row = (dO * O).sum(-1, keepdim=True)
dQ, dK, dV = torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)
for start in {blocks}:
    stop = min(start + block, T)
    P = torch.exp(Q @ K[..., start:stop, :].mT * scale - lse)
    P = P.masked_fill({mask}, 0.0)
    dP = dO @ V[..., start:stop, :].mT
    dS = P * (dP - {row})
    {dQ}
    dK[..., start:stop, :] = {dK}
    dV[..., start:stop, :] = P.mT @ dO
return dQ, dK, dV"""
BLOCK_RIGHT = {"row": "row", "mask": "torch.arange(start, stop) > torch.arange(T)[:, None]",
               "blocks": "range(0, T, block)", "dQ": "dQ += dS @ K[..., start:stop, :] * scale",
               "dK": "dS.mT @ Q * scale"}


def _blocks(**slip: str) -> str:
    return _fn(FLASH, BLOCKS.format(**(BLOCK_RIGHT | slip)))


WRONG = {
    "l26-predict-growth": [
        ('growth_guess = "x2"\n', "not quite"),
        ("growth_guess = 4\n", "is not one of the choices"),
    ],
    "l26-dscores": [
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
    "l26-heads": [
        (_core(width="Q.shape[1]"), "the number of heads"),
        (_core(dQ="dS @ K", dK="dS.mT @ Q"), "the 1/sqrt(d) is missing"),
        (_core(mask=""), "the mask is missing in backward"),
        (_core(dS="P * dP"), "the softmax's row sum is missing"),
        (_core(dK="dS @ Q / math.sqrt(d)"), "dK is missing dS's transpose"),
        (_core(dV="P @ dO"), "dV is missing P's transpose"),
        (_fn(HEADS, "return torch.zeros_like(Q), torch.zeros_like(K), torch.zeros_like(V)"),
         "hard-coded"),
    ],
    "l26-flash": [
        (_blocks(row="(dP * P).sum(-1, keepdim=True)"), "taken over one block of keys"),
        (_blocks(mask="torch.zeros(T, stop - start, dtype=torch.bool)"),
         "the causal mask is missing in the blocks"),
        (_blocks(mask="torch.arange(stop - start) > torch.arange(T)[:, None]"),
         "counted its keys from 0"),
        (_blocks(blocks="range(0, T - T % block, block)"), "the last, shorter block"),
        (_blocks(dQ="dQ = dS @ K[..., start:stop, :] * scale"), "dQ holds the last block's"),
        (_blocks(dK="dS.mT @ Q"), "the 1/sqrt(d) is missing from dK"),
        (_blocks(dK="dS.mT @ Q", dQ="dQ += dS @ K[..., start:stop, :]"),
         "the 1/sqrt(d) is missing from dQ and dK"),
        # The block's mask cut from the (T, T) one: refused for its size.
        (_blocks(mask="future_mask(T)[:, start:stop]"), "which this exercise asks you to do"),
        # Exercise 2's answer, whole rows at once: refused for its size.
        (_fn(FLASH, "S = Q @ K.mT / math.sqrt(Q.shape[-1])\n"
                    "P = torch.exp(S - lse).masked_fill(future_mask(Q.shape[-2]), 0.0)\n"
                    "dP = dO @ V.mT\n"
                    "dS = P * (dP - (dP * P).sum(-1, keepdim=True)) / math.sqrt(Q.shape[-1])\n"
                    "return dS @ K, dS.mT @ Q, P.mT @ dO"), "a tensor of (T, T) entries"),
    ],
}
