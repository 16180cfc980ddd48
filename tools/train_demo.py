"""Train Colibri's bundled demo model: a small Qwen3-MoE on the KJV Bible and Jane Austen.

Never run in CI. Needs the Debian packages bible-kjv, bible-kjv-text, r-cran-janeaustenr and,
for the plots, matplotlib. A fresh run, then the expert-usage heatmap through colibri:

    nice -n 19 python tools/train_demo.py --steps 1650 --minutes 90 >> /work/demo_work/train.log 2>&1
    python tools/demo_report.py

The shipped checkpoint's exact two-phase recipe is in docs/DEMO_MODEL.md ("Reproducing").

Stages (each resumable from --work):
  1. corpus      tools/demo_data.py -> work/corpus_{train,val}.txt (5% of units held out)
  2. tokenizer   byte-level BPE (tokenizers), 4096 entries incl. ChatML specials
  3. model       Qwen3MoeForCausalLM, AdamW, warmup-stable-cosine-decay, bf16 autocast,
                 router aux loss; checkpoint to work/ckpt.pt every few minutes;
                 --minutes caps this invocation's training time, --resume continues
  4. export      bf16 safetensors + tokenizer + generation config into --out
  5. report      held-out perplexity, 20 samples, word-in-corpus rate, expert usage
                 -> work/report.json, docs/demo_loss.png
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import demo_data  # noqa: E402
import demo_report  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SAMPLE_PROMPTS = [
    "In the beginning", "And the LORD said unto Moses,", "Blessed are the",
    "And it came to pass, when", "The LORD is my shepherd;", "Then answered Jesus and said",
    "And the king of Israel", "For God so loved the world,", "Thus saith the LORD of hosts,",
    "And he went up into the mountain,",
    "It is a truth universally acknowledged,", "Mr. Darcy", "Emma Woodhouse, handsome,",
    "\"My dear Mr. Bennet,\" said his lady", "Elizabeth could not", "Lady Catherine",
    "Anne Elliot", "The family of Dashwood", "Fanny Price", "Catherine Morland",
]
# "word" in the word-in-corpus check: a run of [a-z'] in the lowercased text, with
# leading/trailing apostrophes stripped; empty runs dropped.
WORD = re.compile(r"[a-z']+")


def words(text: str) -> list[str]:
    return [w for w in (m.strip("'") for m in WORD.findall(text.lower())) if w]


def log(msg: str) -> None:
    print(time.strftime("%H:%M:%S"), msg, flush=True)


# --- stage 1 + 2: corpus and tokenizer ------------------------------------------------------

def prepare_corpus(work: Path) -> dict:
    """Write work/corpus_{train,val}.txt and work/corpus_stats.json; return the corpus."""
    corpus = demo_data.build_corpus()
    for split in ("train", "val"):
        (work / f"corpus_{split}.txt").write_text(corpus[split], encoding="utf-8")
    (work / "corpus_stats.json").write_text(json.dumps(corpus["stats"], indent=1))
    return corpus


def train_tokenizer(train_text: str, vocab_size: int):
    """Byte-level BPE over the training split; specials take ids 0, 1, 2."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2,
                                  special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(train_text.split("\n"), trainer)
    return PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>",
                                   pad_token="<|endoftext|>", bos_token=None,
                                   additional_special_tokens=SPECIAL_TOKENS[1:],
                                   chat_template=CHAT_TEMPLATE, model_max_length=512)


def encode_split(tokenizer, text: str) -> np.ndarray:
    """Each source's text (separated by blank lines in the corpus) encoded and closed with
    <|endoftext|>.  ids: [N] uint16."""
    eos = tokenizer.eos_token_id
    ids: list[int] = []
    for part in text.split("\n\n"):
        ids += tokenizer(part, add_special_tokens=False)["input_ids"] + [eos]
    return np.asarray(ids, dtype=np.uint16)


def load_or_build_data(work: Path, vocab_size: int):
    """(tokenizer, train_ids [N] uint16, val_ids [M] uint16, corpus stats); cached in work/."""
    from transformers import PreTrainedTokenizerFast

    tok_dir = work / "tokenizer"
    if not (tok_dir / "tokenizer.json").is_file() or not (work / "train_ids.npy").is_file():
        log("building corpus")
        corpus = prepare_corpus(work)
        log(f"corpus: {corpus['stats']}; training tokenizer (vocab {vocab_size})")
        tokenizer = train_tokenizer(corpus["train"], vocab_size)
        tokenizer.save_pretrained(tok_dir)
        np.save(work / "train_ids.npy", encode_split(tokenizer, corpus["train"]))
        np.save(work / "val_ids.npy", encode_split(tokenizer, corpus["val"]))
    tokenizer = PreTrainedTokenizerFast.from_pretrained(tok_dir)
    stats = json.loads((work / "corpus_stats.json").read_text())
    return tokenizer, np.load(work / "train_ids.npy"), np.load(work / "val_ids.npy"), stats


