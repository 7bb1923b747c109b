r"""Task rewards: the one definition of "correct" used by RL training and by lm-eval evaluation.

Every reward is a pure, batched function `(completions, references) -> list[float]` of 1.0
(correct) and 0.0 (anything else), registered in `REWARDS`. The answer is always the content
of the completion's last `\boxed{...}` (rules in `klrl.grading.answers`); no box gives 0.0. No
completion, however long or hostile, makes a reward raise or run past its time bound.

math        the reference is a MATH answer string. 1.0 when the normalised strings are equal
            (`klrl.grading.answers.normalize`); when both are plain numbers, 1.0 iff they are equal
            as exact rationals (`klrl.grading.answers.as_rational`, no sympy: `0.333` is not `1/3`,
            unlike math-verify's rounding); otherwise when math-verify finds them equivalent
            (`\frac12` = `0.5`, `2\sqrt{2}` = `\sqrt{8}`, intervals, sets, `\text{(C)}` = `C`).
            The symbolic check runs in a worker subprocess (see "Time bound"). An answer or
            reference over MAX_SYMPY_CHARS characters gets the string comparison only.
arithmetic  the reference is an integer. 1.0 iff the answer, spaces removed, is the canonical
            decimal string of that integer: optional `-`, no leading zeros, no `+`, no
            thousands separators (the embedded task writes answers as `str(int)`).
countdown   the reference is JSON `{"numbers": [int, ...], "target": int}`. The answer must be
            an expression of non-negative integer literals, `+ - * /`, unary `-` and
            parentheses (`×`, `\times`, `\cdot` read as `*`; `÷`, `\div` as `/`; `\left`,
            `\right` dropped), at most MAX_COUNTDOWN_CHARS characters, so no value exceeds a
            few hundred digits. As in reasoning-gym's Countdown scoring, the literals must be
            exactly the given numbers, each used once (all of them), and the value must equal
            the target, here exactly (Fraction arithmetic, not a float tolerance). Parsed with
            `ast` and a whitelist of node types, never evaluated by Python; `**`, `//`, names,
            calls, floats, `=` and division by zero give 0.0. reasoning-gym's partial credit
            (0.05 and 0.01 for wrong answers) is not used: rewards are binary.

Time bound: the symbolic checks run in `klrl.grading.verify_worker`'s worker processes, with a deadline
per item and one per batch (after which the items not yet graded score 0.0 and are counted), so
no completion, nor any batch of them, can hang the caller, on any thread.
"""

from __future__ import annotations

import ast
import json
import operator
import re
from collections.abc import Callable
from fractions import Fraction

from klrl.grading.answers import as_rational, extract_boxed, normalize
from klrl.grading.verify_worker import BATCH_DEADLINE, check_equivalent

MAX_SYMPY_CHARS = 1000
MAX_COUNTDOWN_CHARS = 200
_COUNTDOWN_CHARS = re.compile(r"[0-9 +\-*/()]+")
_COUNTDOWN_SYMBOLS = (("\\left", ""), ("\\right", ""), ("\\times", "*"), ("\\cdot", "*"), ("×", "*"))
_COUNTDOWN_SYMBOLS += (("\\div", "/"), ("÷", "/"))
_COUNTDOWN_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def _check_batch(completions: list[str], references: list[str]) -> None:
    """Raise ValueError unless there is one reference per completion."""
    if len(completions) != len(references):
        raise ValueError(f"rewards: {len(completions)} completions but {len(references)} references")


def math_reward(
    completions: list[str], references: list[str], timeout: float = 2.0, deadline: float | None = BATCH_DEADLINE
) -> list[float]:
    r"""1.0 where the last boxed answer is equivalent to the MATH reference, else 0.0.

    `timeout`: the seconds (finite) that math-verify may spend on each answer it is sent;
    `deadline`: the seconds the whole batch's symbolic checks may take (None: no limit).

    >>> math_reward([r"so \boxed{\dfrac{1}{2}}.", r"\boxed{0.5}", "1/2", r"\boxed{1/3}"], [r"\frac{1}{2}"] * 4)
    [1.0, 1.0, 0.0, 0.0]
    """
    _check_batch(completions, references)
    rewards = [0.0] * len(completions)
    pending = []
    for i, (completion, reference) in enumerate(zip(completions, references)):
        answer = extract_boxed(completion)
        normalized = "" if answer is None else normalize(answer)
        if not normalized:
            continue
        expected = normalize(reference)
        if normalized == expected:
            rewards[i] = 1.0
        elif (value := as_rational(normalized)) is not None and (target := as_rational(expected)) is not None:
            rewards[i] = float(value == target)
        elif len(answer) <= MAX_SYMPY_CHARS and len(reference) <= MAX_SYMPY_CHARS:
            pending.append((i, reference, answer))
    verdicts = check_equivalent([(reference, answer) for _, reference, answer in pending], timeout, deadline)
    for (i, _, _), verdict in zip(pending, verdicts):
        rewards[i] = float(verdict)
    return rewards


