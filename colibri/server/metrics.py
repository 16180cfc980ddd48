"""/metrics: Prometheus text through prometheus-client, under vLLM's names so that existing
dashboards and the Kubernetes inference gateway read a Colibri replica, plus Colibri's own
routing figures.

Everything lives in one CollectorRegistry (Metrics.registry). Another part of Colibri adds
its figures with `metrics.add(collector)`: any object with a `collect()` that yields
prometheus-client metric families, read at scrape time (see EngineCollector), or metrics
created with `registry=metrics.registry`.
"""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from ..serving import Observer, Usage

LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                   10.0, 20.0, 40.0, 80.0)
TOKEN_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
# vLLM's finished_reason values: Colibri's cancelled, timeout and error are its "abort"
FINISHED_REASON = {"stop": "stop", "length": "length", "cancelled": "abort", "timeout": "abort", "error": "abort"}


class Metrics(Observer):
    """The server's registry; as the engine's Observer it records each request's timings."""

    def __init__(self, model_name: str):
        self.model_name = model_name
        self.registry = CollectorRegistry()
        r, label = self.registry, ["model_name"]
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Prompt tokens processed (prefix-cache hits "
                                     "included).", label, registry=r).labels(model_name)
        self.generation_tokens = Counter("vllm:generation_tokens", "Tokens generated.", label,
                                         registry=r).labels(model_name)
        self.request_success = Counter("vllm:request_success", "Finished requests by finish reason (abort: "
                                       "cancelled, timed out or failed).", label + ["finished_reason"], registry=r)
        for reason in sorted(set(FINISHED_REASON.values())):
            self.request_success.labels(model_name, reason)
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "Time to first token.", label,
                              buckets=LATENCY_BUCKETS, registry=r).labels(model_name)
        self.itl = Histogram("vllm:inter_token_latency_seconds", "Time between consecutive tokens of a "
                             "sequence.", label, buckets=LATENCY_BUCKETS, registry=r).labels(model_name)
        self.e2e = Histogram("vllm:e2e_request_latency_seconds", "Submission to finish.", label,
                             buckets=LATENCY_BUCKETS, registry=r).labels(model_name)
        self.queue_time = Histogram("vllm:request_queue_time_seconds", "Time waiting for a slot.", label,
                                    buckets=LATENCY_BUCKETS, registry=r).labels(model_name)
        self.prompt_len = Histogram("vllm:request_prompt_tokens", "Prompt tokens per sequence.", label,
                                    buckets=TOKEN_BUCKETS, registry=r).labels(model_name)
        self.generation_len = Histogram("vllm:request_generation_tokens", "Generated tokens per sequence.",
                                        label, buckets=TOKEN_BUCKETS, registry=r).labels(model_name)

    def add(self, collector) -> None:
        """Register a collector (read at every scrape)."""
        self.registry.register(collector)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    # ---- Observer (called on the engine's thread) -------------------------------------------
    def first_token(self, seconds: float) -> None:
        self.ttft.observe(seconds)
        self.generation_tokens.inc()

    def inter_token(self, seconds: float) -> None:
        self.itl.observe(seconds)
        self.generation_tokens.inc()

    def finished(self, reason: str, usage: Usage) -> None:
        self.request_success.labels(self.model_name, FINISHED_REASON[reason]).inc()
        self.prompt_tokens.inc(usage.prompt_tokens)
        self.e2e.observe(usage.e2e)
        self.queue_time.observe(usage.queue_time)
        self.prompt_len.observe(usage.prompt_tokens)
        self.generation_len.observe(usage.completion_tokens)


