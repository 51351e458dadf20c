"""The server's Prometheus metrics (`GET /metrics`), in a registry of its own."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, generate_latest

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
ROUTES = ("/", "/translate", "/attention", "/health", "/metrics")


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.requests = Counter("tfm_requests", "HTTP requests answered", ["path", "code"], registry=r)
        self.errors = Counter(
            "tfm_request_errors", "HTTP requests answered with 4xx or 5xx", ["path", "code"], registry=r
        )
        self.latency = Histogram(
            "tfm_request_latency_seconds",
            "Time to answer a request, by path and status code (an admitted 200 and a shed 503 apart)",
            ["path", "code"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.sentences = Counter("tfm_sentences", "Sentences translated", registry=r)
        self.truncated = Counter("tfm_truncated_inputs", "Inputs truncated to the model's limit", registry=r)
        self.batch_sentences = Histogram(
            "tfm_batch_sentences", "Sentences per decoding batch", buckets=BATCH_BUCKETS, registry=r
        )
        self.batch_seconds = Histogram(
            "tfm_batch_seconds", "Decoding time per batch", buckets=LATENCY_BUCKETS, registry=r
        )
        self.shed = Counter(
            "tfm_requests_shed",
            "Requests answered 503 at once: the work admitted was at serve.max_pending_s",
            registry=r,
        )
        self.admission_margin = Gauge(
            "tfm_admission_margin",
            "What admission control multiplies a predicted wait by: its recent errors (serving/wait_prediction.py)",
            registry=r,
        )
        self.in_flight = Gauge("tfm_requests_in_flight", "Requests received and not yet answered", registry=r)
        self.reloads = Counter(
            "tfm_model_reloads",
            "Hot reloads of the model file by result (ok, failed: the old model kept serving)",
            ["result"],
            registry=r,
        )
        self.reload_seconds = Gauge(
            "tfm_model_reload_seconds",
            "Time the last successful reload took to load and verify the new model",
            registry=r,
        )
        self.model = Info("tfm_model", "The model being served", registry=r)
        for result in ("ok", "failed"):  # both series exist from the start, for alert rules
            self.reloads.labels(result)

    def route(self, path: str) -> str:
        """A bounded label for a request path (unknown paths share one)."""
        return path if path in ROUTES else "other"

    def answered(self, path: str, code: int, seconds: float) -> None:
        label = self.route(path)
        self.requests.labels(label, str(code)).inc()
        if code >= 400:
            self.errors.labels(label, str(code)).inc()
        self.latency.labels(label, str(code)).observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
