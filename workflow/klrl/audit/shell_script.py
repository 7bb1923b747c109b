"""A launch script's commands as bash would run them, for `klrl audit --config`: a documented subset
of bash, enough for the libraries' own example scripts, where whatever is not understood is named.

Understood: comments; `\\` line continuations; quotes ('…' literal, "…" expanding); statements
split at newlines, `;`, `&&`, `||`, `|`, `&`; redirections (`>`, `>>`, `<`, `2>&1`, …) dropped
with their target; assignments `NAME=value`, `export`/`local`/`readonly`/`declare` ones, and
bash arrays `NAME=(a b …)` (over several lines too), in the order the script runs them;
expansions `$NAME`, `${NAME}`, `${NAME:-default}` (and `-`, `:=`, `=`), `${NAME[@]}`,
`${NAME[*]}`, `${NAME[i]}`, `"${NAME[@]}"` one word per element, an unquoted expansion split at
whitespace as bash splits it. The script's own arguments (`$@`, `$*`, `$1` …) are none: a script
run without arguments.

Not understood, and named by each word that holds it (`Word.unknown`): command substitution
`$(…)` and backquotes, arithmetic `$((…))`, other `${…}` forms (`${#NAME}`, `${NAME/a/b}`, …), and a variable the script never
assigns (from the caller's environment: taken as empty, as in a bare shell).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

from klrl.audit.input_limits import MAX_WORDS, refuse

REDIRECT = re.compile(r"^\d*(>>|>&|>|<|&>)")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
DECLARERS = ("export", "local", "readonly", "declare", "typeset")
SCRIPT_ARGUMENTS = ("@", "*", "#") + tuple("0123456789")


class Word(NamedTuple):
    text: str
    line: int
    unknown: tuple[str, ...] = ()  # the constructs in it this reader does not expand


class _Raw(NamedTuple):
    parts: list  # (text, quoted: bool, expand: bool)
    line: int


def commands(path: Path, text: str) -> list[list[Word]]:
    """Every simple command of the script, its words expanded, assignments applied in order."""
    variables: dict[str, list[tuple[str, int]]] = {}  # name -> its value, or its array's elements, and lines
    unknown_values: dict[str, tuple[str, ...]] = {}
    result, total = [], 0
    try:
        statements = _statements(path, text)
    except RecursionError:  # quotes and $( … ) nested thousands deep
        raise refuse(path, "quotes and substitutions nested over Python's recursion limit") from None
    for statement in statements:
        words = [raw for raw in statement if raw is not None]
        index = 0
        while index < len(words) and _joined(words[index]) in DECLARERS:
            index += 1
            while index < len(words) and _joined(words[index]).startswith("-"):
                index += 1
        assigned = False
        while index < len(words) and ASSIGNMENT.match(_joined(words[index], literal_only=True)):
            raw = words[index]
            name = _joined(raw, literal_only=True).split("=", 1)[0]
            value, array = _assigned(raw, name)
            if array is not None:
                expanded = [w for item in array for w in _expand(item, variables, unknown_values)]
                variables[name] = [(w.text, w.line) for w in expanded]
                unknown_values[name] = tuple(u for w in expanded for u in w.unknown)
            else:
                words_of = _expand(value, variables, unknown_values, split=False)
                variables[name] = [(words_of[0].text if words_of else "", raw.line)]
                unknown_values[name] = tuple(u for w in words_of for u in w.unknown)
            index, assigned = index + 1, True
        rest = [w for raw in words[index:] for w in _expand(raw, variables, unknown_values)]
        total += len(rest)
        if total > MAX_WORDS:
            raise refuse(path, f"over {MAX_WORDS:,} shell words (the token cap)")
        if rest or not assigned:
            result.append(rest)
    return [command for command in result if command]


def _joined(raw: _Raw, literal_only: bool = False) -> str:
    return "".join(text for text, quoted, expand in raw.parts if not (literal_only and (quoted or expand)))


def _assigned(raw: _Raw, name: str):
    """(the value's parts, None) or (None, the array's items) of an assignment word."""
    first_text, quoted, expand = raw.parts[0]
    rest = first_text[len(name) + 1 :]
    parts = ([(rest, quoted, expand)] if rest else []) + raw.parts[1:]
    if parts and parts[0][0] == "\0(":  # an array, tokenised as its items
        return None, parts[0][1]
    return _Raw(parts, raw.line), None


_NAME_EXPANSION = re.compile(r"\$[A-Za-z_][A-Za-z0-9_]*|\$[@*#0-9]")


def _expansions(text: str):
    """(start, end) of each `$…` or backquoted expansion in a word's text, nested ones whole."""
    index = 0
    while True:
        index = min((found for found in (text.find("$", index), text.find("`", index)) if found >= 0), default=-1)
        if index < 0:
            return
        if text[index] == "`":
            close = text.find("`", index + 1)
            end = len(text) if close < 0 else close + 1
        elif text.startswith("$(", index):
            close = _closing_paren(text, index + 1)
            end = len(text) if close < 0 else close + 1
        elif text.startswith("${", index):
            close = _closing_paren(text, index + 1, "{}")
            end = len(text) if close < 0 else close + 1
        else:
            match = _NAME_EXPANSION.match(text, index)
            end = match.end() if match else index + 1
        yield index, end
        index = end


