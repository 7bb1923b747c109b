"""`python -m klrl` for tests that run the CLI in subprocesses (e.g. under torchrun), with
one more reward, `parity` (odd-length completions score 1): an untrained tiny model earns no
arithmetic reward, hence no advantage, and this one gives it signal. With
KLRL_TEST_CRASH_AT=<step>, the process that writes checkpoints is killed (SIGKILL) right after
writing that step's (a kill at a known point); KLRL_TEST_CRASH_AT is read by every process, so with one
process the whole job dies there. Several commands separated by `+` run in turn in one process
(one launch for several cells), all in one process group: torch cannot start a second default
group after destroying the first under torchrun (its store keys repeat, and the ranks hang). With
KLRL_TEST_SYNC_LOG=<folder> (the vllm backend), every process compares its engine with the model
it syncs from, on fixed token sequences, before and after each sync, and appends the largest
log-prob gaps to <folder>/rank<RANK>.jsonl."""

import json
import os
import signal
import sys
from pathlib import Path

from klrl.grading import rewards
from klrl.cli import main
from klrl.training import distributed, trainer


def parity_reward(completions: list[str], references: list[str]) -> list[float]:
    return [float(len(text) % 2) for text in completions]


def crash_after_checkpoint(step: int) -> None:
    save = trainer.save_checkpoint

    def save_then_die(folder, state, **collective):
        save(folder, state, **collective)
        if state["step"] == step:
            os.kill(os.getpid(), signal.SIGKILL)

    trainer.save_checkpoint = save_then_die


# fixed prompt and completion token ids (SmolLM2's vocabulary) whose log-probs are compared
PROBE_PROMPTS = [[1, 504, 2365], [1, 1973, 314, 253, 9000]]
PROBE_COMPLETIONS = [[28, 216, 284, 28, 365], [365, 216, 216, 284]]


def engine_gap(engine, model) -> float:
    """The largest gap between the engine's and the model's log-prob of a probe token (the
    model's forward is collective under FSDP: every process calls this at the same point)."""
    import torch
    from klrl.training.scoring import completion_logits, token_logp
    from klrl.training.vllm_backend import completions_rollout

    rollout = completions_rollout(PROBE_PROMPTS, PROBE_COMPLETIONS, pad_id=0, stop_ids=(2,))  # no probe token is a stop
    with torch.no_grad():
        logp = token_logp(completion_logits(model, rollout), rollout.completion_ids)
    ours = [row[mask.bool()] for row, mask in zip(logp, rollout.completion_mask)]
    theirs = engine.sequence_logprobs(PROBE_PROMPTS, PROBE_COMPLETIONS)
    return max((a - b).abs().max().item() for a, b in zip(ours, theirs))


def log_syncs(folder: Path) -> None:
    from klrl.training.vllm_backend import VLLMEngine

    sync = VLLMEngine.sync
    log = folder / f"rank{os.environ.get('RANK', '0')}.jsonl"

    def sync_and_compare(engine, model, version):
        held, before = engine.version, engine_gap(engine, model)
        sync(engine, model, version)
        record = {"held": held, "version": version, "before": before, "after": engine_gap(engine, model)}
        with log.open("a") as file:
            file.write(json.dumps(record) + "\n")

    VLLMEngine.sync = sync_and_compare


if __name__ == "__main__":
    rewards.REWARDS["parity"] = parity_reward
    if "KLRL_TEST_CRASH_AT" in os.environ:
        crash_after_checkpoint(int(os.environ["KLRL_TEST_CRASH_AT"]))
    if "KLRL_TEST_SYNC_LOG" in os.environ:
        log_syncs(Path(os.environ["KLRL_TEST_SYNC_LOG"]))
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
