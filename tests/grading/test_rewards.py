"""Rewards: what counts as correct, and that no completion can hang or crash a reward."""

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from klrl.grading.answers import as_rational, extract_boxed, normalize
from klrl.grading.rewards import REWARDS, arithmetic_reward, countdown_reward, get_reward, math_reward

TIMEOUT = 1.0  # per-item deadline for hostile inputs, shorter than the default to keep tests quick
SLACK = 20.0  # a call may also wait for the worker to start; a hang would never return


def timed_math_reward(completions, references, timeout=TIMEOUT):
    """math_reward, asserting that it returns within `timeout` + SLACK per item."""
    start = time.monotonic()
    rewards = math_reward(completions, references, timeout=timeout)
    assert time.monotonic() - start < (timeout + SLACK) * len(completions)
    return rewards


# --- extraction and normalisation ---------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        (r"\boxed{1} and finally \boxed{2}", "2"),
        (r"\boxed{\frac{1}{\sqrt{2}}}", r"\frac{1}{\sqrt{2}}"),
        (r"\boxed{\{1, 2\}}", r"\{1, 2\}"),
        (r"\boxed{\left\{ x \right.}", r"\left\{ x \right."),
        (r"\fbox{7}", "7"),
        (r"\boxed {7}", "7"),
        (r"\boxed{\boxed{1}}", "1"),
        (r"\boxed{}", ""),
        (r"\boxed{1}}}", "1"),
        (r"\boxed{1} then \boxed{\frac{1}{2}", None),
        (r"\boxed 7", None),
        ("no answer here", None),
        ("", None),
    ],
)
def test_extract_boxed(text, expected):
    assert extract_boxed(text) == expected


@pytest.mark.parametrize(
    "text",
    ["{" * 100_000, "\\boxed{" * 15_000, "\\boxed{" + "{" * 100_000, "\\boxed{" + "a}" * 50_000, "\\" * 100_000],
)
def test_extract_boxed_is_linear_on_100kb(text):
    start = time.monotonic()
    extract_boxed(text)
    normalize(text)
    assert time.monotonic() - start < 0.5


@pytest.mark.parametrize(
    "answer, expected",
    [
        (r" \left( 1, 2 \right) ", "(1,2)"),
        (r"\dfrac{1}{2}.", r"\frac{1}{2}"),
        (r"90^\circ", "90"),
        (r"\$18.90", "18.90"),
        (r"10\%", "10"),
        (r"5\text{ cm}", "5"),
        (r"\text{ cm}", "cm"),
        (r"\text{(C)}", "C"),
        (r"\textbf{(E)}", "E"),
        (r"\text{east}", "east"),
        ("F", "F"),
    ],
)
def test_normalize(answer, expected):
    assert normalize(answer) == expected


@pytest.mark.parametrize(
    "answer, expected",
    [("3", 3), ("-0.25", -0.25), (r"\frac{3}{6}", 0.5), (r"\frac34", 0.75), ("7/2", 3.5), ("5.", 5), (".5", 0.5)],
)
def test_as_rational(answer, expected):
    assert as_rational(answer) == expected


@pytest.mark.parametrize("answer", ["", "x", "1/0", r"\frac{1}{0}", "1,000", "1e3", "--1", r"\sqrt{2}", "1" * 101])
def test_as_rational_rejects(answer):
    assert as_rational(answer) is None


# --- math ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "completion, reference, expected",
    [
        (r"\boxed{\frac12}", "0.5", 1.0),
        (r"\boxed{\dfrac{1}{2}}", r"\frac{1}{2}", 1.0),
        (r"\boxed{-\frac{3}{6}}", "-0.5", 1.0),
        (r"\boxed{0.333}", r"\frac{1}{3}", 0.0),
        (r"\boxed{3}", "4", 0.0),
        (r"\boxed{2\sqrt{2}}", r"\sqrt{8}", 1.0),
        (r"\boxed{\sqrt{18}}", r"3\sqrt{2}", 1.0),
        (r"\boxed{3\sqrt{3}}", r"3\sqrt{2}", 0.0),
        (r"\boxed{(1, 2)}", "(1,2)", 1.0),
        (r"\boxed{(2, 1)}", "(1,2)", 0.0),
        (r"\boxed{[1, 2)}", "[1,2)", 1.0),
        (r"\boxed{[1, 2]}", "[1,2)", 0.0),
        (r"\boxed{\{2, 1\}}", r"\{1,2\}", 1.0),
        (r"\boxed{1 + x^2}", "x^2+1", 1.0),
        (r"\boxed{x^2 - 1}", "x^2+1", 0.0),
        (r"\boxed{C}", r"\text{(C)}", 1.0),
        (r"\boxed{(C)}", r"\text{(C)}", 1.0),
        (r"\boxed{\text{(B)}}", r"\text{(C)}", 0.0),
        (r"\boxed{5\text{ cm}}", "5", 1.0),
        (r"\boxed{90^\circ}", "90", 1.0),
        (r"\boxed{\$18.90}", "18.90", 1.0),
        (r"\boxed{\frac{\sqrt{3}}{2}}", r"\frac{1}{2}\sqrt{3}", 1.0),
        (r"first \boxed{3}, no wait: \boxed{4}.", "4", 1.0),
        (r"first \boxed{4}, no wait: \boxed{3}.", "4", 0.0),
        ("The answer is 1/2.", r"\frac{1}{2}", 0.0),
        ("The answer is $4$.", "4", 0.0),
        (r"\boxed{}", "0", 0.0),
        (r"\boxed{ }", "0", 0.0),
    ],
)
def test_math_reward(completion, reference, expected):
    assert timed_math_reward([completion], [reference], timeout=5.0) == [expected]


