"""Data-parallel training across processes: the process group from torchrun, and FSDP2.

`setup` reads torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK) and starts the process
group (nccl on cuda, gloo on cpu). Without torchrun (WORLD_SIZE unset or 1) it is a no-op and
every function here acts on a plain model, unless `mixed_precision: bf16` is asked: bf16 with
fp32 master weights is then FSDP's MixedPrecisionPolicy, so a single process joins a
one-process group of its own (`bf16-autocast` needs no FSDP: klrl.training.precision).

`Processes.shard` applies `torch.distributed.fsdp.fully_shard` to each decoder layer, then to the
root. The parameters stay float32 (the master weights the optimizer updates); with bf16 they
are all-gathered in bfloat16 for compute and gradients are reduce-scattered in float32.
A sharded model is built on the meta device in every process and given its weights by rank 0
(`load_from_main`): one host copy of the model per node, not one per process. State leaves or
enters a model in two forms: the full state (unsharded, on the CPU, rank 0's copy; what final/
holds), and each process's shards by name (`model_state`, `optimizer_state`: what checkpoints
write, DTensors that torch.distributed.checkpoint reshards).

FSDP all-gathers a layer's weights before each of its forwards and frees them after. A decoding
loop runs one forward per new token, so `Processes.gathered` holds the weights unsharded for the
whole loop instead: one all-gather per layer per rollout rather than one per token (what TRL's
`unwrap_model_for_generation` does under ZeRO-3), at the memory cost of the full model.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import (
    CPUOffloadPolicy,
    FSDPModule,
    MixedPrecisionPolicy,
    OffloadPolicy,
    fully_shard,
)
from torch.distributed.tensor import DTensor


def _state_api():
    """torch.distributed.checkpoint.state_dict, imported only when a model is sharded or state is
    checkpointed: importing it costs about 0.8 s, a twentieth of a single-process toy train job."""
    from torch.distributed.checkpoint import state_dict

    return state_dict


def local_share(batch_size: int, group_size: int, rank: int, world: int) -> slice:
    """The rows of a batch that `rank` of `world` processes trains on: whole groups of
    `group_size` consecutive rows, an equal share each, in rank order.

    >>> local_share(16, 4, 0, 2), local_share(16, 4, 1, 2)
    (slice(0, 8, None), slice(8, 16, None))
    >>> local_share(12, 4, 0, 2)
    Traceback (most recent call last):
    ...
    ValueError: 3 groups of 4 rows cannot be split evenly between 2 processes
    """
    groups, rest = divmod(batch_size, group_size)
    if rest or groups % world:
        raise ValueError(
            f"{batch_size / group_size:g} groups of {group_size} rows cannot be split evenly between {world} processes"
        )
    share = batch_size // world
    return slice(rank * share, (rank + 1) * share)


@dataclass(frozen=True)
class Processes:
    """This process's place among the training processes; `sharded` when models go through FSDP."""

    rank: int = 0
    world: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    sharded: bool = False

    @property
    def is_main(self) -> bool:
        """Whether this process writes files and logs (rank 0)."""
        return self.rank == 0

    def shard(self, model: torch.nn.Module, mixed_precision: str = "none", offload: bool = False) -> torch.nn.Module:
        """The model with fully_shard applied per decoder layer and then to the root (in place).
        `offload` keeps the shards in CPU memory between uses."""
        mesh = init_device_mesh(self.device.type, (self.world,))
        options = {
            "mesh": mesh,
            "mp_policy": MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
            if mixed_precision == "bf16"
            else MixedPrecisionPolicy(),
            "offload_policy": CPUOffloadPolicy(pin_memory=self.device.type == "cuda") if offload else OffloadPolicy(),
        }
        for layer in decoder_layers(model):
            fully_shard(layer, **options)
        fully_shard(model, **options)
        return model

    @contextmanager
    def gathered(self, model: torch.nn.Module) -> Iterator[torch.nn.Module]:
        """The model with its decoder layers' weights all-gathered once and kept for the block's
        forwards (no gradients may flow through them), sharded again on leaving; the model
        itself when not sharded."""
        layers = [module for module in model.modules() if isinstance(module, FSDPModule) and module is not model]
        if not self.sharded or not layers:
            yield model
            return
        for layer in layers:
            layer.set_reshard_after_forward(False, recurse=False)
            layer.unshard()
        try:
            yield model
        finally:
            for layer in layers:
                layer.set_reshard_after_forward(True, recurse=False)
            reshard(model)

    def mean(self, metrics: dict[str, float]) -> dict[str, float]:
        """Each metric's mean over processes; a key ending in `_max` takes the maximum."""
        if self.world == 1:
            return metrics
        keys = sorted(metrics)
        values = torch.tensor([float(metrics[key]) for key in keys], dtype=torch.float64, device=self.device)
        is_max = torch.tensor([key.endswith("_max") for key in keys], device=self.device)
        total, largest = values.clone(), values.clone()
        dist.all_reduce(total)
        dist.all_reduce(largest, op=dist.ReduceOp.MAX)
        reduced = torch.where(is_max, largest, total / self.world).tolist()
        return dict(zip(keys, reduced))

    def sum(self, value: torch.Tensor) -> torch.Tensor:
        """A tensor summed over processes (a copy)."""
        value = value.clone()
        if self.world > 1:
            dist.all_reduce(value)
        return value

    def gather_rows(self, tensor: torch.Tensor) -> torch.Tensor:
        """Every process's tensor (all of one shape) stacked along the rows, in rank order."""
        if self.world == 1:
            return tensor
        parts = [torch.empty_like(tensor) for _ in range(self.world)]
        dist.all_gather(parts, tensor.contiguous())
        return torch.cat(parts)

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()

    def broadcast(self, tensor: torch.Tensor) -> torch.Tensor:
        """Rank 0's tensor, in place on every rank."""
        if self.world > 1:
            dist.broadcast(tensor, src=0)
        return tensor

    # ------------------------------------------------------------------ state
    def full_state(self, model: torch.nn.Module) -> dict:
        """The model's unsharded weights on the CPU (a copy) on rank 0, {} on the other ranks:
        what final/ holds, tied weights (output embeddings) one tensor under both names, as in
        the model. Collective: every rank calls it."""
        if not self.sharded:
            state = {name: tensor.detach().to("cpu", copy=True) for name, tensor in model.state_dict().items()}
        else:
            api = _state_api()
            state = api.get_model_state_dict(
                model, options=api.StateDictOptions(full_state_dict=True, cpu_offload=True)
            )
        first_name = {}
        for name, parameter in model.named_parameters(remove_duplicate=False):
            first_name.setdefault(id(parameter), name)
            if state and first_name[id(parameter)] != name:
                state[name] = state[first_name[id(parameter)]]
        return state

    def load_from_main(
        self,
        model: torch.nn.Module,
        source: torch.nn.Module | None,
        mixed_precision: str = "none",
        offload: bool = False,
    ) -> torch.nn.Module:
        """`model`, built on the meta device with the architecture of rank 0's `source`, sharded
        and given `source`'s weights and buffers: rank 0 broadcasts one tensor at a time and every
        process keeps its own shard, so N processes cost one host copy of the model (rank 0's),
        not N. Collective; `source` is None on the other ranks."""
        self.shard(model, mixed_precision, offload)
        model.to_empty(device="cpu" if offload else self.device)
        api = _state_api()
        weights = source.state_dict() if self.is_main else {}
        api.set_model_state_dict(
            model, weights, options=api.StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
        )
        own_buffers = dict(source.named_buffers()) if self.is_main else {}
        with torch.no_grad():
            for name, buffer in model.named_buffers():  # non-persistent ones (rotary frequencies) are in no state dict
                if self.is_main:
                    buffer.copy_(own_buffers[name])
                self.broadcast(buffer)
        return model

    def model_state(self, model: torch.nn.Module) -> dict:
        """The model's weights as this process holds them, by name, without a copy: DTensors of
        its shards when sharded, plain tensors otherwise (what a checkpoint writes)."""
        return _state_api().get_model_state_dict(model)

    def load_model_state(self, model: torch.nn.Module, state: dict) -> None:
        """Weights in `model_state`'s form (of any sharding DCP has resharded them to) into `model`."""
        reshard(model)
        _state_api().set_model_state_dict(model, state)

    def optimizer_state(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
        """The optimizer's state as this process holds it, keyed by parameter name: {"state": its
        tensors (shards when sharded), "param_groups": plain values}. A fresh optimizer's state is
        first made (a step with zero gradients and learning rate), so that it can be read into."""
        return _state_api().get_optimizer_state_dict(model, optimizer)

    def load_optimizer_state(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, state: dict) -> None:
        _state_api().set_optimizer_state_dict(model, optimizer, state)


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's transformer blocks: the modules of a class that transformers says must not
    be split between devices (`_no_split_modules`, e.g. LlamaDecoderLayer)."""
    names = set(getattr(model, "_no_split_modules", None) or ())
    layers = [module for module in model.modules() if type(module).__name__ in names]
    if not layers:
        raise ValueError(
            f"{type(model).__name__}: no decoder layers found to shard (_no_split_modules: {sorted(names)})"
        )
    return layers


def reshard(model: torch.nn.Module) -> None:
    """Free every unsharded parameter copy of an FSDP model (the root keeps its own after a
    forward), so that the next forward all-gathers the shards as they are now."""
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.reshard()


def setup(device: str, mixed_precision: str = "none") -> Processes:
    """Join the process group torchrun describes (or a one-process group for FSDP's bf16 without it)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("device: cuda was asked but torch sees no CUDA device")
        torch.cuda.set_device(local_rank)
    where = torch.device(device, local_rank) if device == "cuda" else torch.device("cpu")
    if world == 1 and mixed_precision != "bf16":
        return Processes(device=where)
    backend = "nccl" if device == "cuda" else "gloo"
    if not dist.is_initialized():
        if world == 1:
            dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
        else:
            dist.init_process_group(backend, device_id=where if device == "cuda" else None)
    return Processes(dist.get_rank(), dist.get_world_size(), where, sharded=True)


def teardown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def clip_grad_norm(model: torch.nn.Module, max_norm: float) -> float:
    """Clip the gradients to `max_norm` in total; returns their norm before clipping, over the
    whole model (all shards)."""
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    return (norm.full_tensor() if isinstance(norm, DTensor) else norm).item()