class EngineCollector:
    """The engine's state at scrape time: queue, slots, KV cache, prefix cache, expert use."""

    def __init__(self, engine, model_name: str, moe_layers: list[int]):
        self.engine, self.model_name, self.moe_layers = engine, model_name, moe_layers

    def collect(self):
        e, name = self.engine, [self.model_name]
        gauges = [("vllm:num_requests_running", "Sequences holding a slot.", e.num_running),
                  ("vllm:num_requests_waiting", "Sequences waiting for a slot.", e.num_waiting),
                  ("vllm:kv_cache_usage_perc", "Share of the KV cache's positions in use, 0 to 1.", e.kv_usage())]
        for metric, doc, value in gauges:
            family = GaugeMetricFamily(metric, doc, labels=["model_name"])
            family.add_metric(name, value)
            yield family
        stats = e.stats
        counters = [("vllm:prefix_cache_queries", "Prompt tokens looked up in the prefix cache.",
                     stats.prefix_queries),
                    ("vllm:prefix_cache_hits", "Prompt tokens whose KV the prefix cache supplied.", stats.prefix_hits),
                    ("colibri:forward_steps", "Forward steps (one batch each).", stats.steps),
                    ("colibri:batch_tokens", "Tokens fed to forward steps.", stats.batch_tokens)]
        for metric, doc, value in counters:
            family = CounterMetricFamily(metric, doc, labels=["model_name"])
            family.add_metric(name, value)
            yield family
        if not self.moe_layers:
            return
        routed = CounterMetricFamily("colibri:expert_tokens", "Tokens routed to each expert of each MoE layer.",
                                     labels=["model_name", "layer", "expert"])
        counts = stats.expert_tokens.copy()                                    # [n_moe, E]
        for row, layer in enumerate(self.moe_layers):
            for expert, value in enumerate(counts[row]):
                routed.add_metric(name + [str(layer), str(expert)], int(value))
        yield routed
        balance = GaugeMetricFamily("colibri:expert_load_balance", "Entropy of the experts' shares of the last "
                                    "1024 routed tokens over log(experts): 1 = even, toward 0 = a few take all.",
                                    labels=["model_name", "layer"])
        for layer, value in zip(self.moe_layers, stats.load_balance()):
            balance.add_metric(name + [str(layer)], float(value))
        yield balance


class PagingCollector:
    """A paged model's expert cache at scrape time (docs/PAGING.md): its counters since loading
    (hit rate = hits / lookups, prefetch accuracy = predicted_needed / needed_after_prediction,
    bytes read per token = read_bytes / tokens, stall per token = stall_seconds / tokens)."""

    COUNTERS = [("tokens", "Tokens run through forward steps."),
                ("lookups", "Experts the MoE layers needed, once per layer and step."),
                ("hits", "Needed experts found in a slot (cached or read ahead)."),
                ("misses", "Needed experts read on demand."),
                ("prefetches", "Experts read ahead as the next layers' routers predicted."),
                ("prefetch_used", "Experts read ahead and then needed."),
                ("predicted", "Experts predicted for the next MoE layer."),
                ("predicted_needed", "Experts a layer needed that its prediction named."),
                ("needed_after_prediction", "Experts needed by layers that had a prediction."),
                ("predicted2", "Experts predicted two MoE layers ahead."),
                ("predicted2_needed", "Experts a layer needed that the prediction two layers before named."),
                ("needed_after_prediction2", "Experts needed by layers that had a prediction two layers before."),
                ("reads", "Expert reads from storage."),
                ("bytes_read", "Bytes read from storage."),
                ("stall_seconds", "Seconds forward steps waited for expert reads."),
                ("stall_ahead_seconds", "Of those, seconds waited for reads ahead not done yet."),
                ("early_waves", "Expert passes run while other experts of the layer were still being read.")]

    def __init__(self, model, model_name: str):
        self.model, self.model_name = model, model_name

    def collect(self):
        stats, name = self.model.paging_stats(), [self.model_name]
        for field, doc in self.COUNTERS:
            family = CounterMetricFamily(f"colibri:expert_cache_{field}", doc, labels=["model_name"])
            family.add_metric(name, getattr(stats, field))
            yield family
        for field, doc in (("n_slots", "Expert slots."), ("pinned", "Experts pinned in their slots."),
                           ("slot_bytes", "Bytes of one expert slot.")):
            family = GaugeMetricFamily(f"colibri:expert_cache_{field}", doc, labels=["model_name"])
            family.add_metric(name, getattr(stats, field))
            yield family
