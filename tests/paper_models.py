"""The paper's three base models in miniature, written as local Hugging Face folders: each is
built from its Hub config.json (the values below) with only the sizes reduced, by the same
transformers class, with random weights, a byte-level tokenizer that carries the model's real
special tokens and chat template, and the model's generation_config.json end-of-sequence tokens.
The templates (tests/fixtures/chat_templates) are those of the Hub's tokenizer_config.json files,
as TRL 1.16 stores them (trl/chat_templates: qwen2_5, llama3_1, qwen3_instruct_2507).

    qwen2.5-7b            Qwen2ForCausalLM: biases on q/k/v, untied embeddings; EOS <|endoftext|>,
                          the turn ends at <|im_end|> (named by the chat template only)
    llama3.1-8b-instruct  LlamaForCausalLM: llama3 RoPE scaling, untied embeddings; EOS <|eot_id|>,
                          generation config [<|end_of_text|>, <|eom_id|>, <|eot_id|>]
    qwen3-4b-instruct     Qwen3ForCausalLM: RMS norms on q and k, head_dim apart from hidden/heads,
                          tied embeddings; EOS <|im_end|>, generation config [<|im_end|>, <|endoftext|>]
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

TEMPLATES = Path(__file__).parent / "fixtures" / "chat_templates"
# What every miniature shares: 2 layers of width 64, 4 query and 2 key/value heads.
REDUCED = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
}


@dataclass(frozen=True)
class PaperModel:
    name: str  # the model's name in config/paper.yaml
    architecture: str  # the transformers class
    config: dict  # the Hub config.json's architecture keys
    special_tokens: tuple[str, ...]
    tokens: dict  # tokenizer_config.json's bos/eos/pad tokens
    generation_eos: tuple[str, ...]  # generation_config.json's eos_token_id, as tokens
    end_of_turn: str  # the token the chat template closes an assistant turn with
    tokenizer_class: str = "Qwen2Tokenizer"


QWEN_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
PAPER_MODELS = {
    model.name: model
    for model in (
        PaperModel(
            "qwen2.5-7b",
            "Qwen2ForCausalLM",
            {
                "model_type": "qwen2",
                "hidden_act": "silu",
                "max_position_embeddings": 131072,
                "max_window_layers": 28,
                "rms_norm_eps": 1e-6,
                "rope_theta": 1000000.0,
                "sliding_window": 131072,
                "use_sliding_window": False,
                "tie_word_embeddings": False,
            },
            QWEN_SPECIALS,
            {"bos_token": None, "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"},
            ("<|endoftext|>",),
            "<|im_end|>",
        ),
        PaperModel(
            "llama3.1-8b-instruct",
            "LlamaForCausalLM",
            {
                "model_type": "llama",
                "hidden_act": "silu",
                "max_position_embeddings": 131072,
                "rms_norm_eps": 1e-5,
                "rope_theta": 500000.0,
                "rope_scaling": {
                    "factor": 8.0,
                    "low_freq_factor": 1.0,
                    "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 8192,
                    "rope_type": "llama3",
                },
                "attention_bias": False,
                "mlp_bias": False,
                "tie_word_embeddings": False,
            },
            (
                "<|begin_of_text|>",
                "<|end_of_text|>",
                "<|start_header_id|>",
                "<|end_header_id|>",
                "<|eom_id|>",
                "<|eot_id|>",
                "<|python_tag|>",
            ),
            {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "pad_token": None},
            ("<|end_of_text|>", "<|eom_id|>", "<|eot_id|>"),
            "<|eot_id|>",
            "PreTrainedTokenizerFast",
        ),
        PaperModel(
            "qwen3-4b-instruct",
            "Qwen3ForCausalLM",
            {
                "model_type": "qwen3",
                "hidden_act": "silu",
                "max_position_embeddings": 262144,
                "max_window_layers": 36,
                "rms_norm_eps": 1e-6,
                "rope_theta": 5000000,
                "head_dim": 32,
                "attention_bias": False,
                "use_sliding_window": False,
                "tie_word_embeddings": True,
            },
            QWEN_SPECIALS,
            {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
            ("<|im_end|>", "<|endoftext|>"),
            "<|im_end|>",
        ),
    )
}
TEMPLATE_FILES = {
    "qwen2.5-7b": "qwen2.5.jinja",
    "llama3.1-8b-instruct": "llama3.1-instruct.jinja",
    "qwen3-4b-instruct": "qwen3-instruct-2507.jinja",
}


def chat_template(name: str) -> str:
    return (TEMPLATES / TEMPLATE_FILES[name]).read_text()


def write_tokenizer(name: str, out: Path):
    """A byte-level tokenizer (one token per byte, no merges) with the model's special tokens, and
    tokenizer_config.json as the Hub has it: the special tokens by name and the chat template."""
    model = PAPER_MODELS[name]
    vocab = {symbol: i for i, symbol in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(list(model.special_tokens))
    bos = model.tokens["bos_token"]
    if bos:  # Llama 3's tokenizer.json prepends its BOS to every encoding
        backend.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, backend.token_to_id(bos))]
        )
    out.mkdir(parents=True, exist_ok=True)
    backend.save(str(out / "tokenizer.json"))
    settings = {
        "tokenizer_class": model.tokenizer_class,
        "model_max_length": 131072,
        "clean_up_tokenization_spaces": False,
    }
    (out / "tokenizer_config.json").write_text(
        json.dumps(settings | model.tokens | {"chat_template": chat_template(name)}, indent=2)
    )
    return AutoTokenizer.from_pretrained(out)


def write_paper_model(name: str, out: Path, seed: int = 0) -> Path:
    """The miniature of `name` (random weights from `seed`) as a model folder at `out`."""
    model = PAPER_MODELS[name]
    tokenizer = write_tokenizer(name, out)
    ids = {key: tokenizer.convert_tokens_to_ids(token) if token else None for key, token in model.tokens.items()}
    config = AutoConfig.for_model(
        **model.config | REDUCED,
        vocab_size=len(tokenizer),
        bos_token_id=ids["bos_token"],
        eos_token_id=ids["eos_token"],
        pad_token_id=ids["pad_token"],
    )
    torch.manual_seed(seed)
    network = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    network.generation_config.eos_token_id = [tokenizer.convert_tokens_to_ids(token) for token in model.generation_eos]
    network.save_pretrained(out)
    return out
