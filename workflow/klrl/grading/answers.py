r"""Answer extraction and string normalisation, shared by every reward in `klrl.grading.rewards`.

Extraction (`extract_boxed`): the answer is the content of the last `\boxed{` (or `\fbox{`;
spaces are allowed before the brace) in the text, up to its matching `}`. Braces escaped as
`\{` and `\}` are text, not grouping. When boxes nest, the innermost last one wins
(`\boxed{\boxed{1}}` gives `1`). No box, or a last box whose brace never closes: None.
The scan is one regular-expression pass plus one brace pass, linear in the text length.

Normalisation (`normalize`, MATH-style, after Hendrycks et al.'s `strip_string`), in order:
    a trailing `\text{ ...}` or `\mbox{ ...}` whose content starts with a space is a unit and
        is dropped (`5\text{ cm}` -> `5`), unless nothing would be left;
    all whitespace is removed;
    `\left`, `\right`, `\!`, `\,`, `\;`, `\:`, `\displaystyle`, `\$`, `$`, `\%`, `%`, `^\circ`
        and `^{\circ}` are removed, `\dfrac` and `\tfrac` become `\frac`;
    `\text{X}`, `\textbf{X}`, `\textrm{X}`, `\mathrm{X}` and `\mbox{X}` become `X`;
    trailing `.` are removed;
    a multiple-choice answer `A`-`E`, with or without parentheses, becomes the bare letter
        (`\text{(C)}` -> `C`).
It is a fast path for exact matches, not an equivalence test: `\frac12` and `0.5` stay
different strings.

Numbers (`as_rational`): a normalised answer that is a plain number, an optional `-` before an
integer, a decimal (`0.5`, `.5`, `5.`), `\frac{a}{b}`, `\frac ab` (one digit each) or `a/b`
with natural a and b, is read as an exact rational, so `\frac12`, `0.5` and `1/2` are equal
and `0.333` is not `\frac13`. Anything else, or over 100 characters, is not a number here.
"""

from __future__ import annotations

import re
from fractions import Fraction

_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
_BRACE = re.compile(r"\\[{}]|[{}]")
_UNIT = re.compile(r"\\(?:text|mbox)\{\s[^{}]*\}\s*$")
_TEXT = re.compile(r"\\(?:text|textbf|textrm|mathrm|mbox)\{([^{}]*)\}")
_CHOICE = re.compile(r"\(?([A-E])\)?")
_RATIONAL = re.compile(
    r"(-?)(?:([0-9]+\.?[0-9]*|\.[0-9]+)|\\frac\{([0-9]+)\}\{([0-9]+)\}|\\frac([0-9])([0-9])|([0-9]+)/([0-9]+))"
)
_WHITESPACE = re.compile(r"\s+")
_REMOVED = ("\\left", "\\right", "\\!", "\\,", "\\;", "\\:", "\\displaystyle")
_REMOVED += ("^{\\circ}", "^\\circ", "\\%", "%", "\\$", "$")


def extract_boxed(text: str) -> str | None:
    r"""Content of the last `\boxed{...}` or `\fbox{...}` in `text`; None if absent or unclosed.

    >>> extract_boxed(r"first \boxed{1}, then \boxed{\frac{1}{2}}.")
    '\\frac{1}{2}'
    >>> extract_boxed(r"\boxed{\{1, 2\}}"), extract_boxed(r"\boxed{x"), extract_boxed("42")
    ('\\{1, 2\\}', None, None)
    """
    start = None
    for start in _BOX.finditer(text):
        pass
    if start is None:
        return None
    depth = 1
    for brace in _BRACE.finditer(text, start.end()):
        if brace.group() == "{":
            depth += 1
        elif brace.group() == "}":
            depth -= 1
            if depth == 0:
                return text[start.end() : brace.start()]
    return None


def normalize(answer: str) -> str:
    r"""The answer in the canonical string form described in the module docstring.

    >>> normalize(r"\left( \dfrac{1}{2}, 3 \right)."), normalize(r"5\text{ cm}"), normalize(r"\text{(C)}")
    ('(\\frac{1}{2},3)', '5', 'C')
    """
    without_unit = _UNIT.sub("", answer)
    answer = _WHITESPACE.sub("", without_unit if without_unit.strip() else answer)
    for token in _REMOVED:
        answer = answer.replace(token, "")
    answer = answer.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    answer = _TEXT.sub(r"\1", answer).rstrip(".")
    choice = _CHOICE.fullmatch(answer)
    return choice.group(1) if choice else answer


def as_rational(answer: str) -> Fraction | None:
    r"""The exact value of a normalised answer that is a plain number; None if it is not one.

    >>> as_rational(r"-\frac{3}{6}"), as_rational(".5"), as_rational("1/0"), as_rational("x/2")
    (Fraction(-1, 2), Fraction(1, 2), None, None)
    """
    number = _RATIONAL.fullmatch(answer) if len(answer) <= 100 else None
    if number is None:
        return None
    sign, decimal, *parts = number.groups()
    if decimal is not None:
        value = Fraction(decimal)
    else:
        numerator, denominator = (int(part) for part in parts if part is not None)
        if denominator == 0:
            return None
        value = Fraction(numerator, denominator)
    return -value if sign else value
