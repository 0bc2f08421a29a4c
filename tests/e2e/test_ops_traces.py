"""OpenTelemetry traces (--otlp-traces-endpoint): a stand-in OTLP/HTTP receiver (a tiny HTTP
server in this process) collects what the server exports; each request must give one
`llm_request` span with vLLM's gen_ai.* attributes and timings that add up, parented by the
caller's W3C traceparent when one is sent."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from conftest import MODEL_NAME, Server

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


class Receiver:
    """Accepts POST /v1/traces with JSON bodies, as an OpenTelemetry collector does."""

    def __init__(self):
        self.requests, self.lock = [], threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with receiver.lock:
                    receiver.requests.append((self.path, self.headers["Content-Type"], json.loads(body)))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.http.server_address[1]
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def spans(self):
        with self.lock:
            return [(path, ctype, s, rs["resource"]) for path, ctype, body in self.requests
                    for rs in body["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]

    def wait_for(self, count, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline and len(self.spans()) < count:
            time.sleep(0.05)
        return self.spans()


def attrs(span):
    out = {}
    for kv in span["attributes"]:
        (kind, value), = kv["value"].items()
        out[kv["key"]] = {"intValue": int, "doubleValue": float}.get(kind, lambda v: v)(value)
    return out


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    receiver = Receiver()
    s = Server(["--otlp-traces-endpoint", f"http://127.0.0.1:{receiver.port}"],
               tmp_path_factory.mktemp("traces"), "traces")
    yield s, receiver
    s.stop()
    receiver.http.shutdown()


def test_one_span_per_request_with_vllms_attributes_and_the_callers_parent(traced):
    s, receiver = traced
    body = {"model": MODEL_NAME, "prompt": "The capital of France is", "max_tokens": 7,
            "temperature": 0.5, "top_p": 0.9, "ignore_eos": True}
    r = httpx.post(s.url + "/v1/completions", json=body, timeout=60,
                   headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"})
    assert r.status_code == 200
    usage = r.json()["usage"]
    # No traceparent: a new trace. An unsampled one (flags 00): no span.
    assert httpx.post(s.url + "/v1/completions", json=body | {"max_tokens": 3}, timeout=60).status_code == 200
    unsampled = {"traceparent": f"00-{'a' * 32}-{'b' * 16}-00"}
    assert httpx.post(s.url + "/v1/completions", json=body, headers=unsampled, timeout=60).status_code == 200
    spans = receiver.wait_for(2)
    time.sleep(1)  # nothing else is coming
    spans = receiver.spans()
    assert len(spans) == 2, spans
    for path, ctype, span, resource in spans:
        assert path == "/v1/traces" and ctype == "application/json"
        assert resource["attributes"] == [{"key": "service.name", "value": {"stringValue": "ferrite"}}]
        assert span["name"] == "llm_request" and span["kind"] == 2
        assert len(span["traceId"]) == 32 and len(span["spanId"]) == 16
    by_tokens = {attrs(sp)["gen_ai.request.max_tokens"]: sp for _, _, sp, _ in spans}
    child, root = by_tokens[7], by_tokens[3]
    assert child["traceId"] == TRACE_ID and child["parentSpanId"] == PARENT_ID
    assert root["traceId"] != TRACE_ID and "parentSpanId" not in root
    a = attrs(child)
    assert a["gen_ai.response.model"] == MODEL_NAME
    assert a["gen_ai.request.temperature"] == pytest.approx(0.5)
    assert a["gen_ai.request.top_p"] == pytest.approx(0.9)
    assert a["gen_ai.request.n"] == 1
    assert a["gen_ai.usage.prompt_tokens"] == usage["prompt_tokens"]
    assert a["gen_ai.usage.completion_tokens"] == usage["completion_tokens"] == 7
    assert a["gen_ai.response.finish_reasons"] == {"values": [{"stringValue": "length"}]}
    # Queue + prefill = TTFT; TTFT + decode = e2e = the span's duration.
    q, p, d = (a[f"gen_ai.latency.{k}"] for k in ["time_in_queue", "time_in_model_prefill", "time_in_model_decode"])
    assert q >= 0 and p > 0 and d > 0
    assert q + p == pytest.approx(a["gen_ai.latency.time_to_first_token"], abs=1e-5)
    assert q + p + d == pytest.approx(a["gen_ai.latency.e2e"], abs=1e-5)
    assert a["gen_ai.latency.time_in_model_inference"] == pytest.approx(p + d, abs=1e-5)
    duration = (int(child["endTimeUnixNano"]) - int(child["startTimeUnixNano"])) / 1e9
    assert duration == pytest.approx(a["gen_ai.latency.e2e"], abs=1e-5)
    assert abs(int(child["startTimeUnixNano"]) / 1e9 - time.time()) < 60
