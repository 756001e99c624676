"""Command line: ``backproplab learn``, ``release``, ``validate``, ``audit`` and ``site``.

Also runs as ``python -m backproplab``; the commands are the course's, in
:mod:`backproplab.course.cli`.
"""

import sys

from .course.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
