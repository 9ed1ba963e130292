"""`validate --jobs N`: the files of a run checked in N worker processes, as flake8's and pylint's `-j` do.

The parent hands each idle worker a chunk of consecutive files over its own pipe and takes back the chunk's
`FileResult`s (one per file) in one message; `check_files` yields them in the files' order, so the report merged
from them is the one a single process makes (findings, counters, directives, the rules across objects). A worker
holds one chunk at a time and the parent one result per file (what a single process keeps of it too): memory
stays bounded by the chunk, not the run.

What can go wrong, and what the user sees:
- A worker's exception (a bug) stops the run: `WorkerFailed`, naming the file and the error; the CLI prints it
  as an internal error and exits 2, as it does for the same exception in one process.
- A worker that dies (killed, out of memory, a crash in C code) is noticed by its process sentinel: `WorkerFailed`
  names the file it was checking (each worker writes the index of its file in shared memory before it starts on
  it) and how it ended. The parent never waits on a worker that is gone.
- Ctrl-C: workers ignore SIGINT, the parent ends them and the CLI says "interrupted" (exit 130). A parent that
  dies closes the pipes: each worker ends at its next read or write.

The workers are forked on Linux (they inherit the imported modules and what the parent compiled while checking
the run's first file in process: schemas, CEL programs), spawned elsewhere. Standard input is checked by the
parent itself.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from karpenter_policy.checks.jobs import WorkerFailed
from karpenter_policy.checks.source.loader import STDIN
from karpenter_policy.checks.validation.policies import FileResult, FileTask

if TYPE_CHECKING:  # multiprocessing is imported when workers start, not by a run that needs none
    from multiprocessing.connection import Connection
    from multiprocessing.context import ForkContext, SpawnContext
    from multiprocessing.process import BaseProcess

#: The most files a worker is given at once: small enough that the workers finish together, large enough that a
#: chunk's round trip through the pipes is a small share of its work.
MAX_CHUNK = 16


def _context() -> ForkContext | SpawnContext:
    import multiprocessing

    if sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def _work(connection: Connection, task: FileTask, current: Any, slot: int, inherited: list[Connection]) -> None:
    """A worker's loop: take a chunk of (index, file), answer with the chunk's results; end on None, a closed pipe
    or a failure (which it reports first). `current[slot]` is the index of the file it is checking, for the parent
    to name if this process dies. `inherited`: the parent's ends of the pipes, which a forked worker holds too and
    closes, so that a parent that dies leaves no one at the other end of its pipe (its next read or write ends it)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    if hasattr(signal, "pthread_sigmask"):  # blocked by the parent until now (`_Pool.start`)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    for end in inherited:
        end.close()
    try:
        while (chunk := connection.recv()) is not None:
            results: list[FileResult] = []
            for index, file in chunk:
                current[slot] = index
                try:
                    results.append(task.run(file))
                except Exception as error:  # a bug: reported by the parent, naming the file
                    connection.send(("failed", index, _described(error)))
                    return
            try:
                connection.send(("checked", chunk[0][0], results))
            except (EOFError, OSError):
                raise
            except Exception as error:  # a result that cannot be sent (pickled) is a bug too
                connection.send(("failed", chunk[0][0], _described(error)))
                return
    except (EOFError, OSError, KeyboardInterrupt):
        return  # the parent is gone or ending the run
    finally:
        connection.close()


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT held back in this thread meanwhile (delivered when it ends), where the platform can."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _described(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


@dataclass(slots=True)
class _Worker:
    process: BaseProcess
    connection: Connection
    slot: int
    #: The files of the chunk it is checking (none: idle).
    pending: list[int] = field(default_factory=list)


