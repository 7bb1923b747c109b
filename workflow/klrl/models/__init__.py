"""Base models by name: how each one comes to exist as a Hugging Face folder or Hub id.

The models built here, by code, are declared in klrl.models.builds (`BUILT_MODELS`: each one's
recipe settings, build verb and build function). A built model is built once per recipe (a
config's `models.tiny.pretrain`, `models.smollm2-135m.convert`: `recipe_options`), into
results/bases/<model>-<recipe hash>/model (`built_folder`, klrl.models.recipe), and every config
with that recipe reads it there. Every other model is declared in a workflow config, with no
code edit:

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

from pathlib import Path

from klrl.models.base import BaseModel
from klrl.models.builds import BUILT_MODELS


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
    """The built model `name`'s recipe options in a config's `models` section (`declared`),
    under its recipe key (`pretrain:` for the tiny model, `convert:` for SmolLM2); another
    built model's key is an error (its options would be ignored)."""
    spec = (declared or {}).get(name, {})
    key = BUILT_MODELS[name].build
    for other in {model.build for model in BUILT_MODELS.values()} - {key}:
        if other in spec:
            raise ValueError(f"models.{name}.{other}: not a key of {name}; its recipe is models.{name}.{key}")
    return spec.get(key)
