"""Kernels that need no TCP port: `IPCKernelManager`.

A Jupyter kernel listens on five sockets. With the default TCP transport, the
process that starts the kernel picks five free ports, closes them, writes them
to the connection file, and the kernel binds them a moment later. Between the
close and the bind any other process may take one of them; when several
kernels start at once (nbgrader autograding a class in parallel, a test suite
on every core) two of them sometimes pick the same port, and one dies with
"Address already in use".

`IPCKernelManager` starts kernels on the ``ipc`` transport instead: Unix
domain sockets, named after a folder that `tempfile.mkdtemp` creates for that
kernel alone. No name is chosen and released, so there is nothing to race for.
It works wherever Jupyter takes a kernel manager class: nbclient, nbconvert
and nbgrader (``kernel_manager_class``, `AsyncIPCKernelManager`) and nbval
(`IPCKernelManager`). Unix only (Linux and macOS), as Unix sockets are.

    # nbgrader_config.py
    c.Execute.kernel_manager_class = "backproplab.course.kernels.AsyncIPCKernelManager"

>>> km = IPCKernelManager()
>>> km.transport, km.ip.endswith("/kernel")
('ipc', True)
>>> km.cleanup_connection_file()  # the kernel's folder goes with its connection file
>>> os.path.exists(os.path.dirname(km.ip))
False
"""

from __future__ import annotations

import os
import shutil
import tempfile

from jupyter_client.manager import AsyncKernelManager, KernelManager
from traitlets import HasTraits, default

__all__ = ["AsyncIPCKernelManager", "IPCKernelManager"]


class _OwnSockets(HasTraits):
    """The ipc transport, in a fresh folder per kernel (mixed into a KernelManager)."""

    @default("transport")
    def _default_transport(self) -> str:
        return "ipc"

    def _ip_default(self) -> str:
        if self.transport != "ipc":  # configured back to TCP: Jupyter's own default
            return super()._ip_default()
        # The sockets are <folder>/kernel-1 ... kernel-5; a fresh private folder per kernel
        # makes the names unique, and short enough for a socket path (about 100 bytes).
        self._folder = tempfile.mkdtemp(prefix="bl-kernel-")
        return os.path.join(self._folder, "kernel")

    def cleanup_connection_file(self) -> None:
        # Called once the kernel is gone for good (never on a restart, which reuses the
        # sockets' names): the folder goes too.
        super().cleanup_connection_file()
        folder = getattr(self, "_folder", None)  # only the folder made here, never one configured
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


class IPCKernelManager(_OwnSockets, KernelManager):
    """A KernelManager whose kernel listens on Unix sockets in a folder of its own."""


class AsyncIPCKernelManager(_OwnSockets, AsyncKernelManager):
    """The same for asyncio clients (nbclient, nbconvert, nbgrader)."""
