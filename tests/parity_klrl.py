"""`python -m klrl` for tests that run the CLI in subprocesses (e.g. under torchrun), with
one more reward, `parity` (odd-length completions score 1): an untrained tiny model earns no
arithmetic reward, hence no advantage, and this one gives it signal. With
KLRL_TEST_CRASH_AT=<step>, the process that writes checkpoints dies right after writing that
step's (a kill at a known point); KLRL_TEST_CRASH_AT is read by every process, so with
one process the whole job dies there."""

import os
import sys

from klrl import rewards
from klrl.cli import main
from klrl.training import trainer


def parity_reward(completions: list[str], references: list[str]) -> list[float]:
    return [float(len(text) % 2) for text in completions]


def crash_after_checkpoint(step: int) -> None:
    save = trainer.save_checkpoint

    def save_then_die(folder, state, **collective):
        save(folder, state, **collective)
        if state["step"] == step:
            os._exit(3)

    trainer.save_checkpoint = save_then_die


if __name__ == "__main__":
    rewards.REWARDS["parity"] = parity_reward
    if "KLRL_TEST_CRASH_AT" in os.environ:
        crash_after_checkpoint(int(os.environ["KLRL_TEST_CRASH_AT"]))
    sys.exit(main())