# --- stage 3: model and training ------------------------------------------------------------

def build_config(args, tokenizer):
    from transformers import Qwen3MoeConfig

    eos = tokenizer.eos_token_id
    return Qwen3MoeConfig(
        vocab_size=len(tokenizer), hidden_size=args.hidden, num_hidden_layers=args.layers,
        num_attention_heads=args.hidden // 64, num_key_value_heads=args.hidden // 128,
        head_dim=64, intermediate_size=4 * args.hidden, moe_intermediate_size=args.moe_inter,
        num_experts=args.experts, num_experts_per_tok=args.top_k, norm_topk_prob=True,
        decoder_sparse_step=1, mlp_only_layers=[], max_position_embeddings=512,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=True, output_router_logits=True, router_aux_loss_coef=args.aux_coef,
        bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)


def lr_at(step: int, args) -> float:
    """Warmup-stable-decay: linear warmup to --lr over --warmup steps, constant, then a cosine
    down to 10% over the last --decay-frac of --steps.  Until the decay starts, --steps can be
    changed on --resume without changing any learning rate already used, so a run stretched
    or shortened that way equals one uninterrupted run with the final --steps."""
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    decay_start = int(args.steps * (1 - args.decay_frac))
    progress = min(1.0, max(0.0, (step - decay_start) / max(1, args.steps - decay_start)))
    return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def balance_loss(out, args) -> torch.Tensor:
    """Router load-balancing loss (Switch/Qwen form: E * sum_e f_e * P_e, = top_k when
    balanced). "global" is transformers' own out.aux_loss, which pools all layers' tokens, so
    one layer's starved expert can hide behind another layer's busy one (this is how the
    shipped model's first phase lost two experts). "per-layer" averages the same loss taken
    over each layer separately."""
    if args.balance == "global":
        return out.aux_loss.float()
    from transformers.models.qwen3_moe.modeling_qwen3_moe import load_balancing_loss_func

    per_layer = [load_balancing_loss_func((logits.float(),), args.experts, args.top_k)
                 for logits in out.router_logits]  # each logits: [B*S, E]
    return torch.stack(per_layer).mean()


def batch_at(ids: np.ndarray, starts: np.ndarray, seq: int) -> torch.Tensor:
    """Windows of seq+1 tokens at `starts`.  out: [B, seq+1] int64."""
    return torch.from_numpy(np.stack([ids[s:s + seq + 1] for s in starts]).astype(np.int64))


@torch.no_grad()
def mean_loss(model, ids: np.ndarray, seq: int, max_windows: int, amp: bool) -> float:
    """Mean next-token cross-entropy over non-overlapping windows of `ids` (first max_windows)."""
    model.eval()
    n_windows = min(max_windows, (len(ids) - 1) // seq)
    total, count = 0.0, 0
    for first in range(0, n_windows, 8):
        starts = np.arange(first, min(first + 8, n_windows)) * seq
        x = batch_at(ids, starts, seq)  # [b, seq+1]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            logits = model(input_ids=x[:, :-1]).logits  # [b, seq, V]
        nll = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), x[:, 1:].flatten(),
                                                reduction="sum")
        total, count = total + nll.item(), count + x[:, 1:].numel()
    model.train()
    return total / count


