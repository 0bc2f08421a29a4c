"""KV-cache events (--kv-events-config) against a scripted run, read by a Python subscriber as
llm-d's would (pyzmq SUB + msgpack): every block stored and evicted is reported, nothing else.

The subscriber keeps its own model of the cache from the events alone, recomputes every block
hash from the documented hashing (FNV-1a 64 over the parent hash and the token ids), and
before each request predicts how many prompt tokens the server will find cached; the server's
usage.prompt_tokens_details.cached_tokens must equal the prediction. A small KV pool makes the
run evict, so a missed or invented BlockRemoved shows up as a wrong prediction."""

import os
import random
import subprocess
import threading
import time

import httpx
import msgpack
import pytest
import zmq

from conftest import MODEL_FILE, MODEL_NAME, ROOT, free_port, models_dir

PAGE = 16
TOPIC = b"kv@test-pod@" + MODEL_NAME.encode()
FNV_OFFSET, FNV_PRIME, MASK = 0xcbf29ce484222325, 0x100000001b3, (1 << 64) - 1


def fnv1a(h: int, data: bytes) -> int:
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & MASK
    return h


def block_hash(parent, tokens) -> int:
    h = FNV_OFFSET
    if parent is not None:
        h = fnv1a(h, parent.to_bytes(8, "little"))
    for t in tokens:
        h = fnv1a(h, t.to_bytes(4, "little"))
    return h


