"""The process's limit on open descriptors, raised for a job manager or an API server (apart
from ``httpserve`` so that a run without the API does not import the HTTP stack)."""

from __future__ import annotations

import logging
import resource

log = logging.getLogger(__name__)


def raise_fd_limit() -> None:
    """The soft limit on open descriptors up to the hard one: HTTP clients hold descriptors
    in the process that also writes checkpoints, and the soft default (often 1024) would let
    them make a checkpoint fail with "Too many open files"."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open-file limit soft=%s hard=%s: %s", soft, hard, exc)