def train(args, tokenizer, train_ids, val_ids):
    """Train (or resume) until --steps or --minutes; returns (model, history, state)."""
    from transformers import Qwen3MoeForCausalLM

    torch.manual_seed(args.seed)
    model = Qwen3MoeForCausalLM(build_config(args, tokenizer))
    decay = [p for p in model.parameters() if p.dim() >= 2]  # matrices and embeddings
    no_decay = [p for p in model.parameters() if p.dim() < 2]  # norm weights
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    rng = np.random.default_rng(args.seed)
    ckpt_path = args.work / "ckpt.pt"
    state = {"step": 0, "train_seconds": 0.0, "history": []}
    if args.resume and ckpt_path.is_file():
        ckpt = torch.load(ckpt_path, weights_only=False)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["opt"])
        rng.bit_generator.state = ckpt["rng"]
        torch.set_rng_state(ckpt["torch_rng"])
        state = ckpt["state"]
        log(f"resumed at step {state['step']} ({state['train_seconds'] / 60:.1f} min trained)")

    def save_checkpoint():
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                    "rng": rng.bit_generator.state, "torch_rng": torch.get_rng_state(),
                    "state": state}, ckpt_path.with_suffix(".tmp"))
        ckpt_path.with_suffix(".tmp").replace(ckpt_path)

    model.train()
    began, last_save = time.time(), time.time()
    seconds_before = state["train_seconds"]
    window_starts = len(train_ids) - args.seq - 1
    while state["step"] < args.steps:
        if time.time() - began > args.minutes * 60:
            log(f"--minutes {args.minutes} reached at step {state['step']}")
            break
        step = state["step"]
        for group in opt.param_groups:
            group["lr"] = lr_at(step, args)
        x = batch_at(train_ids, rng.integers(0, window_starts, args.batch), args.seq)  # [B, S+1]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.amp):
            out = model(input_ids=x[:, :-1])  # router logits on: out.router_logits, out.aux_loss
            logits = out.logits  # [B, S, V]
        lm_loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1),
                                                    x[:, 1:].flatten())
        aux_loss = balance_loss(out, args)
        loss = lm_loss + args.aux_coef * aux_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        state["step"] = step + 1
        state["train_seconds"] = seconds_before + time.time() - began
        record = {"step": step + 1, "minutes": state["train_seconds"] / 60,
                  "train_loss": lm_loss.item(), "aux_loss": aux_loss.item(),
                  "lr": lr_at(step, args)}
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            record["val_loss"] = mean_loss(model, val_ids, args.seq, 32, args.amp)
        state["history"].append(record)
        if (step + 1) % 10 == 0 or "val_loss" in record:
            log(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                         for k, v in record.items()))
        if time.time() - last_save > args.save_minutes * 60:
            save_checkpoint()
            last_save = time.time()
    save_checkpoint()
    return model, state


# --- stage 4 + 5: export and report ---------------------------------------------------------

def export(model, tokenizer, out: Path) -> None:
    """bf16 safetensors + config, tokenizer files and generation_config.json into out/."""
    from transformers import GenerationConfig

    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("*"):
        stale.unlink()
    model.config.output_router_logits = False
    model.to(torch.bfloat16).save_pretrained(out)
    tokenizer.save_pretrained(out)
    eos = [tokenizer.convert_tokens_to_ids(t) for t in ("<|endoftext|>", "<|im_end|>")]
    GenerationConfig(eos_token_id=eos, pad_token_id=eos[0], do_sample=True,
                     temperature=0.8, top_k=0, top_p=1.0).save_pretrained(out)
    from safetensors import safe_open
    with safe_open(out / "model.safetensors", "pt") as f:
        if "model.layers.0.mlp.experts.0.gate_proj.weight" not in f.keys():
            raise SystemExit(f"{out}/model.safetensors: expected per-expert tensor names")