def _expand(raw: _Raw, variables: dict, unknown_values: dict, split: bool = True) -> list[Word]:
    """The words one raw word expands to (several for an array or an unquoted split)."""
    words: list[list[str]] = [[]]  # the words so far, each a list of pieces
    lines = [raw.line]  # each word's line: an array element's own where the word starts with one
    unknown: list[str] = []
    started = vanished = False
    for text, quoted, expand in raw.parts:
        if not expand:
            words[-1].append(text)
            started = True
            continue
        position = 0
        for start, end in _expansions(text):
            words[-1].append(text[position:start])
            position = end
            pairs, whole, problem = _value(text[start:end], variables, unknown_values)
            values = [value for value, _ in pairs]
            unknown += problem
            if whole and quoted:  # "${A[@]}": one word per element, none for an empty array
                vanished = vanished or not values
                if values:
                    if not "".join(words[-1]):
                        lines[-1] = pairs[0][1]
                    words[-1].append(values[0])
                    words += [[value] for value in values[1:]]
                    lines += [line for _, line in pairs[1:]]
                continue
            joined = " ".join(values)
            if quoted or not split or problem:  # what is not understood stays one word
                words[-1].append(joined)
                continue
            pieces = joined.split()
            if not pieces:
                continue
            if joined[:1].isspace() and "".join(words[-1]):
                words.append([])
                lines.append(raw.line)
            words[-1].append(pieces[0])
            words += [[piece] for piece in pieces[1:]]
            lines += [raw.line] * (len(pieces) - 1)
            if joined[-1:].isspace():
                words.append([])
                lines.append(raw.line)
        words[-1].append(text[position:])
        started = started or quoted
    texts = ["".join(pieces) for pieces in words]
    if vanished and texts == [""]:
        return []
    problems = tuple(dict.fromkeys(unknown))
    return [Word(text, line, problems) for text, line in zip(texts, lines) if text or (started and len(texts) == 1)]


def _value(expansion: str, variables: dict, unknown_values: dict) -> tuple[list[tuple[str, int]], bool, list[str]]:
    """((value, its line) each, is a whole array, what is not understood) of one `$…` expansion."""
    if expansion.startswith("$(("):
        return [(expansion, 0)], False, [f"arithmetic {expansion}"]
    if expansion.startswith(("$(", "`")):
        return [(expansion, 0)], False, [f"command substitution {expansion}"]
    if expansion == "$":
        return [("$", 0)], False, []
    body = expansion[2:-1] if expansion.startswith("${") else expansion[1:]
    if body in SCRIPT_ARGUMENTS:
        return [], body in ("@", "*"), []
    match = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(?:\[(@|\*|\d+)\])?(?:(:?[-=])(.*))?", body)
    if not match:
        return [(expansion, 0)], False, [f"the expansion {expansion}"]
    name, index, operator, default = match.groups()
    if operator:  # the default is itself a word: quotes and expansions of its own
        default_words = _expand(_Raw([(default.strip('"'), True, True)], 0), variables, unknown_values, split=False)
        default = default_words[0].text if default_words else ""
    if name not in variables:
        if operator:
            return [(default, 0)], False, []
        return [], False, [f"${name}, which the script never assigns"]
    values = variables[name]
    problems = list(unknown_values.get(name, ()))
    if operator and operator.startswith(":") and not "".join(value for value, _ in values):
        return [(default, 0)], False, problems
    if index in ("@", "*"):
        return list(values), index == "@", problems
    position = int(index) if index else 0
    return ([values[position]] if position < len(values) else []), False, problems


