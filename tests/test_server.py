"""`colibri serve` end to end, on the bundled demo model in a child process: the official
openai client, batch invariance over HTTP, 4xx for bad input (and healthy after), a
disconnect storm, /metrics through prometheus-client's parser, the OpenAPI schema, the log,
loading, timeouts and the queue limit."""
from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import colibri
from colibri.server import protocol as P

from server_process import Server, request, sse_events

DEMO = Path(colibri.__file__).resolve().parent / "demo_model"
KEY = "test-key-123"
AUTH = {"Authorization": f"Bearer {KEY}"}
MODEL = "colibri-demo"
TEXTS = ["And it came to pass", "It is a truth universally acknowledged, that a single man in possession",
         "In the beginning God created the heaven and the earth. And the earth was without form, and void",
         "Elizabeth", "Mr. Darcy said", "And the LORD spake unto Moses, saying, Speak unto the children of Israel",
         "She was", "Thou shalt not"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(["-t", "1", "-np", "4", "--max-queue", "12", "--api-key", KEY, "--max-tokens", "256",
                "--max-body", "65536"], tmp_path_factory.mktemp("serve") / "server.log")
    try:
        s.wait_ready()
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def demo():
    with colibri.load(DEMO, threads=1) as m:
        yield m


@pytest.fixture(scope="module")
def client(server):
    openai = pytest.importorskip("openai")
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0)


def post(server, path, body, headers=AUTH, **kw):
    return request(server.port, "POST", path, body, headers, **kw)


def metrics(server) -> dict[str, list]:
    """{sample name: [(labels, value)]} of /metrics, through prometheus-client's parser."""
    from prometheus_client.parser import text_string_to_metric_families

    status, _, text = request(server.port, "GET", "/metrics")
    assert status == 200
    samples: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples.setdefault(s.name, []).append((s.labels, s.value))
    return samples


def metric(server, name: str, **labels) -> float:
    return sum(v for l, v in metrics(server)[name] if all(l.get(k) == x for k, x in labels.items()))


def token_ids(events_or_choice) -> list[int]:
    """Token ids from the colibri.routes of stream chunks or of a whole choice."""
    if isinstance(events_or_choice, dict):
        return [r["token"] for r in events_or_choice["colibri"]["routes"]]
    return [r["token"] for e in events_or_choice if isinstance(e, dict)
            for c in e["choices"] if "colibri" in c for r in c["colibri"]["routes"]]


