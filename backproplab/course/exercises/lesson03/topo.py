"""The lesson's own depth-first sort and a watch on the calls a learner's function makes:
what the checks of a learner's walk over a graph (this lesson's count of paths, module
``paths``, and the counting pass built on this engine) use to see which sort ran, and
whether a function ran inside itself (recursion, whatever the recursion limit).
"""

from __future__ import annotations

import sys

__all__ = ["LESSON_SORT", "LESSON_SORT_CODE", "CallWatch"]

# The lesson's own depth-first sort (cell l03-13), compiled here so that a copy of it
# under another name is recognised by its code.
LESSON_SORT = '''
def topo_order(root):
    order, seen = [], set()
    stack = [(root, False)]
    while stack:
        node, parents_done = stack.pop()
        if parents_done:
            order.append(node)  # every parent is already in the order
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append((node, True))
            stack.extend((p, False) for p in node.parents if id(p) not in seen)
    return order
'''
_space: dict = {}
exec(compile(LESSON_SORT, "<lesson 03's topo_order>", "exec"), _space)
LESSON_SORT_CODE = _space["topo_order"].__code__


class CallWatch:
    """Watches the Python calls a function makes, with ``sys.setprofile``.

    Only functions of the learner's notebook are followed (those whose globals are
    the answer's). ``recursive`` is the first one found running inside itself,
    directly or through other functions; ``codes`` is every one that ran. Counting
    frames does not depend on the recursion limit.
    """

    def __init__(self, namespace):
        self.namespace = namespace
        self.running = {}
        self.codes = set()
        self.modules = set()
        self.recursive = None

    def __call__(self, frame, event, arg):
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            if frame.f_globals is not self.namespace:
                self.modules.add(module.split(".")[0])
                return
            code = frame.f_code
            self.codes.add(code)
            self.running[code] = self.running.get(code, 0) + 1
            if self.running[code] > 1 and self.recursive is None:
                self.recursive = code
        elif event == "return" and frame.f_globals is self.namespace:
            code = frame.f_code
            self.running[code] = self.running.get(code, 1) - 1

    def run(self, fn, *args):
        before = sys.getprofile()
        sys.setprofile(self)
        try:
            return fn(*args)
        finally:
            sys.setprofile(before)
