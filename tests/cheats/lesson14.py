"""Shortcuts for the exercise of 14-recording-on-and-off.ipynb: each must fail its check
(the lesson runs with its hidden tests), naming what it did. See tests/lessons/test_exercises.py.

The exercise is a method check (overlapping truncation windows), so the shortcuts are a
numerical estimate and an answer that fits only the visible check."""

# A table of the visible check's gradients, looked up by the sequence: nothing on the hidden seed.
WINDOWS_TABLE = '''from backproplab.course.exercises import lesson14 as _lesson

_gen = torch.Generator().manual_seed(0)
_table = {}
for _leftover in (True, True, False):
    _W, _xs, _k1, _k2 = _lesson.overlap_case(_gen, _leftover)
    _table[str(_xs.tolist())] = _lesson.window_gradients(_W, _xs, _k1, _k2)


def tbptt_gradients(W, xs, k1, k2):
    return _table[str(xs.tolist())]
'''
# A numerical estimate of each window's gradient (central differences): close, not exact.
WINDOWS_ESTIMATE = """def tbptt_gradients(W, xs, k1, k2):
    states = [torch.zeros(W.shape[0], dtype=W.dtype)]
    for x_t in xs:
        states.append(torch.tanh(W @ states[-1] + x_t))
    grads = []
    for t in range(k1, len(xs) + 1, k1):
        start = max(0, t - k2)

        def window_loss(V):
            h, loss = states[start], 0
            for s in range(start + 1, t + 1):
                h = torch.tanh(V @ h + xs[s - 1])
                if s > t - k1:
                    loss = loss + (h ** 2).sum()
            return loss

        g = torch.zeros_like(W)
        for i in range(W.shape[0]):
            for j in range(W.shape[1]):
                step = torch.zeros_like(W)
                step[i, j] = 1e-5
                g[i, j] = (window_loss(W + step) - window_loss(W - step)) / 2e-5
        grads.append(g)
    return grads
"""
CHEATS = {
    "l14-windows": [
        (WINDOWS_TABLE, "raised KeyError"),
        (WINDOWS_ESTIMATE, "relative to the expected one"),
    ],
}
