"""Every setting weir reads, gathered from where each is declared: a run's
(``engine.runtime.settings``), the API's (``api.settings``), the command line's own
(``app.options``), the backfill's and the load generator's (``app.commands``), and those read
from the environment alone (Kafka's, S3's, a run's). The command line, its ``--help`` and the
reference pages (``app.reference``) are made from this one list."""

from __future__ import annotations

from weir.api.settings import API_SETTINGS
from weir.app.commands import BACKFILL_SETTINGS, PRODUCE_SETTINGS
from weir.app.options import LIFECYCLE_SETTINGS, SERVING
from weir.base.settings import Setting
from weir.engine.kafka_security import KAFKA_SETTINGS
from weir.engine.runtime.settings import RUN_ENVIRONMENT, RUN_SETTINGS
from weir.state.s3store import S3_SETTINGS

# the flags' settings, in the order each command's --help lists them
FLAGS: tuple[Setting, ...] = (
    *RUN_SETTINGS,
    *SERVING,
    *API_SETTINGS,
    *LIFECYCLE_SETTINGS,
    *BACKFILL_SETTINGS,
    *PRODUCE_SETTINGS,
)
# read from the environment alone, by area
ENVIRONMENT: tuple[tuple[str, tuple[Setting, ...]], ...] = (
    ("a run", RUN_ENVIRONMENT),
    ("Kafka (every client weir makes; a Kafka URL's option of the same name wins)",
     KAFKA_SETTINGS),
    ("S3 checkpoint storage (as the AWS tools read them)", S3_SETTINGS),
)  # fmt: skip
ALL: tuple[Setting, ...] = (*FLAGS, *(s for _, group in ENVIRONMENT for s in group))


def for_command(command: str) -> list[Setting]:
    """The flags ``command`` takes, in ``--help``'s order."""
    return [s for s in FLAGS if command in s.commands]


def flag_names(command: str | None = None) -> dict[str, str]:
    """Each setting's name and how the command line shows it: its flag (``--parallelism``), or
    for a variable alone its variable. ``command``'s own settings win where a name is shared."""
    names = {s.name: s.flag or s.env for s in ALL}
    if command is not None:
        names.update({s.name: s.flag for s in for_command(command)})
    return names
