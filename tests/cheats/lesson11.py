"""Shortcuts for the exercises of 11-pitfalls-and-tools.ipynb: each must fail its check
(the lesson runs with its hidden tests), naming what it did. See tests/lessons/test_exercises.py.

Both exercises are method checks (a hook, a norm with a guarded backward), so the
shortcuts are torch's own guarded norms and answers that fit only the visible check."""

# torch's guarded norms, reached by other names.
VECTOR_NORM = "def safe_norm(v):\n    return torch.linalg.vector_norm(v, dim=1)\n"
CDIST = ("def safe_norm(v):\n"
         "    return torch.cdist(v[:, None, :], torch.zeros_like(v)[:, None, :])[:, 0, 0]\n")

# A table of the visible check's gradients: fine on seed 0, nothing on the hidden seed.
HOOK_TABLE = '''from backproplab.lessons import lesson11 as _lesson

_table = [(g, m, g * (m / g.norm()) if g.norm() > m else g) for g, m in _lesson.clip_cases(0)]


def clip_hook(max_norm):
    def hook(grad):
        for known, limit, answer in _table:
            if limit == max_norm and known.shape == grad.shape and torch.allclose(known, grad):
                return answer
        return grad
    return hook
'''
NORM_TABLE = '''from backproplab.lessons import lesson11 as _lesson

_known = [v.clone() for v in _lesson.norm_batches(0)]


def safe_norm(v):
    for known in _known:
        if known.shape == v.shape and torch.equal(known, v.detach()):
            zero = known.abs().sum(dim=1) == 0
            inner = torch.where(zero, torch.ones_like(v[:, 0]), (v**2).sum(dim=1))
            return torch.where(zero, torch.zeros_like(inner), inner.sqrt())
    return torch.linalg.vector_norm(v, dim=1)
'''

CHEATS = {
    "l11-reverse": [
        (HOOK_TABLE, "went on unchanged"),
    ],
    "l11-safe-sqrt": [
        (VECTOR_NORM, "torch's norm"),
        (CDIST, "torch's norm"),
        (NORM_TABLE, "torch's norm"),
    ],
}