def _statements(path: Path, text: str) -> list[list[_Raw]]:
    """The script's statements, each a list of raw words (a word's parts keep their quoting)."""
    statements, words, parts = [], [], []
    line, start_line, i, n = 1, 1, 0, len(text)
    skip_next, count = False, 0

    def end_word():
        nonlocal parts, skip_next, count
        count += bool(parts)
        if count > MAX_WORDS:
            raise refuse(path, f"over {MAX_WORDS:,} shell words (the token cap)")
        if parts:
            raw = _Raw(parts, start_line)
            if skip_next:
                skip_next = False
            elif REDIRECT.match(_joined(raw)) and not any(q for _, q, _ in parts):
                skip_next = _joined(raw) in (">", ">>", "<", "2>", "&>", "1>") or bool(
                    re.fullmatch(r"\d*[<>]+", _joined(raw))
                )
            else:
                words.append(raw)
        parts = []

    def end_statement():
        nonlocal words
        end_word()
        if words:
            statements.append(words)
        words = []

    while i < n:
        char = text[i]
        if not parts:
            start_line = line
        if char == "\\" and i + 1 < n:
            if text[i + 1] == "\n":
                line += 1
            else:
                parts.append((text[i + 1], True, False))
            i += 2
            continue
        if char == "\n":
            end_statement()
            line += 1
            i += 1
            continue
        if char in " \t":
            end_word()
            i += 1
            continue
        if char == "#" and not parts:
            while i < n and text[i] != "\n":
                i += 1
            continue
        if char in "'\"":
            close = _closing_quote(text, i)
            if close < 0:
                raise ValueError(f"{path}:{line}: not valid shell words: No closing quotation")
            body = text[i + 1 : close]
            if char == '"':
                body = re.sub(r'\\([$`"\\\n])', r"\1", body)
            parts.append((body, True, char == '"'))
            line += text.count("\n", i, close)
            i = close + 1
            continue
        if char == "(" and len(parts) == 1 and parts[0][0].endswith("=") and not parts[0][1]:
            close = _array_end(text, i)
            if close < 0:
                raise ValueError(f"{path}:{line}: not valid shell words: an array without its closing )")
            items = [raw for statement in _statements(path, text[i + 1 : close]) for raw in statement]
            parts.append(("\0(", [raw._replace(line=raw.line + line - 1) for raw in items], False))
            line += text.count("\n", i, close)
            i = close + 1
            continue
        operator = next((op for op in ("&&", "||", ";", "|", "&") if text.startswith(op, i)), None)
        if operator and not (operator == "&" and parts and _joined(_Raw(parts, line))[-1:] in "<>"):
            end_statement()
            i += len(operator)
            continue
        if text.startswith("${", i):
            close = _closing_paren(text, i + 1, "{}")
            if close < 0:
                raise ValueError(f"{path}:{line}: not valid shell words: a ${{ without its closing }}")
            parts.append((text[i : close + 1], False, True))
            i = close + 1
            continue
        if char == "$" and text.startswith("$(", i):
            close = _closing_paren(text, i + 1)
            if close < 0:
                raise ValueError(f"{path}:{line}: not valid shell words: a $( without its closing )")
            parts.append((text[i : close + 1], False, True))
            line += text.count("\n", i, close)
            i = close + 1
            continue
        match = re.match(r"\$\{[^}]*\}|[^\s'\"\\;&|#$()]+|\$[^\s'\"\\;&|]*|.", text[i:], re.DOTALL)
        parts.append((match.group(), False, "$" in match.group() or "`" in match.group()))
        i += len(match.group())
    end_statement()
    return statements


def _closing_quote(text: str, start: int) -> int:
    """The index of the quote that closes the one at `start` ("…" may hold $(…) with quotes of its own); -1: none."""
    quote, index = text[start], start + 1
    while 0 <= index < len(text):
        char = text[index]
        if char == quote:
            return index
        if quote == '"' and char == "\\":
            index += 1
        elif quote == '"' and text.startswith("$(", index):
            index = _closing_paren(text, index + 1)
            if index < 0:
                return -1
        index += 1
    return -1


def _closing_paren(text: str, start: int, pair: str = "()") -> int:
    """The index of the `)` (or pair[1]) that closes the one at `start`, past quotes and nesting; -1: none."""
    depth, index = 0, start
    while 0 <= index < len(text):
        char = text[index]
        if char in "'\"" and pair == "()":
            index = _closing_quote(text, index)
            if index < 0:
                return -1
        elif char == "\\":
            index += 1
        elif char == pair[0]:
            depth += 1
        elif char == pair[1]:
            depth -= 1
            if depth == 0:
                return index
        index += 1
    return -1


def _array_end(text: str, start: int) -> int:
    """The index of the `)` that closes the array opened at `start`, past quotes and comments; -1: none."""
    index = start + 1
    while 0 <= index < len(text):
        char = text[index]
        if char in "'\"":
            index = _closing_quote(text, index)
            if index < 0:
                return -1
        elif char == "#" and text[index - 1].isspace():
            index = text.find("\n", index)
            continue
        elif char == "\\":
            index += 1
        elif char == ")":
            return index
        index += 1
    return -1
