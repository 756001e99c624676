"""Plausible wrong answers for the exercises of 11-pitfalls-and-tools.ipynb."""

WRONG = {
    "l11-predict-inplace": [
        ('failing_cell = "add"\n', "saved its output"),
    ],
    "l11-reverse": [
        # Clamps each entry instead of rescaling the whole gradient.
        (
            "def clip_hook(max_norm):\n"
            "    def hook(grad):\n"
            "        return grad.clamp(-max_norm, max_norm)\n"
            "    return hook\n",
            "x.grad (scale",
        ),
        # Rescales in place and returns nothing: the gradient goes on unchanged.
        (
            "def clip_hook(max_norm):\n"
            "    def hook(grad):\n"
            "        grad = grad * min(1.0, max_norm / grad.norm().item())\n"
            "    return hook\n",
            "x.grad (scale",
        ),
        # Always rescales to max_norm, also when the gradient is small.
        (
            "def clip_hook(max_norm):\n"
            "    def hook(grad):\n"
            "        return grad * (max_norm / grad.norm())\n"
            "    return hook\n",
            "x.grad (scale 0.01",
        ),
    ],
    "l11-safe-sqrt": [
        # The plain norm: NaN gradient at the zero vector.
        ("def safe_norm(v):\n    return v.norm(dim=1)\n", "torch's norm"),
        ("def safe_norm(v):\n    return ((v**2).sum(dim=1)).sqrt()\n", "NaN"),
        # The lesson's where, but around the sqrt only: sqrt(0) still meets backward.
        (
            "def safe_norm(v):\n"
            "    squared = (v**2).sum(dim=1)\n"
            "    return torch.where(squared > 0, squared.sqrt(), torch.zeros_like(squared))\n",
            "NaN",
        ),
        # The squared norm instead of the norm.
        ("def safe_norm(v):\n    return (v**2).sum(dim=1)\n", "mismatch"),
    ],
}
