"""Plausible wrong answers for the exercises of 11-a-tensor-engine-of-your-own.ipynb.

Each entry: (solution-cell source, a fragment the check's message must contain).
tests/lessons/test_facts_lesson11.py runs them on other seeds too: every kept slip
fails on every seed, named the same way.
"""

# Exercise 1's solution, the two gradient lines to fill in (and the rest to change).
MATMUL = '''def broadcast_matmul(a, b):
    def rule(g):
        A, B = a.data, b.data
        if B.dim() == 1:
            B, g = B.unsqueeze(-1), g.unsqueeze(-1)
        if A.dim() == 1:
            A, g = A.unsqueeze(0), g.unsqueeze(-2)
        {grad_a}
        {grad_b}
        return grad_a, grad_b

    return {out}
'''
RIGHT_A = "grad_a = (g @ B.mT).sum_to_size(A.shape).reshape(a.shape)"
RIGHT_B = "grad_b = (A.mT @ g).sum_to_size(B.shape).reshape(b.shape)"
OUT = 'Tensor(a.data @ b.data, (a, b), "@", rule)'


def matmul(grad_a=RIGHT_A, grad_b=RIGHT_B, out=OUT):
    return MATMUL.format(grad_a=grad_a, grad_b=grad_b, out=out)


# Summed back the learner's way, without keepdim on the size-1 dimensions.
NO_KEEPDIM = '''def sum_back(full, shape):
    extra = full.dim() - len(shape)
    if extra:
        full = full.sum(dim=tuple(range(extra)))
    ones = tuple(i for i, n in enumerate(shape) if n == 1 and full.shape[i] != 1)
    return full.sum(dim=ones) if ones else full


'''

# Exercise 2's solution, with lines to change.
CUMSUM = '''def cumsum(a, dim):
    def rule(g):
        return ({grad},)

    return {out}
'''
CUMSUM_GRAD = "g.flip(dim).cumsum(dim).flip(dim)"
CUMSUM_OUT = 'Tensor(a.data.cumsum(dim), (a,), "cumsum", rule)'


def cumsum(grad=CUMSUM_GRAD, out=CUMSUM_OUT):
    return CUMSUM.format(grad=grad, out=out)


# Exercise 3's solution, with lines to change.
AMAX = '''def amax(a, dim, keepdim=False):
    top = a.data.amax(dim, keepdim=True)
    winners = (a.data == top).to(a.data.dtype)
    {share}

    def rule(g):
        {unsqueeze}
        return (g * share,)

    return {out}
'''
SHARE = "share = winners / winners.sum(dim, keepdim=True)"
UNSQUEEZE = "g = g if keepdim else g.unsqueeze(dim)"
AMAX_OUT = 'Tensor(a.data.amax(dim, keepdim=keepdim), (a,), "amax", rule)'


def amax(share=SHARE, unsqueeze=UNSQUEEZE, out=AMAX_OUT):
    return AMAX.format(share=share, unsqueeze=unsqueeze, out=out)