# ---- the official client -----------------------------------------------------------------------------
def test_openai_chat_non_streamed_and_streamed_agree(client, demo):
    messages = [{"role": "system", "content": "You speak as the King James Bible."},
                {"role": "user", "content": "Who led the children of Israel?"}]
    whole = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=24, seed=11, temperature=0.9)
    choice = whole.choices[0]
    assert whole.object == "chat.completion" and choice.message.role == "assistant"
    assert choice.finish_reason in ("stop", "length") and choice.message.content
    prompt = demo.tokenizer.encode(demo.tokenizer.render_chat(messages), add_special_tokens=False)
    assert whole.usage.prompt_tokens == len(prompt)
    assert whole.usage.total_tokens == whole.usage.prompt_tokens + whole.usage.completion_tokens
    chunks = list(client.chat.completions.create(model=MODEL, messages=messages, max_tokens=24, seed=11,
                                                 temperature=0.9, stream=True,
                                                 stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == choice.message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == choice.finish_reason
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert chunks[-1].usage.prompt_tokens == len(prompt)


def test_openai_completions_stop_seed_n_and_usage(client):
    free = client.completions.create(model=MODEL, prompt=TEXTS[0], max_tokens=30, temperature=0.0)
    text = free.choices[0].text
    assert free.choices[0].finish_reason == "length" and free.usage.completion_tokens == 30
    stop = text[12:16]
    cut = client.completions.create(model=MODEL, prompt=TEXTS[0], max_tokens=30, temperature=0.0, stop=[stop])
    assert cut.choices[0].text == text[:text.index(stop)] and cut.choices[0].finish_reason == "stop"
    a = client.completions.create(model=MODEL, prompt=TEXTS[1], max_tokens=20, seed=5, temperature=1.0)
    b = client.completions.create(model=MODEL, prompt=TEXTS[1], max_tokens=20, seed=5, temperature=1.0)
    assert a.choices[0].text == b.choices[0].text
    two = client.completions.create(model=MODEL, prompt=TEXTS[1], max_tokens=20, seed=5, temperature=1.0, n=2)
    six = client.completions.create(model=MODEL, prompt=TEXTS[1], max_tokens=20, seed=6, temperature=1.0)
    assert [c.index for c in two.choices] == [0, 1]
    assert two.choices[0].text == a.choices[0].text and two.choices[1].text == six.choices[0].text
    assert two.usage.prompt_tokens == a.usage.prompt_tokens
    assert two.usage.completion_tokens == a.usage.completion_tokens + six.usage.completion_tokens
    streamed = client.completions.create(model=MODEL, prompt=TEXTS[1], max_tokens=20, seed=5, temperature=1.0,
                                         stream=True, stream_options={"include_usage": True})
    chunks = list(streamed)
    assert "".join(c.choices[0].text for c in chunks if c.choices) == a.choices[0].text
    assert chunks[-1].usage.completion_tokens == a.usage.completion_tokens


def test_openai_routes_extension_and_logprobs(client, demo):
    chunks = list(client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Speak"}], max_tokens=8, temperature=0.0, stream=True,
        logprobs=True, top_logprobs=2, extra_body={"colibri": {"routes": True}}))
    token_chunks = [c for c in chunks if c.choices and c.choices[0].model_extra.get("colibri")]
    assert len(token_chunks) >= 1
    for c in token_chunks:
        routes = c.choices[0].model_extra["colibri"]
        assert routes["layers"] == list(demo.config.moe_layers)
        (step,) = routes["routes"]
        assert np.array(step["experts"]).shape == (len(demo.config.moe_layers), demo.config.top_k)
        assert all(abs(sum(g) - 1) < 1e-4 for g in step["gates"])   # renormalised top-k gates
        (lp,) = c.choices[0].logprobs.content
        assert len(lp.top_logprobs) == 2 and lp.top_logprobs[0].logprob >= lp.top_logprobs[1].logprob
        assert lp.logprob == lp.top_logprobs[0].logprob   # greedy picks the most likely


# ---- batch invariance over HTTP ----------------------------------------------------------------------
def _completion(server, prompt, **fields) -> dict:
    status, _, body = post(server, "/v1/completions", {"prompt": prompt, "colibri": {"routes": True}, **fields})
    assert status == 200, body
    return body


def test_greedy_equals_model_generate(server, demo):
    for text in TEXTS[:3]:
        ids = demo.tokenizer.encode(text)
        body = _completion(server, ids, max_tokens=24, temperature=0.0)
        want = demo.generate(ids, max_tokens=24, temperature=0.0)
        assert token_ids(body["choices"][0]) == want.tokens
        assert body["choices"][0]["text"] == want.text


def test_eight_concurrent_seeded_requests_equal_their_lone_runs(server):
    jobs = [dict(prompt=TEXTS[i], max_tokens=10 + 4 * i, seed=1000 + i, temperature=0.9, top_p=0.95)
            for i in range(8)]
    alone = [token_ids(_completion(server, **job)["choices"][0]) for job in jobs]
    results: list = [None] * 8

    def run(i, delay, stream):
        time.sleep(delay)
        job = {**jobs[i], "colibri": {"routes": True}}
        if stream:
            results[i] = token_ids(sse_events(server.port, "/v1/completions", {**job, "stream": True}, AUTH))
        else:
            results[i] = token_ids(_completion(server, **jobs[i])["choices"][0])

    for order in (range(8), reversed(range(8))):   # staggered arrival, two orders, 8 requests in 4 slots
        threads = [threading.Thread(target=run, args=(i, 0.04 * k, i % 2 == 0)) for k, i in enumerate(order)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert results == alone
        results = [None] * 8


def test_prefix_cache_hit_gives_the_same_tokens_and_is_counted(server):
    system = "And the LORD spake unto Moses, saying, Speak unto the children of Israel, and say unto them, "
    hits = metric(server, "vllm:prefix_cache_hits_total")
    first = _completion(server, system + "When", max_tokens=12, seed=3, temperature=0.9)
    second = _completion(server, system + "When", max_tokens=12, seed=3, temperature=0.9)
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    assert token_ids(first["choices"][0]) == token_ids(second["choices"][0])
    assert metric(server, "vllm:prefix_cache_hits_total") > hits


# ---- bad input -------------------------------------------------------------------------------------------
CHAT = "/v1/chat/completions"
COMP = "/v1/completions"
MSG = [{"role": "user", "content": "hi"}]
BAD = [
    # (path, body (dict) or raw bytes, headers, status, words the message must contain)
    (CHAT, b"{", AUTH, 400, "invalid JSON"),
    (CHAT, b"[]", AUTH, 400, "JSON object"),
    (CHAT, b'"hi"', AUTH, 400, "JSON object"),
    (CHAT, {}, AUTH, 400, "missing field 'messages'"),
    (CHAT, {"messages": []}, AUTH, 400, "messages"),
    (CHAT, {"messages": [{"role": "robot", "content": "x"}]}, AUTH, 400, "messages[0].role"),
    (CHAT, {"messages": [{"role": "user", "content": 5}]}, AUTH, 400, "messages[0].content"),
    (CHAT, {"messages": [{"role": "user", "content": None}]}, AUTH, 400, "messages[0].content"),
    (CHAT, {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
     AUTH, 400, "messages[0].content"),
    (CHAT, {"messages": MSG, "foo": 1}, AUTH, 400, "unsupported field 'foo'"),
    (CHAT, {"messages": MSG, "tools": []}, AUTH, 400, "unsupported field 'tools'"),
    (CHAT, {"messages": MSG, "response_format": {"type": "json_object"}}, AUTH, 400, "'response_format'"),
    (CHAT, {"messages": MSG, "logit_bias": {"1": 5}}, AUTH, 400, "'logit_bias'"),
    (CHAT, {"messages": [{"role": "user", "content": "x", "tool_calls": []}]}, AUTH, 400, "'messages[0].tool_calls'"),
    (CHAT, {"messages": MSG, "temperature": -1}, AUTH, 400, "temperature"),
    (CHAT, {"messages": MSG, "temperature": 3}, AUTH, 400, "temperature"),
    (CHAT, {"messages": MSG, "temperature": "hot"}, AUTH, 400, "temperature"),
    (CHAT, b'{"messages": [{"role": "user", "content": "x"}], "temperature": NaN}', AUTH, 400, "temperature"),
    (CHAT, {"messages": MSG, "top_p": 0}, AUTH, 400, "top_p"),
    (CHAT, {"messages": MSG, "top_p": 1.5}, AUTH, 400, "top_p"),
    (CHAT, {"messages": MSG, "top_k": -5}, AUTH, 400, "top_k"),
    (CHAT, {"messages": MSG, "top_k": 1.5}, AUTH, 400, "top_k"),
    (CHAT, {"messages": MSG, "min_p": 2}, AUTH, 400, "min_p"),
    (CHAT, {"messages": MSG, "max_tokens": 0}, AUTH, 400, "max_tokens"),
    (CHAT, {"messages": MSG, "max_tokens": -1}, AUTH, 400, "max_tokens"),
    (CHAT, {"messages": MSG, "max_tokens": "10"}, AUTH, 400, "max_tokens"),
    (CHAT, {"messages": MSG, "max_tokens": True}, AUTH, 400, "max_tokens"),
    (CHAT, {"messages": MSG, "max_tokens": 10**12}, AUTH, 400, "max_tokens"),
    (CHAT, {"messages": MSG, "max_tokens": 300}, AUTH, 400, "at most 256"),
    (CHAT, {"messages": MSG, "max_tokens": 5, "max_completion_tokens": 6}, AUTH, 400, "max_completion_tokens"),
    (CHAT, {"messages": MSG, "n": 0}, AUTH, 400, "n"),
    (CHAT, {"messages": MSG, "n": 100}, AUTH, 400, "n"),
    (CHAT, {"messages": MSG, "seed": -1}, AUTH, 400, "seed"),
    (CHAT, {"messages": MSG, "seed": 2**53}, AUTH, 400, "seed"),
    (CHAT, {"messages": MSG, "stop": ["a", "b", "c", "d", "e"]}, AUTH, 400, "stop"),
    (CHAT, {"messages": MSG, "stop": ""}, AUTH, 400, "stop"),
    (CHAT, {"messages": MSG, "stop": 5}, AUTH, 400, "stop"),
    (CHAT, {"messages": MSG, "presence_penalty": 3}, AUTH, 400, "presence_penalty"),
    (CHAT, {"messages": MSG, "frequency_penalty": -3}, AUTH, 400, "frequency_penalty"),
    (CHAT, {"messages": MSG, "repetition_penalty": 0}, AUTH, 400, "repetition_penalty"),
    (CHAT, {"messages": MSG, "stream": "yes"}, AUTH, 400, "stream"),
    (CHAT, {"messages": MSG, "stream_options": {"include_usage": True}}, AUTH, 400, "stream_options"),
    (CHAT, {"messages": MSG, "top_logprobs": 2}, AUTH, 400, "top_logprobs"),
    (CHAT, {"messages": MSG, "logprobs": True, "top_logprobs": 30}, AUTH, 400, "top_logprobs"),
    (CHAT, {"messages": MSG, "ignore_eos": "x"}, AUTH, 400, "ignore_eos"),
    (CHAT, {"messages": MSG, "colibri": {"routes": "yes"}}, AUTH, 400, "colibri.routes"),
    (CHAT, {"messages": MSG, "colibri": {"heat": 1}}, AUTH, 400, "unsupported field 'colibri.heat'"),
    (CHAT, {"messages": MSG, "user": "u" * 300}, AUTH, 400, "user"),
    (CHAT, b'{"messages": [{"role": "user", "content": "\\ud800"}]}', AUTH, 400, "invalid Unicode"),
    (CHAT, {"messages": MSG, "model": "gpt-4"}, AUTH, 404, "model 'gpt-4' does not exist"),
    (CHAT, {"messages": MSG}, {}, 401, "API key"),
    (CHAT, {"messages": MSG}, {"Authorization": "Bearer wrong"}, 401, "API key"),
    (CHAT, {"messages": MSG}, {"Authorization": KEY}, 401, "API key"),
    (CHAT, {"messages": [{"role": "user", "content": "x" * 70000}]}, AUTH, 413, "exceeds 65536 bytes"),
    (COMP, {"prompt": ""}, AUTH, 400, "prompt"),
    (COMP, {"prompt": []}, AUTH, 400, "prompt"),
    (COMP, {"prompt": [1, "a"]}, AUTH, 400, "prompt"),
    (COMP, {"prompt": [999999]}, AUTH, 400, "token id 999999 is out of range"),
    (COMP, {"prompt": [-1]}, AUTH, 400, "prompt"),
    (COMP, {"prompt": list(range(5, 605))}, AUTH, 400, "the prompt has 600 tokens; the context holds 512"),
    (COMP, {"prompt": "x", "logprobs": 6}, AUTH, 400, "logprobs"),
    (COMP, {"prompt": "x", "echo": True}, AUTH, 400, "unsupported field 'echo'"),
    (COMP, {"prompt": "x", "best_of": 2}, AUTH, 400, "unsupported field 'best_of'"),
    (COMP, {"prompt": "x", "suffix": "y"}, AUTH, 400, "unsupported field 'suffix'"),
    ("/tokenize", {"prompt": "x", "messages": MSG}, AUTH, 400, "unsupported field"),
    ("/tokenize", {}, AUTH, 400, "missing field"),
    ("/detokenize", {"tokens": [1, 99999]}, AUTH, 400, "id 99999 is out of range"),
    ("/nope", {}, AUTH, 404, "Not Found"),
]


def test_bad_requests_get_the_right_4xx_and_the_server_stays_healthy(server):
    assert len(BAD) >= 40
    for path, body, headers, status, words in BAD:
        raw = body if isinstance(body, bytes) else None
        got, hdrs, reply = request(server.port, "POST", path, None if raw else body, headers, raw=raw)
        assert got == status, (path, body if raw is None else raw[:80], reply)
        error = reply["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert words in error["message"] and "\n" not in error["message"] and "Traceback" not in error["message"]
        if status == 401:
            assert hdrs.get("www-authenticate") == "Bearer"
    got, _, reply = request(server.port, "GET", CHAT, headers=AUTH)
    assert got == 405 and "error" in reply
    assert request(server.port, "GET", "/health")[0] == 200
    status, _, body = post(server, CHAT, {"messages": MSG, "max_tokens": 4})
    assert status == 200 and body["usage"]["completion_tokens"] >= 1
    assert "Traceback" not in server.log()


# ---- disconnects ----------------------------------------------------------------------------------------
def _cut_stream(port: int, body: dict) -> None:
    """Start a streamed completion, read until its first token arrives, then hang up."""
    payload = json.dumps(body).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Authorization: Bearer " + KEY.encode() + b"\r\nContent-Length: " +
                     str(len(payload)).encode() + b"\r\n\r\n" + payload)
        seen = b""
        while b'"text":"' not in seen.split(b"\r\n\r\n", 1)[-1]:
            data = sock.recv(4096)
            assert data, seen
            seen += data
        assert b" 200 " in seen.split(b"\r\n", 1)[0]


def _cut_request(port: int, body: dict) -> None:
    """Send a whole (not streamed) completion request and hang up before the answer."""
    payload = json.dumps(body).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Authorization: Bearer " + KEY.encode() + b"\r\nContent-Length: " +
                     str(len(payload)).encode() + b"\r\n\r\n" + payload)
        time.sleep(0.3)


def test_disconnect_storm_frees_every_slot(server):
    aborted = metric(server, "vllm:request_success_total", finished_reason="abort")
    body = {"prompt": TEXTS[1], "max_tokens": 200, "stream": True, "ignore_eos": True}
    for wave in range(10):   # 100 streams cut mid-way, 10 at a time (4 slots, queue of 12)
        threads = [threading.Thread(target=_cut_stream, args=(server.port, body)) for _ in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    threads = [threading.Thread(target=_cut_request, args=(server.port, {**body, "stream": False}))
               for _ in range(4)]   # and 4 whole-response requests whose clients leave
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = metrics(server)
        if m["vllm:num_requests_running"][0][1] == 0 and m["vllm:num_requests_waiting"][0][1] == 0:
            break
        time.sleep(0.1)
    assert metric(server, "vllm:num_requests_running") == 0
    assert metric(server, "vllm:num_requests_waiting") == 0
    assert metric(server, "vllm:kv_cache_usage_perc") == 0
    assert metric(server, "vllm:request_success_total", finished_reason="abort") - aborted == 104
    # all 4 slots are free again: 4 requests run side by side
    peak = []
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak.append(metric(server, "vllm:num_requests_running"))
            time.sleep(0.02)

    watcher = threading.Thread(target=sample)
    watcher.start()
    threads = [threading.Thread(target=_completion, args=(server, TEXTS[i]),
                                kwargs=dict(max_tokens=120, ignore_eos=True)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    done.set()
    watcher.join()
    assert max(peak) == 4


# ---- metrics, schema, log --------------------------------------------------------------------------------
def test_metrics_parse_and_add_up(server, demo):
    _completion(server, TEXTS[2], max_tokens=6, temperature=0.0)
    m = metrics(server)
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                 "vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:time_to_first_token_seconds_count",
                 "vllm:inter_token_latency_seconds_bucket", "vllm:e2e_request_latency_seconds_sum",
                 "vllm:request_success_total", "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
                 "colibri:expert_tokens_total", "colibri:expert_load_balance"):
        assert name in m, name
        assert all(labels.get("model_name") == MODEL for labels, _ in m[name])
    assert metric(server, "vllm:generation_tokens_total") > 0
    assert metric(server, "vllm:request_success_total", finished_reason="length") > 0
    routed = {}
    for labels, value in m["colibri:expert_tokens_total"]:
        routed[int(labels["layer"])] = routed.get(int(labels["layer"]), 0) + value
    fed = m["colibri:batch_tokens_total"][0][1]
    assert sorted(routed) == list(demo.config.moe_layers)
    assert all(v == fed * demo.config.top_k for v in routed.values())
    assert all(0 < v <= 1 for _, v in m["colibri:expert_load_balance"])


def test_responses_match_the_openapi_models(server):
    status, _, schema = request(server.port, "GET", "/openapi.json")
    assert status == 200
    chat = schema["paths"]["/v1/chat/completions"]["post"]
    assert "422" not in chat["responses"] and {"400", "401", "413", "429"} <= set(chat["responses"])
    assert chat["security"] == [{"bearer": []}]
    request_schema = schema["components"]["schemas"]["ChatCompletionRequest"]
    assert request_schema["additionalProperties"] is False
    assert request_schema["properties"]["model"]["anyOf"][0]["enum"] == [MODEL]
    status, _, body = post(server, CHAT, {"messages": MSG, "max_tokens": 5, "logprobs": True, "top_logprobs": 1,
                                          "colibri": {"routes": True}, "n": 2})
    P.ChatCompletion.model_validate(body)
    for e in sse_events(server.port, CHAT, {"messages": MSG, "max_tokens": 5, "stream": True, "logprobs": True,
                                            "colibri": {"routes": True}, "stream_options": {"include_usage": True}},
                        AUTH)[:-1]:
        P.ChatCompletionChunk.model_validate(e)
    status, _, body = post(server, COMP, {"prompt": ["a", "b"], "max_tokens": 5, "logprobs": 2})
    assert [c["index"] for c in P.Completion.model_validate(body).model_dump()["choices"]] == [0, 1]
    for e in sse_events(server.port, COMP, {"prompt": "x", "max_tokens": 5, "stream": True, "logprobs": 1}, AUTH)[:-1]:
        P.Completion.model_validate(e)
    status, _, models = request(server.port, "GET", "/v1/models", headers=AUTH)
    P.ModelList.model_validate(models)
    status, _, tokens = post(server, "/tokenize", {"messages": MSG})
    P.TokenizeResponse.model_validate(tokens)
    status, _, text = post(server, "/detokenize", {"tokens": tokens["tokens"]})
    assert P.DetokenizeResponse.model_validate(text).prompt.endswith("<|im_start|>assistant\n")


def test_one_log_line_per_request(server):
    status, _, body = post(server, COMP, {"prompt": TEXTS[3], "max_tokens": 3, "user": "tester"})
    deadline = time.monotonic() + 10   # the line is written once the response has gone out
    while True:
        lines = [l for l in server.log().splitlines() if body["id"] in l]
        if lines or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(lines) == 1
    line = lines[0]
    assert "POST /v1/completions 200" in line and "prompt=" in line and "output=3" in line
    assert "finish=length" in line and "ttft=" in line and "user='tester'" in line


# ---- loading, timeouts, a full queue ------------------------------------------------------------------------
def test_health_is_503_while_loading():
    import uvicorn

    from colibri.server import ServerConfig, create_app
    from server_process import free_port

    app = create_app(ServerConfig(model=DEMO, model_name=MODEL), load=False)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        status, headers, body = request(port, "GET", "/health")
        assert status == 503 and body == {"status": "loading"} and headers["retry-after"] == "5"
        status, _, body = request(port, "POST", CHAT, {"messages": MSG})
        assert status == 503 and "still loading" in body["error"]["message"]
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def test_timeout(tmp_path):
    # 500 tokens of the demo model take ~0.4 s on a quiet core; 0.05 s cannot hold them
    s = Server(["-t", "1", "-np", "1", "--timeout", "0.05"], tmp_path / "server.log")
    try:
        s.wait_ready()
        long = {"prompt": TEXTS[0], "max_tokens": 500, "ignore_eos": True}
        status, _, body = request(s.port, "POST", COMP, long)
        assert status == 504 and "timeout (0.05 s)" in body["error"]["message"]
        events = sse_events(s.port, COMP, {**long, "stream": True})
        assert events[-1] == "[DONE]" and "timeout" in events[-2]["error"]["message"]
        assert request(s.port, "GET", "/health")[0] == 200
    finally:
        s.stop()


def test_full_queue_answers_429_with_retry_after(tmp_path):
    s = Server(["-t", "1", "-np", "1", "--max-queue", "1"], tmp_path / "server.log")
    try:
        s.wait_ready()
        long = {"prompt": TEXTS[0], "max_tokens": 500, "ignore_eos": True}
        statuses = []

        def hit():
            st, hdrs, _ = request(s.port, "POST", COMP, long)
            statuses.append((st, hdrs.get("retry-after")))

        # one slot and one queue place: of five at once, at least three are turned away
        threads = [threading.Thread(target=hit) for _ in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert (429, "1") in statuses
        assert {st for st, _ in statuses} <= {200, 429} and (200, None) in statuses
        assert request(s.port, "GET", "/health")[0] == 200
    finally:
        s.stop()


def test_a_model_that_cannot_load_stops_the_server_with_one_line(tmp_path):
    bad = tmp_path / "model"
    bad.mkdir()
    (bad / "config.json").write_text("{}")
    s = Server([str(bad)], tmp_path / "server.log")
    try:
        assert s.proc.wait(timeout=60) == 2
    finally:
        s.stop()
    assert "colibri: error:" in s.log() and "Traceback" not in s.log()



# ---- the chat page in a browser ------------------------------------------------------------------------------
def _chromium() -> str | None:
    import shutil

    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


def test_chat_page_streams_an_answer_and_draws_the_heatmap(server, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
    browser_path = _chromium()
    if browser_path is None:
        pytest.skip("no Chromium here (apt-get install chromium; .ci/run installs it)")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 700})
            page.goto(server.url + "/")
            page.wait_for_selector("#status.bad")                 # the key is missing: /v1/models said 401
            page.fill("#api_key", KEY)
            page.dispatch_event("#api_key", "change")
            page.wait_for_selector("#status.ok")
            page.fill("#seed", "3")
            page.fill("#max_tokens", "24")
            page.fill("#input", "Who was Moses?")
            page.press("#input", "Enter")
            page.wait_for_function("document.getElementById('send').disabled === false && "
                                   "document.querySelector('.msg.assistant') !== null", timeout=60000)
            page.screenshot(path=str(tmp_path / "page.png"))
            answer = page.inner_text(".msg.assistant")
            drawn = int(page.get_attribute("#heatmap", "data-tokens"))
            counts = page.evaluate("state.counts.map((row) => Array.from(row))")
            colours = page.evaluate("""() => { const c = document.getElementById('heatmap');
                const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                const seen = new Set(); for (let i = 0; i < d.length; i += 4) seen.add(d[i] + ',' + d[i+1] + ',' + d[i+2]);
                return seen.size; }""")
        finally:
            browser.close()
    status, _, body = post(server, CHAT, {"messages": [{"role": "user", "content": "Who was Moses?"}], "seed": 3,
                                          "max_tokens": 24, "temperature": 0.8, "top_p": 1, "top_k": 0,
                                          "colibri": {"routes": True}})
    assert status == 200
    assert answer == body["choices"][0]["message"]["content"]       # the page streamed the same answer
    tokens = len(body["choices"][0]["colibri"]["routes"])
    assert drawn == tokens >= 1
    assert [sum(row) for row in counts] == [tokens * 2] * 4        # top-2 experts per token in each layer
    assert colours > 4                                              # cells shaded by their share


# ---- a paged model (docs/PAGING.md) --------------------------------------------------------------------
def test_paged_model_serves_the_same_tokens_and_exports_its_cache(tmp_path, demo):
    """4 layers x 8 experts through 5 slots: the same greedy tokens as the resident model, and
    the expert cache's counters on /metrics."""
    s = Server(["-t", "1", "-np", "2", "--expert-slots", "5"], tmp_path / "server.log")
    try:
        s.wait_ready()
        for text in TEXTS[:2]:
            ids = demo.tokenizer.encode(text)
            status, _, body = request(s.port, "POST", COMP, {"prompt": ids, "max_tokens": 16, "temperature": 0.0,
                                                             "colibri": {"routes": True}})
            assert status == 200
            assert token_ids(body["choices"][0]) == demo.generate(ids, max_tokens=16, temperature=0.0).tokens
        m = metrics(s)
        lookups, hits, misses, read = (m[f"colibri:expert_cache_{name}_total"][0][1]
                                       for name in ("lookups", "hits", "misses", "bytes_read"))
        assert m["colibri:expert_cache_n_slots"][0][1] == 5 and lookups == hits + misses > 0 and read > 0
    finally:
        s.stop()
