"""Shared test configuration, set before anything starts a kernel.

- Tests draw with Agg, chosen in this process only. Setting MPLBACKEND in the
  environment instead would leak into the nbval kernels and stop the lessons'
  inline figures from being displayed.
- One intra-op thread for torch: nbval kernels inherit this environment, and
  on a two-core machine torch's default thread pool fights the test process
  for the cores (a lesson's training loop ran 70x slower that way). Lessons
  print rounded numbers, so their stored outputs are the same either way.
"""

import os

import matplotlib

matplotlib.use("Agg")
os.environ.setdefault("OMP_NUM_THREADS", "1")
