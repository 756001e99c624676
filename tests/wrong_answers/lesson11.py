"""Plausible wrong answers for the exercises of 11-a-tensor-engine-of-your-own.ipynb.

Each entry: (solution-cell source, a fragment the check's message must contain).
tests/lessons/test_facts_lesson20.py runs them on other seeds too: every kept slip
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
COUNTING = '''def backward_by_counting(root):
    waiting, nodes, todo = {{}}, {{id(root): root}}, [root]
    while todo:
        for parent in todo.pop().parents:
            {count}
            if id(parent) not in nodes:
                nodes[id(parent)] = parent
                todo.append(parent)
    arrived = {{id(root): torch.ones_like(root.data)}}
    ready = [root]
    while ready:
        node = ready.pop()
        g = arrived.pop(id(node))
        if node.rule is None:
            {leaf}
            continue
        for parent, share in zip(node.parents, node.rule(g), strict=True):
            key = id(parent)
            {add}
            waiting[key] -= 1
            if waiting[key] == 0:
                ready.append(parent)
'''
COUNT = "waiting[id(parent)] = waiting.get(id(parent), 0) + 1"
LEAF = "node.grad = g if node.grad is None else node.grad + g"
ADD = "arrived[key] = arrived[key] + share if key in arrived else share"


def counting(count=COUNT, leaf=LEAF, add=ADD):
    return COUNTING.format(count=count, leaf=leaf, add=add)


# Each node counted once per user, however many of its inputs it is.
USERS = '''def backward_by_counting(root):
    users, nodes, todo = {}, {id(root): root}, [root]
    while todo:
        node = todo.pop()
        for parent in node.parents:
            users.setdefault(id(parent), set()).add(id(node))
            if id(parent) not in nodes:
                nodes[id(parent)] = parent
                todo.append(parent)
    waiting = {key: len(found) for key, found in users.items()}
    arrived = {id(root): torch.ones_like(root.data)}
    ready = [root]
    while ready:
        node = ready.pop()
        g = arrived.pop(id(node))
        if node.rule is None:
            node.grad = g if node.grad is None else node.grad + g
            continue
        for parent, share in zip(node.parents, node.rule(g), strict=True):
            key = id(parent)
            arrived[key] = arrived[key] + share if key in arrived else share
            waiting[key] -= 1
            if waiting[key] == 0:
                ready.append(parent)
'''

# Gradients sent down every path, a node run once per arriving gradient.
PER_PATH = '''def backward_by_counting(root):
    todo = [(root, torch.ones_like(root.data))]
    while todo:
        node, g = todo.pop()
        if node.rule is None:
            node.grad = g if node.grad is None else node.grad + g
            continue
        for parent, share in zip(node.parents, node.rule(g), strict=True):
            todo.append((parent, share))
'''

RECURSIVE = '''def backward_by_counting(root):
    waiting = {}

    def count(node):
        for parent in node.parents:
            waiting[id(parent)] = waiting.get(id(parent), 0) + 1
            if waiting[id(parent)] == 1:
                count(parent)

    count(root)
    arrived = {id(root): torch.ones_like(root.data)}

    def run(node):
        g = arrived.pop(id(node))
        if node.rule is None:
            node.grad = g if node.grad is None else node.grad + g
            return
        for parent, share in zip(node.parents, node.rule(g), strict=True):
            key = id(parent)
            arrived[key] = arrived[key] + share if key in arrived else share
            waiting[key] -= 1
            if waiting[key] == 0:
                run(parent)

    run(root)
'''

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
    ],
    "l11-backward": [
        # = where the gradients must add up
        (counting(add="arrived[key] = share"), "only one of the"),
        # distinct users counted, not arrows: y * y counts once
        (USERS, "before every gradient for it had arrived"),
        # a node run as soon as its first gradient arrives
        (counting().replace("            if waiting[key] == 0:\n                ready.append(parent)",
                            "            if key not in queued:\n"
                            "                queued.add(key)\n"
                            "                ready.append(parent)")
         .replace("    ready = [root]\n", "    ready, queued = [root], set()\n"),
         "before every gradient for it had arrived"),
        # one run per arriving gradient (every path walked)
        (PER_PATH, "ran 2 times"),
        # leaves set straight from the rule, one share at a time
        (counting(add="if parent.rule is None:\n"
                      "                parent.grad = share\n"
                      "                continue\n"
                      "            arrived[key] = arrived[key] + share if key in arrived "
                      "else share"),
         "only one of the"),
        # recursive
        (RECURSIVE, "recursive"),
        # recursive, with the limit raised out of the way
        ("import sys\n\nsys.setrecursionlimit(100_000)\n\n\n" + RECURSIVE, "however high"),
        # the leaves forgotten
        (counting(leaf="pass"), "has no .grad"),
        # in place: a rule's broadcast view written into
        (counting(add="if key in arrived:\n"
                      "                arrived[key] += share\n"
                      "            else:\n"
                      "                arrived[key] = share"), "adds in place"),
        # the pass started from zeros
        (counting().replace("torch.ones_like(root.data)}", "torch.zeros_like(root.data)}"),
         "did not start from ones"),
        # the lesson's pass
        ("def backward_by_counting(root):\n    backward(root)\n", "lesson's own backward"),
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
    ],
}
