"""gpt-oss beyond the shared parity suite: the harmony chat format through the tokenizer.json path,
a tiny model chatting end to end against transformers, its GGUF as llama.cpp runs it, and the
config fields and tensors it refuses.

Tolerances: rendered prompts byte-identical to transformers' apply_chat_template; token ids
identical; greedy replies identical token for token (the model's logits agree to 1e-4 relative,
test_parity.py); GGUF logits as stated in that test.
"""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

import colibri
from colibri import ModelError
from colibri.tokenizer import Tokenizer

from conftest import COMMON, token_ids
from gguf_export import export_gguf
from harmony import SPECIAL, harmony_backend, save_harmony_tokenizer

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The weather now in a city",
        "parameters": {"type": "object", "required": ["city"], "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
            "days": {"type": "integer"}, "hourly": {"type": "boolean"},
            "fields": {"type": "array", "items": {"type": "string"}}}}}},
    {"type": "function", "function": {"name": "now", "description": "The time"}},
]

CONVERSATIONS = [
    [{"role": "user", "content": "Hello there"}],
    [{"role": "system", "content": "Answer in one word."}, {"role": "user", "content": "Sky colour?"},
     {"role": "assistant", "content": "Blue.", "thinking": "Simple."}, {"role": "user", "content": "Grass?"}],
    [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"},
     {"role": "assistant", "thinking": "Use the tool.",
      "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
     {"role": "tool", "content": {"sunny": True, "temp": 21}},
     {"role": "assistant", "content": "Sunny, 21 degrees.", "thinking": "Report it."}],
    [{"role": "user", "content": "Two calls"},
     {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "now", "arguments": "{}"}}]},
     {"role": "tool", "content": "12:00"}],
]


@pytest.fixture(scope="module")
def harmony_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("harmony")
    save_harmony_tokenizer(directory)
    return directory


@pytest.fixture(scope="module")
def harmony_model(harmony_dir, tmp_path_factory):
    """(transformers model, its directory with the harmony tokenizer): a tiny random gpt-oss whose
    matrices are 64 wide (whole 32-element blocks), biases and sinks randomised."""
    from transformers import AutoTokenizer, GptOssConfig, GptOssForCausalLM

    hf_tok = AutoTokenizer.from_pretrained(harmony_dir)
    eos = [hf_tok.convert_tokens_to_ids(t) for t in ("<|return|>", "<|call|>")]
    config = GptOssConfig(**{**COMMON, "vocab_size": len(hf_tok), "hidden_size": 64, "intermediate_size": 64,
                             "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
                             "head_dim": 16, "num_local_experts": 4, "num_experts_per_tok": 2,
                             "sliding_window": 6, "eos_token_id": eos, "attn_implementation": "eager"})
    torch.manual_seed(7)
    model = GptOssForCausalLM(config).eval()
    model.set_experts_implementation("eager")
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.copy_(1.0 + 0.2 * torch.randn_like(param))
            elif name.endswith("bias") and not param.any():
                param.copy_(0.2 * torch.randn_like(param))
            elif name.endswith("sinks"):
                param.copy_(torch.randn_like(param))
    directory = tmp_path_factory.mktemp("harmony_model")
    model.save_pretrained(directory)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        if (harmony_dir / name).exists():
            (directory / name).write_bytes((harmony_dir / name).read_bytes())
    return model, directory



@pytest.mark.parametrize("conversation", range(len(CONVERSATIONS)))
@pytest.mark.parametrize("variables", [{}, {"reasoning_effort": "high", "model_identity": "You are Tiny."}])
def test_harmony_template_renders_as_transformers(harmony_dir, conversation, variables):
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(harmony_dir)
    tok = Tokenizer.from_dir(harmony_dir)
    messages = CONVERSATIONS[conversation]
    for tools in (None, TOOLS):
        for generation_prompt in (True, False):
            expected = hf.apply_chat_template(messages, tools=tools, tokenize=False,
                                              add_generation_prompt=generation_prompt, **variables)
            got = tok.render_chat(messages, tools=tools, add_generation_prompt=generation_prompt, **variables)
            assert got == expected
            ids = hf.apply_chat_template(messages, tools=tools, tokenize=True, return_dict=False,
                                         add_generation_prompt=generation_prompt, **variables)
            assert tok.encode(got, add_special_tokens=False) == list(ids)
    # every harmony control token is one special token, never split by the BPE
    for special in SPECIAL:
        assert tok.encode(special, add_special_tokens=False) == [hf.convert_tokens_to_ids(special)]


