"""`klrl audit --config` on hostile or odd launch files: an alias bomb, deep nesting, a 6 MB flags file, binary
junk, a script too long in words each end in under 5 s with one line naming the limit and the file (exit status 2);
and the shell subset (variables, defaults, arrays, quoting, `ray job submit … --`) expands as bash would."""

import time
from pathlib import Path

import pytest

from klrl.audit import input_limits
from klrl.audit.shell_script import commands
from klrl.cli import main

BOMB = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n' + "".join(
    f"{name}: &{name} [{','.join(['*' + previous] * 9)}]\n" for previous, name in zip("abcdefgh", "bcdefghi")
)


def one_line_refusal(capsys, path: Path, limit: str) -> None:
    """`klrl audit --config path` ends in under 5 s, status 2, one line on stderr naming the file and the limit."""
    start = time.perf_counter()
    assert main(["audit", "--config", str(path)]) == 2
    assert time.perf_counter() - start < 5
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith(f"klrl audit: error: {path}: ") and limit in line, line


@pytest.mark.parametrize(
    ("name", "content", "limit"),
    [
        ("bomb.yaml", BOMB.encode(), "its aliases expand to over 100,000 nodes (the alias-expansion cap)"),
        ("deep.yaml", ("a: " + "[" * 5000 + "]" * 5000 + "\n").encode(), "nested over the nesting cap of 32"),
        ("deep.json", ("[" * 100_000 + "]" * 100_000).encode(), "nested over the nesting cap of 32"),
        ("deep2.json", ('{"a": ' * 40 + "1" + "}" * 40).encode(), "nested over the nesting cap of 32"),
        ("flags.txt", b"--algo.kl.use_loss --algo.kl.estimator k3 " * 150_000, "bytes, over the size cap of 1,048,576"),
        ("junk.sh", bytes(range(256)) * 64, "binary (a NUL byte), not a text launch file"),
        ("junk.yaml", b"beta: \xff\xfe 1\n", "not UTF-8 text (byte 6)"),
        ("words.txt", b"--algo.kl.use_loss " * 30_000, "over 20,000 shell words (the token cap)"),
        ("nested.sh", b'run "$(' * 5000, "quotes and substitutions nested over Python's recursion limit"),
    ],
)
def test_a_hostile_file_is_one_line_naming_the_limit_in_under_5_s(tmp_path, capsys, name, content, limit):
    path = tmp_path / name
    path.write_bytes(content)
    assert len(BOMB) < 500
    one_line_refusal(capsys, path, limit)


def test_a_slow_reading_is_stopped_at_the_time_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(input_limits, "SECONDS", 0.05)
    path = tmp_path / "slow.sh"
    with pytest.raises(ValueError, match=r"slow\.sh: reading took over the time bound of 0\.05 s"):
        with input_limits.time_bound(path):
            time.sleep(1)


def words(text: str) -> list[list[tuple[str, int]]]:
    return [[(word.text, word.line) for word in command] for command in commands(Path("s.sh"), text)]


def test_variables_defaults_and_quotes_expand_as_bash_would():
    script = 'A=1e-3; B=${UNSET:-low_var_kl} C="x y"\nexport D=\'$A\'\nrun $A "${B}" $C "$C" $D "${E:=k3}" $@ "$@"\n'
    assert words(script) == [
        [("run", 3), ("1e-3", 3), ("low_var_kl", 3), ("x", 3), ("y", 3), ("x y", 3), ("$A", 3), ("k3", 3)]
    ]


def test_arrays_expand_one_word_per_element_across_lines_and_comments():
    """ "${A[@]}" gives each element its own word and the line it is written on."""
    script = 'ARGS=(\n  a=1   # the first\n  \'b=2 3\'\n  # c=4\n)\nrun "${ARGS[@]}" ${ARGS[1]} "${ARGS[*]}"\n'
    assert words(script) == [[("run", 6), ("a=1", 2), ("b=2 3", 3), ("b=2", 6), ("3", 6), ("a=1 b=2 3", 6)]]


def test_what_is_not_understood_is_named_on_the_word():
    (command,) = commands(Path("s.sh"), 'N=$(nproc)\nrun x=$N y=$((2 * 3)) z=$NEVER "${#ARGS[@]}"\n')
    assert [word.unknown for word in command[1:]] == [
        ("command substitution $(nproc)",),
        ("arithmetic $((2 * 3))",),
        ("$NEVER, which the script never assigns",),
        ("the expansion ${#ARGS[@]}",),
    ]


def test_statements_redirections_and_ray_job_submit():
    script = (
        "set -x\n"
        'ray job submit --address="http://127.0.0.1:8265" \\\n'
        '   --runtime-env-json=\'{"working_dir": "/x"}\' \\\n'
        "   -- python3 -m openrlhf.cli.train_ppo_ray --a 1 2>&1 | tee log.txt && echo done\n"
    )
    assert [[text for text, _ in command] for command in words(script)] == [
        ["set", "-x"],
        [
            "ray",
            "job",
            "submit",
            "--address=http://127.0.0.1:8265",
            '--runtime-env-json={"working_dir": "/x"}',
            "--",
            "python3",
            "-m",
            "openrlhf.cli.train_ppo_ray",
            "--a",
            "1",
        ],
        ["tee", "log.txt"],
        ["echo", "done"],
    ]


def test_the_verl_example_as_is_is_k3_in_the_loss_clamped_and_biased(capsys):
    """verl's own run_qwen2_5-7b_math.sh, as a researcher runs it: the reading (no library needed)."""
    path = Path(__file__).parent / "configs" / "verl_grpo_qwen2_5-7b_math.sh"
    from klrl.audit.user_config import read_config

    reading = read_config(path)
    assert (reading.library, reading.beta) == ("verl", 0.001)
    assert reading.why == "line 15 runs verl.trainer.main_ppo: Hydra overrides"
    assert ("actor_rollout_ref.actor.kl_loss_type", "low_var_kl", 29) in reading.keys
    assert reading.kl.startswith(
        "low_var_kl = k3 in the loss, its value clamped to [-10, 10] (unclamped for πref/πθ in [1.7e-05, 13.6])"
    )
    assert reading.target.startswith("the per-token forward KL")
