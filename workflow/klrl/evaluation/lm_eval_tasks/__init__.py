"""This project's lm-eval task definitions (YAML) and the hooks they call; see _template_yaml."""
