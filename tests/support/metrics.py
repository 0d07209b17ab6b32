"""Scraping a node's /metrics the way Prometheus does, parsed by prometheus_client's own parser."""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from vdl_dev.dev_cluster import DevCluster


@dataclass(frozen=True)
class Scrape:
    """One scrape: sample name -> [(labels, value)]."""

    samples: dict[str, list[tuple[dict[str, str], float]]]
    content_type: str

    def value(self, name: str, **labels: str) -> float | None:
        """The value of the one sample `name` with exactly these labels (None: absent)."""
        for sample_labels, value in self.samples.get(name, []):
            if sample_labels == labels:
                return value
        return None

    def get(self, name: str, default: float = 0.0, **labels: str) -> float:
        value = self.value(name, **labels)
        return default if value is None else value

    def names(self) -> set[str]:
        return set(self.samples)


def scrape_url(url: str, timeout: float = 5.0, accept: str | None = None) -> Scrape:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        text = response.read().decode()
        content_type = response.headers.get("Content-Type", "")
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return Scrape(samples, content_type)


def scrape(cluster: DevCluster, node_id: int, timeout: float = 5.0) -> Scrape:
    return scrape_url(cluster.metrics_urls()[node_id], timeout)


def try_scrape(cluster: DevCluster, node_id: int) -> Scrape | None:
    """None when the node does not answer (down, stopped)."""
    try:
        return scrape(cluster, node_id, timeout=2.0)
    except OSError:
        return None
