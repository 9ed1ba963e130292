"""How many processes a run checks its files in (`validate --jobs N|auto`): read from the command line, and
decided from the run's size and the CPUs this process may use. No processes here (`validation.workers` runs
them), but what a worker's failure is (`WorkerFailed`): this module is light enough for the option sets and for
runs that need no worker."""

from __future__ import annotations

import os

#: `--jobs auto` checks up to this many files in one process: below it, starting the workers costs more than they
#: save (docs/cli.md, "Files in parallel"; the measurement is in benchmarks/README.md).
AUTO_THRESHOLD = 200
#: `--jobs` beyond this is refused as a typo rather than started.
MAX_JOBS = 1024


def read_jobs(text: str) -> int:
    """`--jobs N|auto` as given: a number of processes, 0 for auto; ValueError: why not."""
    if text.strip().lower() == "auto":
        return 0
    if not (text.isascii() and text.isdigit() and len(text) <= 8) or not 1 <= int(text) <= MAX_JOBS:
        shown = repr(text) if len(text) <= 40 else repr(text[:37] + "...")
        raise ValueError(f"{shown} is not a number of processes (1 to {MAX_JOBS}) or auto")
    return int(text)


def show_jobs(jobs: int) -> str:
    """`--jobs` as the command line writes it."""
    return "auto" if jobs == 0 else str(jobs)


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: a container's or taskset's limit, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity on this platform
        return os.cpu_count() or 1


def jobs_for(requested: int, files: int) -> int:
    """The processes for `files` files: `requested` (0 is auto: the usable CPUs when there are more than
    `AUTO_THRESHOLD` files, else 1), never more than there are files."""
    if requested == 0:
        requested = usable_cpus() if files > AUTO_THRESHOLD else 1
    return max(1, min(requested, files))


class WorkerFailed(Exception):
    """A worker process failed while checking `file`: an exception in it (`error`: its type and message), or the
    process ended (`ended`; `error`: how)."""

    def __init__(self, file: str, error: str, *, ended: bool = False) -> None:
        self.file = file
        self.error = error
        self.ended = ended
        where = f"while checking {file}" if ended else f"(in a worker process, checking {file})"
        super().__init__(f"{error} {where}")
