"""flash_attn.utils of the empty stand-in."""
