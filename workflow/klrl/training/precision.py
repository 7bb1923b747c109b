"""Where a model computes in bfloat16: the `mixed_precision` settings and what applies them.

Both bf16 settings keep float32 master weights (what AdamW updates and checkpoints hold), as the
paper trains; they differ in what runs in bfloat16:
- `bf16`: FSDP's MixedPrecisionPolicy (klrl.training.distributed) casts every parameter to
  bfloat16 when it gathers a layer, so the whole forward (norms and softmax too) runs in
  bfloat16; a single process joins a one-process group for it. The paper-scale path.
- `bf16-autocast`: `torch.autocast` runs the linear layers' matrix products in bfloat16 and
  keeps the rest in float32, so one process needs no FSDP (under torchrun FSDP shards float32
  weights); attention runs in float32 too (`FLOAT32_ATTENTION`:
  on a CPU, torch's fused attention is slower in bfloat16 than in float32, its backward about
  2.5× so). The fast path of one CPU process with bfloat16 matrix units (AMX), where FSDP's
  per-layer casts cost as much as they save (benchmarks/smollm2_step.py).
The autocast context covers the forward passes only (sampling, scoring, the update's forward);
the logits leave it in float32, and the loss and its backward run outside it.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch

FLOAT32_ATTENTION = "sdpa-float32"


def float32_attention(module, query, key, value, attention_mask, **kwargs):
    """transformers' SDPA attention on float32 queries, keys and values with autocast off; the
    output in the queries' dtype, as the layer expects."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    with torch.autocast(query.device.type, enabled=False):
        output, weights = sdpa_attention_forward(
            module, query.float(), key.float(), value.float(), attention_mask, **kwargs
        )
    return output.to(query.dtype), weights


def attention_implementation(mixed_precision: str) -> str | None:
    """The attention a model computes with under `mixed_precision` (None: the model's default),
    registered with transformers when it is ours. Registered on use, not at import: transformers'
    attention registry loads its modeling code, which importing the trainer does not
    (tests/test_imports.py holds that import light)."""
    if mixed_precision != "bf16-autocast":
        return None
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(FLOAT32_ATTENTION, float32_attention)
    AttentionMaskInterface.register(FLOAT32_ATTENTION, sdpa_mask)  # the masks SDPA takes
    return FLOAT32_ATTENTION


def hold_frozen_weights(model: torch.nn.Module, mixed_precision: str) -> None:
    """Under `bf16-autocast`, a frozen model (πref, μ) keeps its linear layers' weights in
    bfloat16: the values autocast would cast them to at every forward, so its products are the
    same bit for bit, without the casts (about 0.3 s per SmolLM2 forward on one core) and at half
    the memory. An output layer tied to the embedding is untied first: the embedding stays
    float32, as the policy's is. Norms and the embedding keep float32."""
    if mixed_precision != "bf16-autocast":
        return
    head = model.get_output_embeddings()
    if head is not None and head.weight is model.get_input_embeddings().weight:
        head.weight = torch.nn.Parameter(head.weight.detach().clone(), requires_grad=False)
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.weight.data = module.weight.data.to(torch.bfloat16)


def forward_precision(mixed_precision: str, device: torch.device) -> AbstractContextManager:
    """The context a forward pass runs in under `mixed_precision` on `device`: autocast to
    bfloat16 for `bf16-autocast`, nothing otherwise (FSDP casts the weights itself under `bf16`)."""
    if mixed_precision == "bf16-autocast":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return nullcontext()
