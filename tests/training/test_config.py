"""klrl.training.config: a train config's errors name the key and the value."""

import pytest

from klrl.training.config import TrainConfig, load_config


def test_config_errors_name_the_key(tmp_path):
    path = tmp_path / "cell.yaml"
    path.write_text("base_model: x\ntrain_data: y\neval_data: z\nreward: arithmetic\nbta: 0.1\n")
    with pytest.raises(ValueError, match="unknown key 'bta'; known keys: activation_checkpointing, adam_betas"):
        load_config(path)
    path.write_text("base_model: x\ntrain_data: y\neval_data: z\nreward: arithmetic\n")
    with pytest.raises(ValueError, match="bad value for 'advantage': 'grpo'"):
        load_config(path, ["advantage=grpo"])
    with pytest.raises(ValueError, match="KLConfig.beta: 0 with placement 'loss' adds nothing"):
        load_config(path, ["kl.name=k3-loss"])
    with pytest.raises(ValueError, match="missing required key 'reward'"):
        path.write_text("base_model: x\ntrain_data: y\neval_data: z\n")
        load_config(path)


def test_generation_backend_is_checked():
    with pytest.raises(ValueError, match="bad value for 'generation_backend': 'sglang'"):
        TrainConfig(base_model="m", train_data="t", eval_data="e", reward="arithmetic", generation_backend="sglang")
