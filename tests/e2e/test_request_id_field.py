"""vLLM's `request_id` body field on chat and completions: the id of the answer, the response
header and the log lines, unless the client's X-Request-Id header names one (the header wins, as
in vLLM)."""

import time

from conftest import MODEL_NAME


def log_lines(server, needle):
    time.sleep(0.3)
    return [l for l in server.log_text().splitlines() if needle in l]


def test_the_body_s_request_id_names_the_request(client, server):
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL_NAME, messages=[{"role": "user", "content": "Say hi."}], max_tokens=4,
        extra_body={"request_id": "e2e-body-chat"})
    assert raw.headers["x-request-id"] == "e2e-body-chat"
    assert raw.parse().id == "chatcmpl-e2e-body-chat"
    finished = log_lines(server, "e2e-body-chat")
    assert len([l for l in finished if "request finished" in l]) == 1, finished
    c = client.completions.with_raw_response.create(
        model=MODEL_NAME, prompt="Hello", max_tokens=2, n=2, extra_body={"request_id": "e2e-body-cmpl"})
    assert c.parse().id == "cmpl-e2e-body-cmpl" and c.headers["x-request-id"] == "e2e-body-cmpl"
    # One line per choice.
    assert len([l for l in log_lines(server, "e2e-body-cmpl") if "request finished" in l]) == 2


def test_the_header_wins_over_the_body(client):
    raw = client.completions.with_raw_response.create(
        model=MODEL_NAME, prompt="Hello", max_tokens=2, extra_headers={"X-Request-Id": "e2e-header"},
        extra_body={"request_id": "e2e-ignored"})
    assert raw.parse().id == "cmpl-e2e-header" and raw.headers["x-request-id"] == "e2e-header"


def test_a_rejected_request_is_logged_under_the_body_s_id(http, server):
    r = http.post("/v1/chat/completions", json={"model": MODEL_NAME, "request_id": "e2e-body-bad",
                                                "messages": [], "max_tokens": 2})
    assert r.status_code == 400 and r.headers["x-request-id"] == "e2e-body-bad"
    rejected = [l for l in log_lines(server, "e2e-body-bad") if "request rejected" in l]
    assert len(rejected) == 1 and "status=400" in rejected[0], rejected


def test_an_id_that_cannot_be_echoed_is_a_400(http):
    r = http.post("/v1/completions", json={"model": MODEL_NAME, "prompt": "Hi", "max_tokens": 2,
                                           "request_id": "has space"})
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "request_id"
