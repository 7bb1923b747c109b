"""klrl: KL-regularized RL for language models, and the study of how the KL penalty is added."""

__version__ = "0.1.0"
