import shutil
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from klrl.models.tiny import TinyConfig, pretrain_tiny
from klrl.tasks.data import prepare

# A model small enough to build in a second, its competence checked on 8 problems a task with no
# floor. Its corpus and optimizer settings are spelled out, so a change of the default recipe
# leaves the weights that tests pin (tests/test_golden.py) as they are.
TINY_TEST_MODEL = {
    "hidden": 32, "layers": 2, "heads": 1, "intermediate": 64, "batch_tokens": 64, "warmup": 1, "lr": 2e-3, "clean_fraction": 0.5,
    "mix": {"arith": 0.7, "arith-long": 0.1, "arith-word": 0.2}, "check_problems": 8, "floor": {},
}


@pytest.fixture
def repo_root() -> Path:
    return Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def tiny_base(tmp_path_factory) -> Path:
    """A barely trained tiny base (2 steps): a real model folder, fast to load and to train."""
    out = tmp_path_factory.mktemp("base") / "tiny"
    pretrain_tiny(out, TinyConfig(steps=2, **TINY_TEST_MODEL), log_every=0)
    return out


@pytest.fixture(scope="session")
def arith_data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("data") / "arith"
    prepare("arith", out, seed=0, sizes={"train": 64, "test": 16})
    return out


@pytest.fixture(scope="session")
def talkative_base(tiny_base, tmp_path_factory) -> Path:
    """The tiny test base with random weight matrices: its greedy completions are long and varied."""
    model = AutoModelForCausalLM.from_pretrained(tiny_base)
    generator = torch.Generator().manual_seed(0)
    for parameter in model.parameters():
        if parameter.dim() > 1:
            parameter.data = 0.3 * torch.randn(parameter.shape, generator=generator)
    out = tmp_path_factory.mktemp("talkative") / "model"
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_base).save_pretrained(out)
    return out


@pytest.fixture
def talkative_folder(talkative_base, tmp_path) -> Path:
    """A copy of the talkative base that a test may edit."""
    return Path(shutil.copytree(talkative_base, tmp_path / "talkative"))
