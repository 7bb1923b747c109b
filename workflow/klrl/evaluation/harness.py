"""One model, several tasks, one call of lm-eval's evaluator, timed phase by phase.

Each requested task's lm-eval config is written from the task registry (`klrl.tasks.TASKS`) into
a temporary folder, one YAML per task that includes `lm_eval_tasks/_template_yaml`, and the
TaskManager indexes only that folder (this project's tasks, not lm-eval's thousands), so a task
added to the registry is evaluable with no file of its own. Every task of a model runs in the
same call, so the model loads once. The metric is the
paper's: pass@1 = the mean reward of `samples` completions per problem at temperature 1.0 and
top-p 1.0; `greedy` decodes once per problem at temperature 0 instead. A task whose prepared data
has shots gets them as earlier chat turns (multi-turn few-shot), where the trainer puts them.

The call is lm-eval's `evaluator.evaluate` on the loaded tasks, seeded as `simple_evaluate`
seeds (Python, NumPy, torch and the few-shot sampler), not `simple_evaluate` itself: that adds
an environment report (torch's collect_env, which runs pip, lscpu and more as subprocesses,
about a second per evaluation) that no switch turns off; results.json records the versions.
Timing splits the wall time into import, model load, task load (index + data), generation
(time inside the backend's `generate_until`) and the rest of the evaluation (request building,
grading, aggregation); everything but generation is the evaluation overhead.
"""

from __future__ import annotations

import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

TEMPLATE = (
    Path(__file__).parent / "lm_eval_tasks" / "_template_yaml"
)  # shared by every task; its `!function`s are hooks.py's
BACKENDS = ("hf", "vllm")
BATCH_SIZE = 64  # prompts per generation batch (hf backend; vLLM schedules its own)
VLLM_MEMORY_FRACTION = 0.85  # of the GPU's memory (of RAM on vLLM's CPU build)
MECHANISM_PROMPTS = 64  # held-out prompts of a cell's KL measurement (klrl.evaluation.mechanism)
MECHANISM_SAMPLES = 4  # its completions per prompt, from the policy and from the reference each


def lm_eval_task_name(task: str) -> str:
    """The lm-eval name of a klrl task: `arith-long` → `klrl_arith_long`.

    >>> lm_eval_task_name("mmlu-college-physics")
    'klrl_mmlu_college_physics'
    """
    return "klrl_" + task.replace("-", "_")


@dataclass(frozen=True)
class Decoding:
    samples: int = 4  # n completions per problem (1 when greedy)
    greedy: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 32

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise ValueError(f"samples: {self.samples} must be at least 1")
        if self.greedy and self.samples != 1:
            raise ValueError("samples: greedy decoding is deterministic; use samples=1 with greedy")
        if not self.greedy and not (self.temperature > 0 and 0 < self.top_p <= 1):
            raise ValueError(
                f"temperature {self.temperature} / top_p {self.top_p}: need temperature > 0, 0 < top_p <= 1"
            )
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens: {self.max_new_tokens} must be at least 1")

    def generation_kwargs(self, stops: dict | None = None) -> dict:
        """lm-eval's generation kwargs, with the backend's stop-token kwargs (`stop_kwargs`)."""
        if self.greedy:
            sampling = {"do_sample": False, "temperature": 0.0}
        else:
            sampling = {"do_sample": True, "temperature": self.temperature, "top_p": self.top_p}
        return sampling | {"max_gen_toks": self.max_new_tokens, "until": []} | (stops or {})


# The defaults of every evaluation setting a workflow config may leave out (its `evaluation`
# section): `klrl evaluate`'s, declared here once (the rules pass only what a config sets).
CONFIG_DEFAULTS = {
    "samples": Decoding.samples,
    "greedy": Decoding.greedy,
    "batch_size": BATCH_SIZE,
    "backend": BACKENDS[0],
    "mechanism_prompts": MECHANISM_PROMPTS,
    "mechanism_samples": MECHANISM_SAMPLES,
}


def stop_kwargs(model: str, backend: str, extra: tuple[str, ...] = (), revision: str | None = None) -> dict:
    """Generation kwargs that end a completion at the model's EOS and end-of-turn tokens
    (klrl.training.prompts.stop_token_ids): transformers' generate takes them as `eos_token_id`
    (a finished row is then padded, and the padding decoded away), vLLM as `stop_token_ids`.
    lm-eval's `until` strings would not do: its hf backend decodes without special tokens
    before it cuts at them."""
    from transformers import AutoTokenizer

    from klrl.training.prompts import stop_token_ids

    ids = list(stop_token_ids(AutoTokenizer.from_pretrained(model, revision=revision), model, extra, revision))
    return {"eos_token_id": ids} if backend == "hf" else {"stop_token_ids": ids}


def write_task_configs(tasks: list[str], folder: Path) -> None:
    """The lm-eval task config of each klrl task into `folder`: `klrl_<name>` on the prepared
    `<name>` data, everything else from the template."""
    import yaml

    from klrl.tasks import get_task

    for name in tasks:
        task = get_task(name)
        config = {"include": str(TEMPLATE), "task": lm_eval_task_name(name), "dataset_kwargs": {"task": name}}
        (Path(folder) / f"{lm_eval_task_name(name)}.yaml").write_text(
            f"# {task.description}\n" + yaml.safe_dump(config, sort_keys=False)
        )


