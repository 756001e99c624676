"""backproplab: make PyTorch's autograd graph visible.  (temporary: tolerant imports during build)"""
import importlib as _il

__version__ = "0.1.0"
for _mod, _names in {
    "graph": ["Graph", "Node", "Edge", "SavedTensor", "LeafInfo", "describe"],
    "trace": ["Trace", "Step", "TensorInfo", "trace_backward"],
    "check": ["Report", "Check", "compare", "diagnose", "numerical_grad", "check_grad", "check_function", "check_graph"],
}.items():
    try:
        _m = _il.import_module(f".{_mod}", __name__)
        for _n in _names:
            if hasattr(_m, _n):
                globals()[_n] = getattr(_m, _n)
    except ImportError:
        pass
from . import data  # noqa: E402
for _mod in ("plot", "widgets", "course"):
    try:
        globals()[_mod] = _il.import_module(f".{_mod}", __name__)
    except ImportError:
        pass
