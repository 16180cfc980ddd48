"""The colibri command line, run as a user would (a subprocess per call)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import colibri

WORDS = ("the a cat dog sat ran on under mat log and then it was good bad day night house tree "
         "<|im_start|> <|im_end|> user assistant system").split()
CHATML = ("{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> {% endfor %}"
          "{% if add_generation_prompt %}<|im_start|> assistant {% endif %}")


def _word_tokenizer(directory, vocab_size: int) -> None:
    """A whitespace word-level tokenizer (HF tokenizers) sized to the model's vocabulary."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {"[UNK]": 0}
    for w in WORDS:
        vocab.setdefault(w, len(vocab))
    assert len(vocab) <= vocab_size
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    tok.add_special_tokens(["<|im_start|>", "<|im_end|>"])
    tok.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps(
        {"eos_token": "<|im_end|>", "chat_template": CHATML, "tokenizer_class": "PreTrainedTokenizerFast"}))


@pytest.fixture(scope="module")
def model_dir(tiny_model_factory, tmp_path_factory):
    src = tiny_model_factory("qwen2_moe-a").path
    dst = tmp_path_factory.mktemp("cli") / "model"
    shutil.copytree(src, dst)
    _word_tokenizer(dst, 113)
    return dst


def colibri_cli(*args, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    # run outside the source tree so the installed package (with its libcolibri) is the one imported
    return subprocess.run([sys.executable, "-m", "colibri", *map(str, args)], input=stdin,
                          capture_output=True, text=True, timeout=300, env=env, cwd=tempfile.gettempdir())


def test_run_with_prompt_streams_text(model_dir):
    r = colibri_cli("run", model_dir, "-p", "the cat sat", "-n", "6", "--temp", "0", "-t", "2")
    assert r.returncode == 0, r.stderr
    with colibri.load(model_dir) as m:
        expected = m.generate("the cat sat", max_tokens=6, temperature=0.0).text
    assert r.stdout == expected + "\n"


def test_run_interactive_chat_reads_stdin(model_dir):
    r = colibri_cli("run", model_dir, "-n", "4", "--temp", "0", stdin="the dog ran\nthe cat\n")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 2


def test_route_prints_and_checks_experts(model_dir):
    with colibri.load(model_dir) as m:
        ids = m.tokenizer.encode("the cat sat on the mat")
        layer = m.config.moe_layers[-1]
        selected = next(r for r in m.route(ids) if r.layer == layer).experts[-1]
    r = colibri_cli("route", model_dir, "--input", "the cat sat on the mat", "--layer", layer,
                    "--expected-experts", ",".join(map(str, selected[::-1])))
    assert r.returncode == 0, r.stderr
    assert f"layer {layer}" in r.stdout and "gates" in r.stdout and "logits" in r.stdout
    wrong = sorted(set(range(6)) - set(selected.tolist()))[: len(selected)]
    r = colibri_cli("route", model_dir, "--input", "the cat sat on the mat", "--layer", layer,
                    "--expected-experts", ",".join(map(str, wrong)))
    assert r.returncode == 1
    assert "MISMATCH" in r.stderr


def test_route_rejects_dense_layer(model_dir):
    r = colibri_cli("route", model_dir, "--input", "the cat", "--layer", "1")
    assert r.returncode == 2
    assert "not a MoE layer" in r.stderr and "Traceback" not in r.stderr


def test_inspect_counts_parameters(model_dir, tiny_model_factory):
    r = colibri_cli("inspect", model_dir, "--tensors")
    assert r.returncode == 0, r.stderr
    assert "qwen2_moe" in r.stdout and "read per decode token" in r.stdout
    assert "model.layers.2.mlp.experts.5.down_proj.weight" in r.stdout
    reference = tiny_model_factory("qwen2_moe-a").reference
    total = sum(p.numel() for p in reference.parameters())
    with colibri.load(model_dir) as m:
        from colibri.summary import summarize
        s = summarize(m)
    assert s.params_total == total
    assert s.params_active < s.params_total


def test_inspect_describes_the_routing_rule(tiny_model_factory):
    r = colibri_cli("inspect", tiny_model_factory("glm4_moe-a").path)
    assert r.returncode == 0, r.stderr
    assert "sigmoid, selection bias, best 2 of 4 groups, top-3, renormalised, x 2.5" in r.stdout
    r = colibri_cli("inspect", tiny_model_factory("granitemoe-a").path)
    assert "softmax over the top-k logits" in r.stdout


def test_check_passes_then_finds_nan(model_dir, tmp_path):
    r = colibri_cli("check", model_dir)
    assert r.returncode == 0, r.stderr
    bad = tmp_path / "bad"
    shutil.copytree(model_dir, bad)
    from safetensors.numpy import load_file, save_file
    tensors = load_file(bad / "model.safetensors")
    w = tensors["model.layers.0.self_attn.q_proj.weight"].copy()
    w[3, 4] = np.nan
    tensors["model.layers.0.self_attn.q_proj.weight"] = w
    save_file(tensors, bad / "model.safetensors")
    r = colibri_cli("check", bad)
    assert r.returncode == 1
    assert "model.layers.0.self_attn.q_proj.weight" in r.stderr


def test_route_profile_out_pins_experts_of_a_paged_bench(model_dir, tmp_path):
    """route --profile-out writes the text's expert profile; bench --expert-profile pins its
    hottest experts in a paged run, whose JSON carries the expert cache's counters."""
    hot = tmp_path / "hot.json"
    text = "the cat sat on the mat and the dog sat on the cat"
    r = colibri_cli("route", model_dir, "--input", text, "--profile-out", hot)
    assert r.returncode == 0, r.stderr
    profile = json.loads(hot.read_text())
    with colibri.load(model_dir) as m:
        n, c = len(m.tokenizer.encode(text)), m.config
    counts = np.array(profile["counts"])                     # [L, E]
    assert profile["tokens"] == n and counts.shape == (c.num_layers, c.num_experts)
    assert [counts[l].sum() for l in range(c.num_layers)] == [n * c.top_k if l in c.moe_layers else 0
                                                              for l in range(c.num_layers)]
    r = colibri_cli("bench", model_dir, "--prompt", "8", "--gen", "4", "--repeat", "2", "-t", "1",
                    "--expert-slots", "6", "--expert-profile", hot, "--profile", "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    paged = result["paging"]
    assert paged["plan"]["n_slots"] == 6 and paged["decode"]["pinned"] == 3
    assert paged["decode"]["tokens"] == 8 and paged["prefill"]["tokens"] == 16
    assert paged["decode"]["lookups"] == paged["decode"]["hits"] + paged["decode"]["misses"]
    assert 0 <= paged["decode"]["cache_hit_rate"] <= paged["decode"]["hit_rate"] <= 1
    assert len(paged["storage_rounds_gb_s"]) == 2 and min(paged["storage_rounds_gb_s"]) > 0
    assert result["roofline_fraction"] is None and "expert_wait" in result["profile"]["seconds"]
    assert "expert cache" in r.stdout and "read-ahead" in r.stdout


@pytest.mark.parametrize("args,fragment", [
    (("run", "/nonexistent/model", "-p", "hi"), "no such file or directory"),
    (("run", "/nonexistent/model", "-p", "hi", "--mem-budget", "lots"), "mem_budget"),
    (("bench", "/nonexistent/model", "--mem-budget=-3G"), "mem_budget"),
    (("inspect", "/nonexistent/model"), "no such file or directory"),
    (("check", "/etc/hostname"), "not a model"),
    (("route", "/nonexistent", "--input", "x", "--expected-experts", "a,b"), "--expected-experts"),
])
def test_bad_input_is_one_line_exit_2(args, fragment):
    r = colibri_cli(*args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and lines[0].startswith("colibri: error:")


def test_convert_then_inspect_and_check_native(model_dir, tmp_path):
    out = tmp_path / "model.colibri"
    r = colibri_cli("convert", model_dir, out, "--dtype", "f16")
    assert r.returncode == 0, r.stderr
    r = colibri_cli("inspect", out, "--tensors")
    assert r.returncode == 0, r.stderr
    assert "qwen2_moe" in r.stdout and "F16" in r.stdout
    r = colibri_cli("check", out)
    assert r.returncode == 0, r.stderr
    r = colibri_cli("run", out, "-p", "the cat", "-n", "3", "--temp", "0")
    assert r.returncode == 0, r.stderr
