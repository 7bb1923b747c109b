"""The name OpenRLHF imports from flash_attn.utils.distributed, raising when called."""

from flash_attn import refuse

all_gather = refuse("utils.distributed.all_gather")
