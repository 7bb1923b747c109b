"""This project's lm-eval task template (_template_yaml, which every task's generated config includes) and the hooks it calls."""
