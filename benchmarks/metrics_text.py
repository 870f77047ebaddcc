"""Reading a Prometheus scrape in benchmarks and tests: prometheus_client's own parser, and sums over
label subsets."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True)
class Scrape:
    """One scrape: every sample by name and labels; `families` are the metric names as declared."""

    samples: Mapping[tuple[str, frozenset[tuple[str, str]]], float]
    families: frozenset[str]
    types: Mapping[str, str]

    @classmethod
    def parse(cls, text: str) -> Scrape:
        samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
        families, types = set(), {}
        for family in text_string_to_metric_families(text):
            families.add(family.name)
            types[family.name] = family.type
            for sample in family.samples:
                samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
        return cls(samples, frozenset(families), types)

    @classmethod
    def get(cls, url: str) -> Scrape:
        # A new connection per scrape, so several uvicorn workers take turns answering.
        response = httpx.get(url, timeout=30, headers={"Connection": "close"})
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("text/plain"), response.headers
        return cls.parse(response.text)

    def sum(self, name: str, **labels: str) -> float:
        """The sum of the samples named `name` whose labels include `labels` (0 when there are none)."""
        wanted = set(labels.items())
        return sum(
            value for (sample, have), value in self.samples.items() if sample == name and wanted <= have
        )

    def labels(self, name: str, label: str) -> set[str]:
        found = (dict(have) for (sample, have) in self.samples if sample == name)
        return {labels[label] for labels in found if label in labels}

    def sample_names(self) -> set[str]:
        return {name for name, _ in self.samples}
