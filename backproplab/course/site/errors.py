"""What a site that cannot be built says: `SiteError`, and how to get the tools."""

from __future__ import annotations

from ..assignment import CourseError

__all__ = ["INSTALL_HINT", "SiteError"]

INSTALL_HINT = 'install the site extra: pip install "backproplab[site]"'


class SiteError(CourseError):
    """A path or a file the site cannot be built from; the message names it."""
