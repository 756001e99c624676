"""Plausible wrong answers for the exercises of 11-pitfalls-and-tools.ipynb."""

HOOK = "def clip_hook(max_norm):\n    def hook(grad):\n{}\n    return hook\n"

WRONG = {
    "l11-predict-inplace": [
        ('failing_cell = "add"\n', "not quite"),
    ],
    "l11-predict-pileup": [
        # One hook only: the piling up overlooked.
        ("step3_grad_guess = 6.0\n", "not quite"),
    ],
    "l11-reverse": [
        # Clamps each entry instead of rescaling the whole gradient.
        (HOOK.format("        return grad.clamp(-max_norm, max_norm)"), "clip_grad_value_"),
        # Rescales into a new name and returns nothing: the gradient goes on unchanged.
        (HOOK.format("        grad = grad * min(1.0, max_norm / grad.norm().item())"),
         "went on unchanged"),
        # Always rescales to max_norm, also when the gradient is small.
        (HOOK.format("        return grad * (max_norm / grad.norm())"), "already below max_norm"),
        # Normalises to 1.
        (HOOK.format("        norm = grad.norm()\n"
                     "        return grad / norm if norm > max_norm else grad"),
         "norm 1 instead of max_norm"),
        # Changes the gradient in place (and returns it).
        (HOOK.format("        norm = grad.norm()\n"
                     "        if norm > max_norm:\n"
                     "            grad.mul_(max_norm / norm)\n"
                     "        return grad"),
         "in place"),
        # Returns the hook's result, not the hook.
        ("def clip_hook(max_norm):\n    return lambda grad: grad\n" "x = 1\n"
         "clip_hook = clip_hook(1.0)(torch.ones(3))\n", "expected the function"),
    ],
    "l11-safe-sqrt": [
        # The plain norm: its backward guards zero, which is the point of the exercise.
        ("def safe_norm(v):\n    return v.norm(dim=1)\n", "torch's norm"),
        ("def safe_norm(v):\n    return ((v**2).sum(dim=1)).sqrt()\n", "NaN"),
        # The lesson's where, but around the sqrt only: sqrt(0) still meets backward.
        (
            "def safe_norm(v):\n"
            "    squared = (v**2).sum(dim=1)\n"
            "    return torch.where(squared > 0, squared.sqrt(), torch.zeros_like(squared))\n",
            "where around the sqrt alone",
        ),
        # The squared norm instead of the norm.
        ("def safe_norm(v):\n    return (v**2).sum(dim=1)\n", "squared norms"),
        # An epsilon inside the sqrt: finite, but the norm of zero is not 0.
        ("def safe_norm(v):\n    return ((v**2).sum(dim=1) + 1e-12).sqrt()\n", "not 0"),
        # Detached: no gradient at all.
        ("def safe_norm(v):\n    return ((v**2).sum(dim=1)).sqrt().detach()\n", "no graph"),
    ],
}
