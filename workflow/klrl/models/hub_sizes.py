"""The sizes and access terms of the Hub models config/paper.yaml and config/night.yaml declare, as their Hub
repositories state them (config.json and the safetensors index): what `klrl budget` counts
memory, checkpoints and downloads from, and which of them is gated (the licence must be accepted
on the Hub and a token given before a download)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HubSize:
    params: int  # every parameter (the safetensors index's total, in elements)
    largest: int  # elements of the largest tensor (the embedding: vocabulary × hidden)
    gated: bool
    download_bytes: int  # the repository's weights as stored (bfloat16: 2 bytes a parameter)


HUB_SIZES = {
    "Qwen/Qwen2.5-7B": HubSize(7_615_616_512, 152_064 * 3_584, False, 2 * 7_615_616_512),
    "meta-llama/Llama-3.1-8B-Instruct": HubSize(8_030_261_248, 128_256 * 4_096, True, 2 * 8_030_261_248),
    "Qwen/Qwen3-4B-Instruct-2507": HubSize(4_022_468_096, 151_936 * 2_560, False, 2 * 4_022_468_096),
    "Qwen/Qwen2.5-0.5B-Instruct": HubSize(494_032_768, 151_936 * 896, False, 2 * 494_032_768),
    "Qwen/Qwen2.5-1.5B-Instruct": HubSize(1_543_714_304, 151_936 * 1_536, False, 2 * 1_543_714_304),
}


def hub_size(hub_id: str) -> HubSize:
    if hub_id not in HUB_SIZES:
        raise ValueError(
            f"no size known for the Hub model {hub_id} (klrl.models.hub_sizes knows {', '.join(HUB_SIZES)})"
        )
    return HUB_SIZES[hub_id]
