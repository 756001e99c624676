"""A watch on the calls a learner's function makes: what the check of the count of paths
(module ``paths``) uses to see whether a function ran inside itself (recursion, whatever
the recursion limit).
"""

from __future__ import annotations

import sys

__all__ = ["CallWatch"]


class CallWatch:
    """Watches the Python calls a function makes, with ``sys.setprofile``.

    Only functions of the learner's notebook are followed (those whose globals are
    the answer's). ``recursive`` is the code of the first one found running inside
    itself, directly or through other functions. Counting frames does not depend on
    the recursion limit.
    """

    def __init__(self, namespace):
        self.namespace = namespace
        self.running = {}
        self.recursive = None

    def __call__(self, frame, event, arg):
        if frame.f_globals is not self.namespace:
            return
        code = frame.f_code
        if event == "call":
            self.running[code] = self.running.get(code, 0) + 1
            if self.running[code] > 1 and self.recursive is None:
                self.recursive = code
        elif event == "return":
            self.running[code] = self.running.get(code, 1) - 1

    def run(self, fn, *args):
        before = sys.getprofile()
        sys.setprofile(self)
        try:
            return fn(*args)
        finally:
            sys.setprofile(before)
