"""A scrape of the controller's /metrics, read as Prometheus reads it: each family's TYPE, and every sample under the
name it is exposed with (prometheus-client's own parser renames counters' samples `<name>_total`, which would hide
exactly what these tests check: that Karpenter's counters are exposed under Karpenter's names)."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from karpenter_policy.reconcile.controller import Controller
from karpenter_policy.reconcile.probes import ProbeServer
from karpenter_policy.reconcile.runner import Health

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


@dataclass
class Scrape:
    types: dict[str, str]  # family → counter, gauge, histogram, summary, untyped
    samples: list[Sample]

    def names(self) -> set[str]:
        """The names of every sample (what a PromQL query can select)."""
        return {s.name for s in self.samples}

    def of(self, name: str, **labels: str) -> list[Sample]:
        return [s for s in self.samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]

    def value(self, name: str, **labels: str) -> float:
        """The value of the one sample of `name` with these labels (0 when there is none)."""
        found = self.of(name, **labels)
        assert len(found) <= 1, found
        return found[0].value if found else 0.0

    def total(self, name: str, **labels: str) -> float:
        return sum(s.value for s in self.of(name, **labels))

    def label_names(self, name: str) -> set[frozenset[str]]:
        return {frozenset(s.labels) for s in self.of(name)}


def parse(text: str) -> Scrape:
    types: dict[str, str] = {}
    samples = []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, family, kind = line.split(" ", 3)
            types[family] = kind
        elif line and not line.startswith("#"):
            match = _SAMPLE.match(line)
            assert match, line
            labels = {k: re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], v)
                      for k, v in _LABEL.findall(match[2] or "")}
            samples.append(Sample(match[1], labels, float(match[3])))
    return Scrape(types, samples)


@contextmanager
def serving(controller: Controller) -> Iterator[int]:
    """The controller's probe server (the one `reconcile` runs) on a free port of 127.0.0.1."""
    server = ProbeServer("127.0.0.1", 0, controller.metrics.registry, lambda: Health(True, True, True)).start()
    try:
        yield server.port
    finally:
        server.shutdown()


def scrape(port: int) -> Scrape:
    """GET /metrics over HTTP, as Prometheus does."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        assert answer.status == 200 and answer.headers["Content-Type"].startswith("text/plain")
        return parse(answer.read().decode())


__all__ = ["Sample", "Scrape", "parse", "scrape", "serving"]
