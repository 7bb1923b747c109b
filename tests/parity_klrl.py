"""`python -m klrl` for tests that run the CLI in subprocesses (e.g. under torchrun), with
one more reward, `parity` (odd-length completions score 1): an untrained tiny model earns no
arithmetic reward, hence no advantage, and this one gives it signal. With
KLRL_TEST_CRASH_AT=<step>, the process that writes checkpoints dies right after writing that
step's (a kill at a known point); KLRL_TEST_CRASH_AT is read by every process, so with one
process the whole job dies there. Several commands separated by `+` run in turn in one process
(one launch for several cells), all in one process group: torch cannot start a second default
group after destroying the first under torchrun (its store keys repeat, and the ranks hang)."""

import os
import sys

from klrl import rewards
from klrl.cli import main
from klrl.training import distributed, trainer


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
    commands, command = [], []
    for argument in sys.argv[1:] + ["+"]:
        if argument == "+":
            commands.append(command)
            command = []
        else:
            command.append(argument)
    teardown, distributed.teardown = distributed.teardown, lambda: None
    codes = [main(command) or 0 for command in commands]
    teardown()
    sys.exit(max(codes))