def plot_losses(history: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.array([r["step"] for r in history])
    train_loss = np.array([r["train_loss"] for r in history])
    width = min(25, len(train_loss))
    smooth = np.convolve(train_loss, np.ones(width) / width, mode="valid")  # [N - width + 1]
    val = [(r["step"], r["val_loss"]) for r in history if "val_loss" in r]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    ax.plot(steps, train_loss, color="tab:blue", alpha=0.25, lw=0.8, label="train (per step)")
    ax.plot(steps[width - 1:], smooth, color="tab:blue", lw=1.5, label=f"train ({width}-step mean)")
    ax.plot(*zip(*val), color="tab:orange", marker="o", ms=3, lw=1.5, label="held-out (first 32 windows: KJV)")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.set_ylim(top=min(8.5, float(train_loss.max())))
    ax.set_title("Colibri demo model (Qwen3-MoE) training")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def sample_texts(model_dir: Path, seed: int) -> list[dict]:
    """20 continuations of 100 tokens at temperature 0.8 from the SAMPLE_PROMPTS."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    samples = []
    for i, prompt in enumerate(SAMPLE_PROMPTS):
        torch.manual_seed(seed + i)
        ids = tokenizer(prompt, return_tensors="pt")["input_ids"]  # [1, P]
        out = model.generate(ids, do_sample=True, temperature=0.8, top_k=0, top_p=1.0,
                             max_new_tokens=100, min_new_tokens=100)  # [1, P+100]
        samples.append({"prompt": prompt,
                        "continuation": tokenizer.decode(out[0, ids.shape[1]:])})
    return samples


def report(args, train_tokens: int, val_ids, state, stats) -> dict:
    from transformers import AutoModelForCausalLM

    model_dir = args.out
    shipped = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    n_windows = (len(val_ids) - 1) // args.seq
    log(f"held-out perplexity over {n_windows} windows")
    val_loss = mean_loss(shipped, val_ids, args.seq, n_windows, amp=False)
    total = sum(p.numel() for p in shipped.parameters())
    per_expert = sum(p.numel() for p in shipped.model.layers[0].mlp.experts.parameters()) \
        // args.experts
    active = total - args.layers * (args.experts - args.top_k) * per_expert
    log("sampling")
    samples = sample_texts(model_dir, args.seed)
    vocabulary = set(words((args.work / "corpus_train.txt").read_text(encoding="utf-8")))
    generated = [w for s in samples for w in words(s["continuation"])]
    known = sum(w in vocabulary for w in generated)
    log("expert usage")
    usage = demo_report.usage_from_transformers(model_dir, val_ids[:args.usage_tokens])
    history = state["history"]
    tail = [r["train_loss"] for r in history[-50:]]
    result = {
        "config": {k: getattr(args, k) for k in ("hidden", "layers", "experts", "top_k",
                                                 "moe_inter", "seq", "batch", "steps", "lr",
                                                 "warmup", "decay_frac", "wd", "aux_coef", "balance", "seed",
                                                 "amp")},
        "params_total": total, "params_active_per_token": active,
        "params_per_expert": per_expert,
        "safetensors_bytes": (model_dir / "model.safetensors").stat().st_size,
        "corpus": stats, "train_tokens": train_tokens,
        "val_tokens": int(len(val_ids)),
        "steps_done": state["step"], "train_minutes": state["train_seconds"] / 60,
        "tokens_seen": state["step"] * args.batch * args.seq,
        "final_train_loss_mean_last50": float(np.mean(tail)),
        "final_val_loss_bf16_weights": val_loss, "val_perplexity": math.exp(val_loss),
        "word_definition": "lowercase [a-z']+ runs, outer apostrophes stripped",
        "generated_words": len(generated), "generated_words_in_train_corpus": known,
        "word_in_corpus_fraction": known / max(1, len(generated)),
        "expert_usage_fraction": usage.tolist(),
        "expert_usage_min": float(usage.min()), "expert_usage_max": float(usage.max()),
        "dead_experts": int((usage == 0).sum()),
        "samples": samples,
        "hardware": {"cpu": cpu_model(), "threads": args.threads,
                     "torch": torch.__version__, "python": platform.python_version()},
    }
    return result


def cpu_model() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return next((line.split(":", 1)[1].strip() for line in out.splitlines()
                 if line.startswith("Model name")), platform.processor())


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=REPO / "colibri" / "demo_model")
    p.add_argument("--docs", type=Path, default=REPO / "docs")
    p.add_argument("--work", type=Path, default=Path("/work/demo_work"))
    p.add_argument("--minutes", type=float, default=70.0, help="training wall-clock cap for this run")
    p.add_argument("--resume", action="store_true", help="continue from work/ckpt.pt")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--top-k", dest="top_k", type=int, default=2)
    p.add_argument("--moe-inter", dest="moe_inter", type=int, default=384)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--lr", type=float, default=1.5e-3)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--decay-frac", dest="decay_frac", type=float, default=0.3)
    p.add_argument("--wd", type=float, default=0.1)
    p.add_argument("--aux-coef", dest="aux_coef", type=float, default=0.01)
    p.add_argument("--balance", choices=["per-layer", "global"], default="per-layer",
                   help="router balance loss per layer (default) or transformers' pooled one")
    p.add_argument("--no-amp", dest="amp", action="store_false", help="train in fp32")
    p.add_argument("--eval-every", dest="eval_every", type=int, default=100)
    p.add_argument("--save-minutes", dest="save_minutes", type=float, default=5.0)
    p.add_argument("--usage-tokens", dest="usage_tokens", type=int, default=32768)
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.hidden % 128:
        raise SystemExit(f"--hidden {args.hidden}: must be a multiple of 128 (64-wide heads, GQA 2:1)")
    torch.set_num_threads(args.threads)
    args.work.mkdir(parents=True, exist_ok=True)
    tokenizer, train_ids, val_ids, stats = load_or_build_data(args.work, args.vocab)
    log(f"tokens: train {len(train_ids)}, val {len(val_ids)}, vocab {len(tokenizer)}")
    model, state = train(args, tokenizer, train_ids, val_ids)
    export(model, tokenizer, args.out)
    log(f"exported to {args.out}")
    args.docs.mkdir(parents=True, exist_ok=True)
    plot_losses(state["history"], args.docs / "demo_loss.png")
    result = report(args, len(train_ids), val_ids, state, stats)
    (args.work / "report.json").write_text(json.dumps(result, indent=1))
    log("report: " + json.dumps({k: v for k, v in result.items()
                                 if k not in ("samples", "expert_usage_fraction", "corpus")}))


if __name__ == "__main__":
    main()
