"""klrl.training.seeds: one generator per seed, purpose and step."""

import torch

from klrl.training.seeds import seeded_generator


def test_every_step_and_purpose_gets_its_own_sampling_seed():
    draws = {
        key: torch.rand(4, generator=seeded_generator(*key)).tolist()
        for key in [(0, "rollout", 0), (0, "rollout", 1), (0, "rollout", 12), (1, "rollout", 0), (0, "eval")]
    }
    assert len({tuple(v) for v in draws.values()}) == len(draws)
    assert torch.rand(4, generator=seeded_generator(0, "rollout", 1)).tolist() == draws[(0, "rollout", 1)]