WRONG = {
    "l11-predict-arrivals": [
        ("arrivals_guess = 2\n", "not quite"),  # one per user: the product counted once
        ("arrivals_guess = 1\n", "not quite"),
        ("arrivals_guess = 4\n", "not quite"),
    ],
    "l11-matmul": [
        # no sum back to a's shape
        (matmul(grad_a="grad_a = (g @ B.mT).squeeze(-2) if a.data.dim() == 1 else g @ B.mT"),
         "a.grad keeps the batch dimensions"),
        # ... nor to b's
        (matmul(grad_b="grad_b = (A.mT @ g).squeeze(-1) if b.data.dim() == 1 else A.mT @ g"),
         "b.grad keeps the batch dimensions"),
        # a's size-1 dimensions summed away
        (NO_KEEPDIM + matmul(grad_a="grad_a = sum_back(g @ B.mT, A.shape)\n"
                                    "        if a.data.dim() == 1:\n"
                                    "            grad_a = grad_a.squeeze(-2)"),
         "a.grad lost a's size-1 dimensions"),
        # b's
        (NO_KEEPDIM + matmul(grad_b="grad_b = sum_back(A.mT @ g, B.shape)\n"
                                    "        if b.data.dim() == 1:\n"
                                    "            grad_b = grad_b.squeeze(-1)"),
         "b.grad lost b's size-1 dimensions"),
        # a summed over every batch dimension, as for a shared weight
        (matmul(grad_a="full = g @ B.mT\n"
                       "        grad_a = full.sum(dim=tuple(range(full.dim() - 2))) "
                       "if full.dim() > 2 else full\n"
                       "        if a.data.dim() == 1:\n"
                       "            grad_a = grad_a.squeeze(-2)"),
         "a has batch dimensions of its own"),
        # b's
        (matmul(grad_b="full = A.mT @ g\n"
                       "        grad_b = full.sum(dim=tuple(range(full.dim() - 2))) "
                       "if full.dim() > 2 else full\n"
                       "        if b.data.dim() == 1:\n"
                       "            grad_b = grad_b.squeeze(-1)"),
         "b has batch dimensions of its own"),
        # a 1-D a's row dimension kept
        (matmul(grad_a="grad_a = (g @ B.mT).sum_to_size(A.shape)"), "a is 1-D"),
        # a 1-D b's column dimension kept
        (matmul(grad_b="grad_b = (A.mT @ g).sum_to_size(B.shape)"), "b is 1-D"),
        # the lesson's 2-D product under the new name
        ("broadcast_matmul = matmul\n", "expected two 2-D Tensors"),
        # a torch tensor returned: nothing for backward to follow
        (matmul(out="a.data @ b.data"), "returned a torch tensor"),
        # a node without parents
        (matmul(out='Tensor(a.data @ b.data, (), "@", rule)'), "without a rule or parents"),
        # a 1-D a's row dropped with squeeze(): where K = 1 it drops a's own (1,) too
        (matmul(grad_a="grad_a = (g @ B.mT).sum_to_size(A.shape)\n"
                       "        if a.data.dim() == 1:\n"
                       "            grad_a = grad_a.squeeze()"),
         "a.grad has shape (); expected (1,)"),
        # a 1-D b's column dropped with squeeze(): where K = 1 it drops b's own (1,) too
        (matmul(grad_b="grad_b = (A.mT @ g).sum_to_size(B.shape)\n"
                       "        if b.data.dim() == 1:\n"
                       "            grad_b = grad_b.squeeze()"),
         "b.grad has shape (); expected (1,)"),
        # a 1-D a's row put back in g at 1, not -2: right only against a stack of matrices
        (matmul().replace("g.unsqueeze(-2)", "g.unsqueeze(1)"), "raised RuntimeError"),
        # b's missing batch dimensions summed once (an if where a loop belongs)
        (matmul(grad_b="grad_b = A.mT @ g\n"
                       "        if grad_b.dim() > B.dim():\n"
                       "            grad_b = grad_b.sum(0)\n"
                       "        for i, n in enumerate(B.shape):\n"
                       "            if n == 1 and grad_b.shape[i] != 1:\n"
                       "                grad_b = grad_b.sum(i, keepdim=True)\n"
                       "        grad_b = grad_b.reshape(b.shape)"),
         "raised RuntimeError"),
        # a 1-D a's gradient summed over the first batch dimension only, as if b were 3-D
        (matmul(grad_a="full = g @ B.mT\n"
                       "        if a.data.dim() == 1 and full.dim() > 2:\n"
                       "            grad_a = full.sum(0).reshape(a.shape)\n"
                       "        else:\n"
                       "            grad_a = full.sum_to_size(A.shape).reshape(a.shape)"),
         "raised RuntimeError"),
    ],
    "l11-cumsum": [
        # the forward's own direction: the sums from the first entry on
        (cumsum(grad="g.cumsum(dim)"), "summed from the first entry onwards"),
        # the flip before, not after
        (cumsum(grad="g.flip(dim).cumsum(dim)"), "flip the result back"),
        # the total minus the sums so far: g_j itself left out
        (cumsum(grad="g.sum(dim, keepdim=True) - g.cumsum(dim)"), "own term is missing"),
        # every output taken to use every entry
        (cumsum(grad="g.sum(dim, keepdim=True).expand(a.shape)"), "whole sum of g"),
        # g passed through, as for an addition
        (cumsum(grad="g"), "x.grad"),
        # flipped along the first dimension whatever dim is
        (cumsum(grad="g.flip(0).cumsum(dim).flip(0)"), "x.grad"),
        # the forward along the last dimension whatever dim is
        (cumsum(out='Tensor(a.data.cumsum(-1), (a,), "cumsum", rule)'), "the forward"),
        # a torch tensor returned: nothing for backward to follow
        (cumsum(out="a.data.cumsum(dim)"), "returned a torch tensor"),
        # a node without parents
        (cumsum(out='Tensor(a.data.cumsum(dim), (), "cumsum", rule)'),
         "without a rule or parents"),
    ],
    "l11-amax": [
        # every tied entry gets all of g
        (amax(share="share = winners"), "every tied entry got the whole gradient"),
        # divided as for a mean
        (amax(share="share = winners / a.data.shape[dim]"), "divided by the size"),
        # all to the first maximum, as max(dim) does
        (amax(share="share = torch.zeros_like(a.data).scatter_(\n"
                    "        dim, a.data.argmax(dim, keepdim=True), 1.0)"),
         "max(dim=...)'s convention"),
        # keepdim's effect on the forward forgotten
        (amax(out='Tensor(a.data.amax(dim, keepdim=True), (a,), "amax", rule)'),
         "the forward is wrong"),
        # no parent: backward cannot reach a
        (amax(out='Tensor(a.data.amax(dim, keepdim=keepdim), (), "amax", rule)'),
         "without a rule or parents"),
        # a negative dim made positive with g's rank, which lacks the reduced dimension
        (amax(unsqueeze="d = dim + g.dim() if dim < 0 else dim\n"
                        "        g = g if keepdim else g.unsqueeze(d)"),
         "x.grad: raised RuntimeError"),
        # the kept shape sliced from a.shape at dim: wrong for a negative dim
        (amax(unsqueeze="if not keepdim:\n"
                        "            g = g.reshape(a.shape[:dim] + (1,) + a.shape[dim + 1:])"),
         "x.grad: raised RuntimeError"),
        # g[:, None]: the reduced dimension put back at 1 whatever dim is
        (amax(unsqueeze="g = g if keepdim else g[:, None]"), "x.grad: raised RuntimeError"),
        # g.unsqueeze(1) likewise
        (amax(unsqueeze="g = g if keepdim else g.unsqueeze(1)"), "x.grad: raised RuntimeError"),
    ],
}