def arithmetic_reward(completions: list[str], references: list[str]) -> list[float]:
    r"""1.0 where the last boxed answer, spaces removed, is `str(int(reference))`, else 0.0.

    >>> arithmetic_reward([r"\boxed{ -12 }", r"\boxed{012}", r"\boxed{1,234}", "12"], ["-12", "12", "1234", "12"])
    [1.0, 0.0, 0.0, 0.0]
    """
    _check_batch(completions, references)
    rewards = []
    for completion, reference in zip(completions, references):
        answer = extract_boxed(completion)
        rewards.append(float(answer is not None and "".join(answer.split()) == str(int(reference))))
    return rewards


def countdown_reward(completions: list[str], references: list[str]) -> list[float]:
    r"""1.0 where the last boxed expression uses each given number once and equals the target.

    >>> ref = '{"numbers": [3, 5, 8], "target": 64}'
    >>> countdown_reward([r"\boxed{(3 + 5) \times 8}", r"\boxed{3 * 5 + 8}", r"\boxed{(3+5)*8*1}"], [ref] * 3)
    [1.0, 0.0, 0.0]
    """
    _check_batch(completions, references)
    rewards = []
    for completion, reference in zip(completions, references):
        problem = json.loads(reference)
        answer = extract_boxed(completion)
        value, literals = (None, []) if answer is None else _countdown_value(answer)
        rewards.append(float(value == problem["target"] and sorted(literals) == sorted(problem["numbers"])))
    return rewards


def _countdown_value(expression: str) -> tuple[Fraction | None, list[int]]:
    """The value and the integer literals of a Countdown expression; (None, []) if it is not one."""
    for symbol, replacement in _COUNTDOWN_SYMBOLS:
        expression = expression.replace(symbol, replacement)
    if len(expression) > MAX_COUNTDOWN_CHARS or not _COUNTDOWN_CHARS.fullmatch(expression):
        return None, []
    literals: list[int] = []

    def value(node: ast.expr) -> Fraction:
        """The exact value of a whitelisted node; ValueError for any other node."""
        if isinstance(node, ast.Constant) and type(node.value) is int:
            literals.append(node.value)
            return Fraction(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _COUNTDOWN_OPS:
            return _COUNTDOWN_OPS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        raise ValueError(f"countdown: {type(node).__name__} is not allowed")

    try:
        return value(ast.parse(expression.strip(), mode="eval").body), literals
    except (SyntaxError, ValueError, ZeroDivisionError, RecursionError, MemoryError):
        return None, []


def _countdown_reference_problem(reference: str) -> str:
    try:
        problem = json.loads(reference)
    except ValueError:
        return "JSON"
    if not (
        isinstance(problem, dict)
        and isinstance(problem.get("target"), int)
        and isinstance(problem.get("numbers"), list)
    ):
        return 'a JSON object {"numbers": [int, ...], "target": int}'
    if not problem["numbers"] or not all(type(n) is int and n >= 0 for n in problem["numbers"]):
        return "a countdown problem with a non-empty list of non-negative integers"
    return ""


_REFERENCE_PROBLEMS = {
    "math": lambda reference: "" if reference.strip() else "a non-empty answer",
    "arithmetic": lambda reference: "" if re.fullmatch(r"-?(0|[1-9][0-9]*)", reference) else "an integer",
    "countdown": _countdown_reference_problem,
}


def check_reference(reward: str, reference: str) -> str:
    """What a reference answer of reward `reward` must be and is not ('' when it is fine, or when
    the reward defines no check), so that bad data fails when it is read, not inside the reward
    mid-training.

    >>> check_reference("arithmetic", "twelve"), check_reference("arithmetic", "-12")
    ('an integer', '')
    """
    get_reward(reward)
    return _REFERENCE_PROBLEMS.get(reward, lambda _: "")(reference)


REWARDS = {"math": math_reward, "arithmetic": arithmetic_reward, "countdown": countdown_reward}


def get_reward(name: str) -> Callable[..., list[float]]:
    """The reward function registered as `name`.

    >>> get_reward("math") is math_reward
    True
    """
    if name not in REWARDS:
        raise ValueError(f"reward: {name!r} is not one of {', '.join(REWARDS)}")
    return REWARDS[name]