def test_harmony_template_errors_are_one_line(harmony_dir):
    tok = Tokenizer.from_dir(harmony_dir)
    with pytest.raises(ValueError, match=r"^chat template: a tool message must follow an assistant tool call$"):
        tok.render_chat([{"role": "user", "content": "x"}, {"role": "tool", "content": "y"}])


def test_tiny_gpt_oss_chats_like_transformers(harmony_model, harmony_dir):
    """The tiny gpt-oss with the harmony tokenizer: colibri.load(...).chat gives transformers'
    greedy continuation of apply_chat_template's ids."""
    from transformers import AutoTokenizer

    model, directory = harmony_model
    hf_tok = AutoTokenizer.from_pretrained(harmony_dir)
    eos = model.config.eos_token_id
    messages = CONVERSATIONS[1]
    ids = hf_tok.apply_chat_template(messages, tokenize=True, return_dict=False, add_generation_prompt=True)
    with torch.no_grad():
        out = model.generate(torch.tensor([list(ids)]), max_new_tokens=12, do_sample=False, eos_token_id=eos,
                             pad_token_id=eos[0])
    expected = out[0, len(ids):].tolist()
    expected = expected[:next((i for i, t in enumerate(expected) if t in eos), len(expected))]
    with colibri.load(directory, threads=2) as m:
        assert m.tokenizer.eos_ids >= set(eos)
        reply = m.chat(messages, max_tokens=12, temperature=0.0)
    assert reply.tokens == expected
    assert reply.text == hf_tok.decode(expected)


_LLAMA_CPP = r"""
import json, sys
import numpy as np
import llama_cpp
path, ids, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
llm = llama_cpp.Llama(model_path=path, n_ctx=64, n_batch=64, logits_all=True, verbose=False, n_threads=2)
llm.eval(ids)
np.save(out, np.array(llm.scores[:len(ids)], dtype=np.float32))
"""