def test_math_reward_batch_keeps_order():
    completions = [r"\boxed{2\sqrt{2}}", r"\boxed{7}", "nothing", r"\boxed{x+1}", r"\boxed{\frac{1}{2}}"]
    references = [r"\sqrt{8}", "7", "7", "1+x", "0.4"]
    assert timed_math_reward(completions, references, timeout=5.0) == [1.0, 1.0, 0.0, 1.0, 0.0]


def test_rewards_of_an_empty_batch():
    assert math_reward([], []) == arithmetic_reward([], []) == countdown_reward([], []) == []


@pytest.mark.parametrize("reward", list(REWARDS.values()))
def test_rewards_reject_mismatched_batches(reward):
    with pytest.raises(ValueError, match="2 completions but 1 references"):
        reward(["a", "b"], ["1"])


# --- math, hostile completions: each must give the right value within the bound ------------

SLOW = pytest.mark.slow  # each kills the worker: about TIMEOUT + 3 s for the replacement to warm up
HOSTILE = {
    "unclosed deep nesting": ("\\boxed{" + "{" * 5000 + "1", "5", 0.0),
    "closed deep nesting, long": ("\\boxed{" + "{" * 5000 + "1" + "}" * 5001, "5", 0.0),
    "closed deep nesting, short": ("\\boxed{" + "{" * 400 + "1" + "}" * 401, "5", 0.0),
    "nested fractions": ("\\boxed{" + "\\frac{" * 120 + "1" + "}{2}" * 120 + "}", "5", 0.0),
    "power tower of tens": (r"\boxed{10^{10^{10^{10}}}}", "5", 0.0),
    "power tower of nines": pytest.param(r"\boxed{9^{9^{9^9}}}", "81", 0.0, marks=SLOW),
    "power tower, same string": (r"\boxed{9^{9^{9^9}}}", r"9^{9^{9^9}}", 1.0),
    "100 kB without a box": ("x" * 100_000, "5", 0.0),
    "100 kB answer": ("\\boxed{" + "1+" * 50_000 + "1}", "5", 0.0),
    "100 kB answer, same string": ("\\boxed{" + "1+" * 50_000 + "1}", "1+" * 50_000 + "1", 1.0),
    "100 kB of boxes": ("\\boxed{" * 15_000, "5", 0.0),
    "100 kB integer": ("\\boxed{" + "9" * 100_000 + "}", "5", 0.0),
    "unbalanced braces": (r"\boxed{\frac{1}{2}", r"\frac{1}{2}", 0.0),
    "stray closing braces": (r"\boxed{1/2}}}}", r"\frac{1}{2}", 1.0),
    "broken latex": (r"\boxed{\frac{}{}^^_\sqrt[}", "5", 0.0),
    "huge factorial": pytest.param(r"\boxed{(10^{10})!}", "5", 0.0, marks=SLOW),
}


@pytest.mark.parametrize("completion, reference, expected", HOSTILE.values(), ids=HOSTILE.keys())
def test_math_reward_hostile(completion, reference, expected):
    assert timed_math_reward([completion], [reference]) == [expected]


def test_math_reward_recovers_after_a_timeout_within_a_batch():
    completions = [r"\boxed{2\sqrt{2}}", r"\boxed{10^{10^{10^{10}}}}", r"\boxed{\sqrt{27}}"]
    assert timed_math_reward(completions, [r"\sqrt{8}", "5", r"3\sqrt{3}"]) == [1.0, 0.0, 1.0]