def check_model(model: str) -> None:
    """Fail early, naming the problem, when `model` is a folder transformers cannot load."""
    path = Path(model)
    if path.exists() or model.startswith((".", "/")) or model.count("/") > 1:
        if not (path / "config.json").is_file():
            raise ValueError(f"model {model}: not a model folder (no config.json); is the cell finished?")
        from transformers import AutoConfig

        try:
            AutoConfig.from_pretrained(path)
        except (OSError, ValueError) as error:
            raise ValueError(f"model {model}: transformers cannot read its config ({error})") from None


def _model_args(
    backend: str, model: str, revision: str | None, device: str, seed: int, vllm_memory_fraction: float
) -> dict:
    on_cpu = device == "cpu"
    pinned = {"revision": revision} if revision else {}
    if backend == "hf":
        return {"pretrained": model, "device": device, "dtype": "float32" if on_cpu else "auto"} | pinned
    args = {
        "pretrained": model,
        "dtype": "float32" if on_cpu else "auto",
        "seed": seed,
        "gpu_memory_utilization": vllm_memory_fraction,
    } | pinned
    # vLLM's CPU build: no torch.compile warm-up (minutes on CPU for seconds of generation), and
    # the engine in this process, on its threads (import_vllm), not in two more that import it all
    # again; its KV cache VLLM_CPU_KVCACHE_SPACE GiB (1 unless set), not most of the machine's
    # memory, which a second job beside it would not find (benchmarks/HISTORY.md, a whole cell)
    return args | ({"enforce_eager": True, "distributed_executor_backend": "uni"} if on_cpu else {})


def evaluate(
    model: str,
    tasks: list[str],
    data_dir: Path,
    decoding: Decoding,
    *,
    backend: str = BACKENDS[0],
    device: str = "cpu",
    batch_size: int = BATCH_SIZE,
    seed: int = 0,
    limit: int | None = None,
    vllm_memory_fraction: float = VLLM_MEMORY_FRACTION,
    revision: str | None = None,
    stop_tokens: tuple[str, ...] = (),
) -> tuple[dict, dict]:
    """lm-eval's results dict for `tasks` (klrl names), and the timing of each phase in seconds."""
    if backend not in BACKENDS:
        raise ValueError(f"backend: {backend!r} is not one of {', '.join(BACKENDS)}")
    check_model(model)
    timing = {}
    start = time.perf_counter()
    import numpy as np
    import torch
    from lm_eval.api.registry import get_model
    from lm_eval.evaluator import evaluate as lm_eval_evaluate
    from lm_eval.tasks import TaskManager

    timing["import"] = time.perf_counter() - start
    mark = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="klrl-lm-eval-tasks-") as configs:
        write_task_configs(tasks, Path(configs))
        manager = TaskManager(include_path=configs, include_defaults=False, metadata={"data_dir": str(data_dir)})
        task_dict = manager.load([lm_eval_task_name(task) for task in tasks])
    loaded = task_dict["tasks"]
    timing["task_load"] = time.perf_counter() - mark
    mark = time.perf_counter()
    try:
        batching = {"batch_size": batch_size if backend == "hf" else "auto"}  # vLLM schedules its own batches
        if backend == "vllm" and device == "cpu":
            from klrl.training.vllm_backend import import_vllm

            import_vllm()
        lm = get_model(backend).create_from_arg_obj(
            _model_args(backend, model, revision, device, seed, vllm_memory_fraction), batching
        )
        stops = stop_kwargs(model, backend, stop_tokens, revision)
    except (OSError, ValueError, RuntimeError) as error:
        raise ValueError(f"model {model}: the {backend} backend cannot load it ({error})") from error
    for task in loaded.values():
        task.set_fewshot_seed(seed=seed)
        task.set_config("repeats", decoding.samples)
        task.set_config("num_fewshot", len(task.fewshot_docs()))  # every shot of the manifest, in order
        task.set_config("generation_kwargs", decoding.generation_kwargs(stops))
    timing["model_load"] = time.perf_counter() - mark
    generate_until = lm.generate_until
    timing["generation"] = 0.0

    def timed_generate_until(requests, *args, **kwargs):
        began = time.perf_counter()
        try:
            return generate_until(requests, *args, **kwargs)
        finally:
            timing["generation"] += time.perf_counter() - began

    lm.generate_until = timed_generate_until
    mark = time.perf_counter()
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    results = lm_eval_evaluate(
        lm=lm,
        task_dict=task_dict,
        limit=limit,
        log_samples=True,
        apply_chat_template=True,
        fewshot_as_multiturn=True,  # shots are earlier chat turns, as the trainer puts them
    )
    timing["evaluate_other"] = time.perf_counter() - mark - timing["generation"]
    timing["total"] = time.perf_counter() - start
    timing["overhead"] = timing["total"] - timing["generation"]
    return results, timing
