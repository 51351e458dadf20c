"""serving/metrics.py: the server's Prometheus metrics, in a registry of their own: each
answer counted by a bounded path label and its status (errors apart), its latency observed,
and the text GET /metrics serves."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from transformer_cli.serving.metrics import ROUTES, Metrics


def test_answers_are_counted_by_a_bounded_path_and_their_status():
    m = Metrics()
    assert [m.route(p) for p in ROUTES] == list(ROUTES)
    assert m.route("/admin/../etc") == m.route("/favicon.ico") == "other"  # no label per path sent
    m.answered("/translate", 200, 0.02)
    m.answered("/translate", 200, 0.3)
    m.answered("/nope", 404, 0.001)
    value = m.registry.get_sample_value
    assert value("tfm_requests_total", {"path": "/translate", "code": "200"}) == 2
    assert value("tfm_request_errors_total", {"path": "/translate", "code": "200"}) is None
    assert value("tfm_request_errors_total", {"path": "other", "code": "404"}) == 1
    assert value("tfm_request_latency_seconds_count", {"path": "/translate", "code": "200"}) == 2
    assert value("tfm_request_latency_seconds_bucket", {"path": "/translate", "code": "200", "le": "0.025"}) == 1


def test_two_servers_count_apart_and_the_exposition_holds_every_series():
    a, b = Metrics(), Metrics()
    a.sentences.inc(3)
    assert b.registry.get_sample_value("tfm_sentences_total") == 0
    families = {f.name: f for f in text_string_to_metric_families(a.exposition().decode())}
    assert {"tfm_requests", "tfm_sentences", "tfm_requests_shed", "tfm_requests_in_flight", "tfm_model_info"} <= set(
        families
    )
    reloads = {s.labels["result"]: s.value for s in families["tfm_model_reloads"].samples if s.name.endswith("_total")}
    assert reloads == {"ok": 0.0, "failed": 0.0}  # both series from the start, for alert rules
    assert families["tfm_sentences"].samples[0].value == 3