def page_hashes(tokens):
    hashes, parent = [], None
    for i in range(len(tokens) // PAGE):
        parent = block_hash(parent, tokens[i * PAGE:(i + 1) * PAGE])
        hashes.append(parent)
    return hashes


class Subscriber:
    """A SUB socket on its own thread: every (topic, seq, payload) in arrival order."""

    def __init__(self, ctx, endpoint):
        self.sock = ctx.socket(zmq.SUB)
        self.sock.setsockopt(zmq.SUBSCRIBE, b"kv@")
        self.sock.connect(endpoint)
        self.messages, self.lock, self.stop = [], threading.Lock(), False
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        while not self.stop:
            if self.sock.poll(50):
                with self.lock:
                    self.messages.append(self.sock.recv_multipart())

    def settled(self, quiet=0.3, timeout=10.0):
        """The messages once none arrived for `quiet` seconds."""
        deadline, last, since = time.time() + timeout, -1, time.time()
        while time.time() < deadline:
            with self.lock:
                n = len(self.messages)
            if n != last:
                last, since = n, time.time()
            elif time.time() - since >= quiet:
                break
            time.sleep(0.02)
        with self.lock:
            return list(self.messages)

    def close(self):
        self.stop = True
        self.thread.join()
        self.sock.close(0)


class CacheModel:
    """The cache as the events describe it; checks each event against the hashing."""

    def __init__(self):
        self.live, self.stored, self.removed = set(), 0, 0

    def apply(self, event):
        tag = event[0]
        if tag == "BlockStored":
            _, hashes, parent, tokens, block_size, lora_id, medium, lora_name = event
            assert block_size == PAGE and lora_id is None and medium is None and lora_name is None
            assert len(tokens) == PAGE * len(hashes)
            assert parent is None or parent in self.live, "stored below a block not cached"
            for i, h in enumerate(hashes):
                assert h == block_hash(parent, tokens[i * PAGE:(i + 1) * PAGE]), "hash mismatch"
                assert h not in self.live, "stored twice"
                self.live.add(h)
                parent = h
            self.stored += len(hashes)
            return hashes
        if tag == "BlockRemoved":
            _, hashes, medium = event
            assert medium is None
            for h in hashes:
                assert h in self.live, "removed a block never stored"
                self.live.remove(h)
            self.removed += len(hashes)
            return []
        raise AssertionError(f"unexpected event {event!r}")

    def predicted_hit(self, prompt):
        """Tokens the engine finds cached: the leading cached pages of all but the last token,
        less the last of them when only one token would be left (no one-token prompt chunk)."""
        hit = 0
        for h in page_hashes(prompt[:-1]):
            if h not in self.live:
                break
            hit += PAGE
        if hit and len(prompt) - hit == 1:
            hit -= PAGE
        return hit


@pytest.fixture(scope="module")
def kv_server(tmp_path_factory):
    pub_port, replay_port, port = free_port(), free_port(), free_port()
    config = (f'{{"enable_kv_cache_events": true, "publisher": "zmq", "endpoint": "tcp://*:{pub_port}",'
              f' "replay_endpoint": "tcp://*:{replay_port}", "topic": "{TOPIC.decode()}"}}')
    log_path = tmp_path_factory.mktemp("kv") / "kv.log"
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [os.environ.get("FERRITE_BIN", str(ROOT / "target/release/ferrite")), "serve",
         str(models_dir() / MODEL_FILE), "--port", str(port), "--served-model-name", MODEL_NAME,
         "--kv-cache-memory", "12MiB", "--max-model-len", "160", "--kv-events-config", config],
        stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        assert proc.poll() is None, log_path.read_text()
        try:
            if httpx.get(url + "/ready", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    yield url, pub_port, replay_port
    proc.terminate()
    proc.wait(timeout=30)
    log.close()
    assert "panicked" not in log_path.read_text()


def num_pages(url):
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith("ferrite:cache_config_info{"):
            return int(line.split('num_gpu_blocks="')[1].split('"')[0])
    raise AssertionError("no cache_config_info")


def scripted_prompts(pool_pages):
    """Distinct prompts, prompts sharing a prefix, and returns to earlier prompts, for about
    three pools' worth of pages, so that blocks are shared, hit and evicted."""
    rng = random.Random(7)
    base = [[rng.randrange(200, 40000) for _ in range(rng.randrange(40, 110))] for _ in range(8)]
    script = []
    for i, p in enumerate(base):
        script.append(p)
        script.append(p[:3 * PAGE + 5] + [rng.randrange(200, 40000) for _ in range(30)])
        if i >= 2:
            script.append(base[i - 2])
        script.append(p)
    assert sum(len(p) // PAGE for p in script) > 2 * pool_pages
    return script


def test_every_stored_and_evicted_block_is_reported_and_nothing_else(kv_server):
    url, pub_port, replay_port = kv_server
    pool = num_pages(url)
    ctx = zmq.Context()
    sub = Subscriber(ctx, f"tcp://127.0.0.1:{pub_port}")
    time.sleep(0.5)  # the subscription reaches the PUB socket before the first event
    model, seen = CacheModel(), 0
    hits = 0
    try:
        for prompt in scripted_prompts(pool):
            expected_hit = model.predicted_hit(prompt)
            r = httpx.post(url + "/v1/completions", timeout=60, json={
                "model": MODEL_NAME, "prompt": prompt, "max_tokens": 1, "temperature": 0})
            assert r.status_code == 200, r.text
            cached = r.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
            assert cached == expected_hit, (cached, expected_hit)
            hits += cached > 0
            messages = sub.settled()
            stored_now = []
            for topic, seq, payload in messages[seen:]:
                assert topic == TOPIC
                assert int.from_bytes(seq, "big") == seen
                ts, events, rank = msgpack.unpackb(payload, raw=False)
                assert rank == 0 and abs(ts - time.time()) < 60
                for event in events:
                    stored_now += model.apply(event)
                seen += 1
            # Every full page of the prompt is cached now, and only those were stored.
            wanted = page_hashes(prompt)
            assert set(wanted) <= model.live
            assert set(stored_now) <= set(wanted)
            assert len(model.live) <= pool
        assert hits >= 8 and model.removed > 0 and model.stored > pool
        print(f"{seen} batches: {model.stored} blocks stored, {model.removed} removed, pool {pool}")

        # The replay socket sends the same batches again, then the end marker.
        dealer = ctx.socket(zmq.DEALER)
        dealer.connect(f"tcp://127.0.0.1:{replay_port}")
        dealer.send_multipart([b"", (0).to_bytes(8, "big")])
        replayed = []
        while True:
            assert dealer.poll(10_000), "no replay answer"
            empty, seq, payload = dealer.recv_multipart()
            assert empty == b""
            if int.from_bytes(seq, "big", signed=True) == -1:
                assert payload == b""
                break
            replayed.append((seq, payload))
        assert replayed == [(s, p) for _, s, p in sub.settled()]
        dealer.close(0)
    finally:
        sub.close()
        ctx.term()
