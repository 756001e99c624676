"""Shared test configuration.

The Agg backend keeps every figure off-screen; it has to be chosen before
pyplot is imported anywhere in the test session.
"""

import os

os.environ.setdefault("MPLBACKEND", "Agg")