class _Pool:
    """The worker processes of one run and the chunks they have not been given yet."""

    def __init__(self, files: Sequence[str], chunks: list[list[tuple[int, str]]]) -> None:
        self.files = files
        self.chunks = chunks
        self.next_chunk = 0
        self.workers: list[_Worker] = []
        self.current: Any = None

    def start(self, task: FileTask, count: int) -> None:
        """Start `count` workers, each with its first chunk."""
        context = _context()
        forked = context.get_start_method() == "fork"
        #: Each worker's file in progress (its index in `files`), written by the worker before it starts on it.
        self.current = context.RawArray("q", count)
        for slot in range(count):
            parent_end, child_end = context.Pipe(duplex=True)
            # a forked child holds every descriptor of the parent: the parent's ends of its pipe and the earlier ones
            inherited = [*(w.connection for w in self.workers), parent_end] if forked else []
            process = context.Process(
                target=_work, args=(child_end, task, self.current, slot, inherited), daemon=True,
                name="validate-worker",
            )
            try:
                with _sigint_blocked():  # a Ctrl-C between the fork and the worker's SIG_IGN waits for the latter
                    process.start()
            finally:
                child_end.close()
            self.workers.append(_Worker(process, parent_end, slot))
            self.give(self.workers[-1])

    def give(self, worker: _Worker) -> None:
        """The next chunk to an idle worker, if any is left."""
        if self.next_chunk >= len(self.chunks):
            return
        work = self.chunks[self.next_chunk]
        self.next_chunk += 1
        worker.pending = [index for index, _ in work]
        try:
            worker.connection.send(work)
        except OSError:  # BrokenPipeError: it ended between two chunks
            raise self._died(worker) from None

    def collect(self, results: dict[int, FileResult]) -> None:
        """Wait for at least one worker's answer and put its chunk's results in `results` (by file index)."""
        from multiprocessing.connection import wait

        busy = [worker for worker in self.workers if worker.pending]
        ready = wait([w.connection for w in busy] + [w.process.sentinel for w in busy])
        for worker in busy:
            if worker.connection in ready:  # an answer, or the end of the pipe of a worker that died
                try:
                    kind, index, payload = worker.connection.recv()
                except (EOFError, OSError):
                    raise self._died(worker) from None
                if kind == "failed":
                    raise WorkerFailed(self.files[index], payload)
                results.update(zip(worker.pending, payload, strict=True))
                worker.pending = []
                self.give(worker)
            elif worker.process.sentinel in ready:
                raise self._died(worker)

    def _died(self, worker: _Worker) -> WorkerFailed:
        index = self.current[worker.slot]
        file = self.files[index if index in worker.pending else worker.pending[0]]
        return WorkerFailed(file, _ended(worker.process), ended=True)

    def finish(self) -> None:
        """The work is done: each worker is told to end, and does."""
        for worker in self.workers:
            with contextlib.suppress(OSError, ValueError):
                worker.connection.send(None)
        for worker in self.workers:
            worker.process.join(timeout=5)

    def close(self) -> None:
        """End every worker still running (the run failed or was interrupted) and release the pipes."""
        for worker in self.workers:
            worker.connection.close()
            if worker.process.is_alive():
                worker.process.terminate()
        for worker in self.workers:
            worker.process.join(timeout=5)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()


def _ended(process: BaseProcess) -> str:
    process.join(timeout=5)
    code = process.exitcode
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            return f"a worker process was killed by {signal.Signals(-code).name}"
    return f"a worker process ended unexpectedly (exit code {code})"


def check_files(files: Sequence[str], task: FileTask, jobs: int) -> Iterator[FileResult]:
    """Each file's result, in the order of `files`, checked by up to `jobs` worker processes (the first file and
    standard input by this one)."""
    if not files:
        return
    yield task.run(files[0])  # in this process: what it compiles (schemas, CEL) the forked workers inherit
    rest = [(index, file) for index, file in enumerate(files) if index > 0 and file != STDIN]
    count = min(jobs, len(rest))
    if count < 1:
        yield from (task.run(file) for file in files[1:])  # standard input only
        return
    size = max(1, min(MAX_CHUNK, len(rest) // (count * 8)))
    chunks = [rest[start : start + size] for start in range(0, len(rest), size)]
    for stream in (sys.stdout, sys.stderr):  # a forked child must not write the parent's buffered output again
        with contextlib.suppress(AttributeError, OSError, ValueError):
            stream.flush()
    results: dict[int, FileResult] = {}
    pool = _Pool(files, chunks)
    try:
        pool.start(task, count)
        results.update((index, task.run(file)) for index, file in enumerate(files) if index > 0 and file == STDIN)
        for done in range(1, len(files)):
            while done not in results:
                pool.collect(results)
            yield results.pop(done)
        pool.finish()
    finally:
        pool.close()
