"""An exactly solvable tabular autoregressive policy for checking KL gradient claims."""