def test_math_reward_from_worker_threads():
    batches = [
        ([r"\boxed{9^{9^{9^9}}}", r"\boxed{\sqrt{12}}"], ["81", r"2\sqrt{3}"]),
        ([r"\boxed{\sqrt{20}}"], [r"2\sqrt{5}"]),
        ([r"\boxed{x^2+2x+1}"], ["(x+1)^2"]),
    ]
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = [pool.submit(timed_math_reward, *batch) for batch in batches]
        assert [future.result(timeout=10 * (TIMEOUT + SLACK)) for future in futures] == [[0.0, 1.0], [1.0], [1.0]]


# --- arithmetic ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "completion, reference, expected",
    [
        (r"so \boxed{42}", "42", 1.0),
        (r"\boxed{ -7 }", "-7", 1.0),
        (r"\boxed{0}", "0", 1.0),
        (r"\boxed{41} no, \boxed{42}", "42", 1.0),
        (r"\boxed{42} no, \boxed{41}", "42", 0.0),
        (r"\boxed{042}", "42", 0.0),
        (r"\boxed{+42}", "42", 0.0),
        (r"\boxed{-0}", "0", 0.0),
        (r"\boxed{42.0}", "42", 0.0),
        (r"\boxed{1,042}", "1042", 0.0),
        (r"\boxed{\frac{84}{2}}", "42", 0.0),
        ("42", "42", 0.0),
        ("\\boxed{" + "4" * 100_000 + "}", "42", 0.0),
    ],
)
def test_arithmetic_reward(completion, reference, expected):
    assert arithmetic_reward([completion], [reference]) == [expected]


# --- countdown ----------------------------------------------------------------------------

PROBLEM = json.dumps({"numbers": [3, 5, 8, 2], "target": 62})


@pytest.mark.parametrize(
    "answer, expected",
    [
        ("(3 + 5) * 8 - 2", 1.0),
        ("8 * (5 + 3) - 2", 1.0),
        (r"(3 + 5) \times 8 - 2", 1.0),
        ("(3 + 5) × 8 - 2", 1.0),
        (r"\left(3 + 5\right) \cdot 8 - 2", 1.0),
        ("-(2 - (3 + 5) * 8)", 1.0),
        ("(3 + 5) * 8 + 2", 0.0),  # wrong value
        ("(3 + 5) * 8 - 2 + 0", 0.0),  # a number not given
        ("(3 + 3) * 8 + 5 + 2 + 5", 0.0),  # a number used twice
        ("(5 + 3) * 8", 0.0),  # not all numbers used
        ("(3 + 5) * 8 - 2 = 62", 0.0),
        ("(3 + 5) * 8 - 2.0", 0.0),
        ("(3 + 5) ** 8 - 2", 0.0),
        ("(3 + 5) // 8 - 2", 0.0),
        ("(3 + 5)(8) - 2", 0.0),
        ("(3 + 05) * 8 - 2", 0.0),
        ("(3 + 5) * 8 - 2 / (5 - 5)", 0.0),
        ("8 / (5 - 5) + 3 - 2", 0.0),
        ("__import__('os').system('echo hacked')", 0.0),
        ("(lambda: 62)()", 0.0),
        ("62", 0.0),
        ("(" * 150 + "3+5" + ")" * 150 + "*8-2", 0.0),  # over 200 characters
        ("", 0.0),
    ],
)
def test_countdown_reward(answer, expected):
    assert countdown_reward([rf"The answer: \boxed{{{answer}}}"], [PROBLEM]) == [expected]


def test_countdown_reward_is_exact_with_fractions():
    problem = json.dumps({"numbers": [1, 3, 4, 6], "target": 24})
    answers = [r"\boxed{6 / (1 - 3 / 4)}", r"\boxed{6 \div (1 - 3 \div 4)}", r"\boxed{6 / (1 - 4 / 3)}", "6/(1-3/4)"]
    assert countdown_reward(answers, [problem] * 4) == [1.0, 1.0, 0.0, 0.0]


def test_countdown_reward_deep_parentheses_within_the_limit():
    answer = "(" * 90 + "3 + 5" + ")" * 90 + " * 8 - 2"
    assert countdown_reward([rf"\boxed{{{answer}}}"], [PROBLEM]) == [1.0]


# --- registry -----------------------------------------------------------------------------


def test_get_reward():
    assert {name: get_reward(name) for name in ("math", "arithmetic", "countdown")} == {
        "math": math_reward,
        "arithmetic": arithmetic_reward,
        "countdown": countdown_reward,
    }
    with pytest.raises(ValueError, match="'gsm8k' is not one of math, arithmetic, countdown"):
        get_reward("gsm8k")