def test_gpt_oss_gguf_as_llama_cpp_runs_it(harmony_model, harmony_dir, tmp_path):
    """The GGUF written as llama.cpp's converter writes gpt-oss (f32, with the o200k vocabulary):
    Colibri matches transformers to 1e-4 × max |logit| and tokenizes as the original tokenizer;
    llama.cpp runs the same file within 2e-3 × max |logit| of transformers (its f16 KV cache and
    its YaRN ramp, whose ends it always rounds outward, where gpt-oss's does not; measured 3.4e-4)."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python (the llama.cpp reference) is not installed; "
                        ".ci/run installs it")
    from transformers import AutoTokenizer

    model, directory = harmony_model
    path = tmp_path / "gpt-oss.gguf"
    export_gguf(model, directory, path, "f32", tokenizer=harmony_backend())
    ids = token_ids(model.config.vocab_size - 8, 24, seed=9)
    ids = [i + 8 for i in ids]   # no special tokens
    with torch.no_grad():
        expected = model(torch.tensor([ids])).logits[0].float().numpy()
    hf_tok = AutoTokenizer.from_pretrained(harmony_dir)
    with colibri.load(path, threads=2) as m:
        got = m.logits(ids)
        for text in ("Weather in Paris? It's sunny, 21 degrees.", "namespace functions {\n\n}", "Café 123456"):
            assert m.tokenizer.encode(text, add_special_tokens=False) == hf_tok.encode(text, add_special_tokens=False)
    scale = np.abs(expected).max()
    assert np.abs(got - expected).max() <= 1e-4 * scale
    out = tmp_path / "llama_cpp.npy"
    subprocess.run([sys.executable, "-c", _LLAMA_CPP, str(path), json.dumps(ids), str(out)], check=True,
                   capture_output=True, timeout=300)
    reference = np.load(out)
    assert np.abs(reference - expected).max() <= 2e-3 * scale
    assert (reference.argmax(-1) == expected.argmax(-1)).mean() >= 0.95


@pytest.mark.parametrize("field, value, message", [
    ("layer_types", ["sliding_attention"], r"field 'layer_types' must list num_hidden_layers=3 entries"),
    ("layer_types", ["sliding_attention", "chunked_attention"], r"field 'layer_types' must list"),
    ("sliding_window", 0, r"field 'sliding_window' is missing or 0, but layer_types has sliding_attention"),
    ("swiglu_limit", -1.0, r"field 'swiglu_limit' = -1.0 is out of range"),
    ("num_local_experts", 0, r"field 'num_local_experts' = 0 is out of range"),
    ("quantization_config", {"quant_method": "fp8"}, r"field 'quantization_config' = .* is not supported \(only quant_method mxfp4\)"),
])
def test_gpt_oss_config_errors(tiny_model_factory, tmp_path, field, value, message):
    tiny = tiny_model_factory("gpt_oss-a")
    config = json.loads((tiny.path / "config.json").read_text())
    config[field] = value
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model.safetensors").write_bytes((tiny.path / "model.safetensors").read_bytes())
    with pytest.raises(ModelError, match=message):
        colibri.load(tmp_path)


def test_gpt_oss_expert_tensor_shape_is_named(tiny_model_factory, tmp_path):
    """A stacked expert tensor of the wrong shape is refused naming it (the layout change at load checks)."""
    from safetensors.numpy import load_file, save_file

    tiny = tiny_model_factory("gpt_oss-a")
    tensors = load_file(tiny.path / "model.safetensors")
    name = "model.layers.1.mlp.experts.gate_up_proj"
    tensors[name] = tensors[name][:, :, :-2].copy()
    save_file(tensors, tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_bytes((tiny.path / "config.json").read_bytes())
    with pytest.raises(ModelError, match=rf"tensor '{name}': shape \[5, 48, 78\], expected \[5, 48, 80\]"):
        colibri.load(tmp_path)


def test_inspect_tells_rearranged_experts_from_mapped_weights(tiny_model_factory, tmp_path):
    """A Hugging Face gpt-oss's experts are copies made at load (their stored layout is not the C
    core's); a GGUF's are used in place. `colibri inspect` reports both, and the routing rule."""
    import subprocess as sp

    from colibri.summary import summarize

    tiny = tiny_model_factory("gpt_oss-a")
    path = tmp_path / "gpt_oss.gguf"
    export_gguf(tiny.reference, tiny.path, path, "f32")
    with colibri.load(tiny.path, threads=1) as hf, colibri.load(path, threads=1) as gguf:
        rearranged = sum(ref.nbytes for slot, ref in hf.weights
                         if slot.kind.startswith("EXPERT_") and slot.kind != "EXPERT_DOWN_BIAS")
        assert summarize(hf).rearranged_bytes == rearranged > 0
        assert summarize(gguf).rearranged_bytes == 0
        assert summarize(hf).weight_bytes == summarize(gguf).weight_bytes
    out = sp.run([sys.executable, "-m", "colibri", "inspect", str(tiny.path)], capture_output=True, text=True,
                 check=True, cwd=tmp_path).stdout   # outside the source tree: the installed package
    assert "softmax over the top-k logits" in out and "rearranged once at load" in out


def _hf_mxfp4(rows: np.ndarray):
    """rows [..., n] float32 -> (scales [..., n/32] u8, blocks [..., n/32, 16] u8) in Hugging Face's
    MXFP4 layout, quantized by gguf-py's MXFP4 (llama.cpp's reference) and laid out here: element
    2b of a block in the low nibble of byte b, 2b+1 in the high one."""
    from gguf import GGMLQuantizationType
    from gguf.quants import quantize

    lead, n = rows.shape[:-1], rows.shape[-1]
    gguf_blocks = quantize(np.ascontiguousarray(rows.reshape(-1, n)), GGMLQuantizationType.MXFP4)
    gguf_blocks = gguf_blocks.reshape(-1, n // 32, 17)                       # per block: e, then 16 bytes
    qs = gguf_blocks[..., 1:]
    codes = np.concatenate((qs & 0x0F, qs >> 4), axis=-1)                   # [.., 32] element order
    blocks = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)   # [.., 16] HF order
    return (np.ascontiguousarray(gguf_blocks[..., 0].reshape(*lead, n // 32)),
            np.ascontiguousarray(blocks.reshape(*lead, n // 32, 16)))


@pytest.fixture(scope="module")
def mxfp4_model(harmony_model, tmp_path_factory):
    """(transformers model on the dequantized experts, its MXFP4 checkpoint directory): the harmony
    model's experts quantized to MXFP4 and saved as released gpt-oss checkpoints are (``*_blocks``,
    ``*_scales``, quantization_config mxfp4); the reference's experts are transformers' own
    dequantization of those bytes (integrations.mxfp4.convert_moe_packed_tensors)."""
    from safetensors.torch import save_file
    from transformers import GptOssForCausalLM
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    model, directory = harmony_model
    reference = GptOssForCausalLM(model.config).eval()
    reference.set_experts_implementation("eager")
    state = {k: v.clone() for k, v in model.state_dict().items()}
    tensors = {}
    for name in list(state):
        if not name.endswith(("experts.gate_up_proj", "experts.down_proj")):
            continue
        rows = state.pop(name).transpose(1, 2).contiguous().numpy()          # [E, rows, cols]
        scales, blocks = _hf_mxfp4(rows)
        tensors[name + "_scales"], tensors[name + "_blocks"] = torch.from_numpy(scales), torch.from_numpy(blocks)
        # transformers' own dequantization, already in the parameter's [E, cols, rows] layout
        state[name] = convert_moe_packed_tensors(tensors[name + "_blocks"], tensors[name + "_scales"],
                                                 dtype=torch.float32).contiguous()
    reference.load_state_dict(state)
    out = tmp_path_factory.mktemp("mxfp4")
    save_file({**{k: v for k, v in state.items() if not k.endswith(("gate_up_proj", "down_proj"))}, **tensors},
              out / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((directory / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn",
                                                                                           "model.layers.*.mlp.router",
                                                                                           "model.embed_tokens",
                                                                                           "lm_head"]}
    (out / "config.json").write_text(json.dumps(config))
    return reference, out, tensors


def _close_logits(got, expected):
    """MXFP4 weights meet Q8_0-quantized activations in the dot products (as in llama.cpp), so the
    logits carry the activations' 8-bit rounding: max |Δ| <= 0.03 × max |logit| and the same argmax
    at >= 95% of positions against transformers on the dequantized experts."""
    scale = np.abs(expected).max()
    assert np.abs(got - expected).max() <= 0.03 * scale, np.abs(got - expected).max() / scale
    assert (got.argmax(-1) == expected.argmax(-1)).mean() >= 0.95


def test_mxfp4_checkpoint_is_repacked_not_dequantized(mxfp4_model, harmony_model, tmp_path):
    """Hugging Face MXFP4 experts load as GGUF MXFP4 blocks, byte for byte what gpt-oss's GGUF
    converter would write for the same codes, and run within the stated tolerance of transformers;
    the GGUF written from the same weights gives bitwise the same logits."""
    from gguf import GGMLQuantizationType
    from gguf.quants import quantize

    reference, directory, tensors = mxfp4_model
    ids = [8 + i for i in token_ids(reference.config.vocab_size - 8, 32, seed=11)]
    with torch.no_grad():
        expected = reference(torch.tensor([ids])).logits[0].float().numpy()
    with colibri.load(directory, threads=2) as m:
        by_slot = {(s.kind, s.layer, s.expert): ref for s, ref in m.weights}
        gate = by_slot[("EXPERT_GATE", 1, 2)]
        assert gate.dtype == "MXFP4" and gate.shape == (64, 64)
        rows = reference.model.layers[1].mlp.experts.gate_up_proj[2].T[0::2].detach().numpy()   # [F, D]
        assert bytes(gate.array) == quantize(np.ascontiguousarray(rows), GGMLQuantizationType.MXFP4).tobytes()
        got = m.logits(ids)
        routes = m.route(ids)
    _close_logits(got, expected)
    assert len(routes) == reference.config.num_hidden_layers
    path = tmp_path / "mxfp4.gguf"
    export_gguf(reference, directory, path, "mxfp4", state=reference.state_dict())
    with colibri.load(path, threads=2) as m:
        assert {ref.dtype for s, ref in m.weights if s.kind.startswith("EXPERT_") and "BIAS" not in s.kind} == {"MXFP4"}
        assert m.logits(ids).tobytes() == got.tobytes()


def test_mxfp4_experts_convert_to_colibri_as_stored(mxfp4_model, tmp_path):
    """`colibri convert ... keep` writes the MXFP4 experts of a released-style checkpoint, and of the
    GGUF written from it, into .colibri as the same MXFP4 blocks (the rest as stored: f32 here):
    both files load bitwise as the source they came from."""
    from colibri.convert import convert

    reference, directory, _ = mxfp4_model
    ids = [8 + i for i in token_ids(reference.config.vocab_size - 8, 24, seed=12)]
    gguf_path = tmp_path / "mxfp4.gguf"
    export_gguf(reference, directory, gguf_path, "mxfp4", state=reference.state_dict())
    for source in (directory, gguf_path):
        native_path = convert(source, tmp_path / f"{source.name}.colibri", "keep", progress=False)
        with colibri.load(source, threads=2) as want, colibri.load(native_path, threads=2) as got:
            experts = {ref.dtype for s, ref in got.weights if s.kind in ("EXPERT_GATE", "EXPERT_UP", "EXPERT_DOWN")}
            assert experts == {"MXFP4"}
            assert got.logits(ids).tobytes() == want.logits(ids).tobytes()
