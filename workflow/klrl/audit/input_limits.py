"""Reading a user's launch file within fixed bounds, for `klrl audit --config`: whatever the file
holds, the reading ends in well under a second with its result or one line naming the limit and
the file (a ValueError), never a traceback or a hang.

- MAX_BYTES: the file's size; text that is not UTF-8 (or holds NUL bytes) is refused as binary.
- MAX_DEPTH: the nesting of YAML/JSON mappings and lists (checked on the parser's events, before
  anything recursive runs).
- MAX_NODES: the YAML document's size with every alias expanded (an alias bomb is a few hundred
  bytes that expand to billions of nodes).
- MAX_WORDS: the shell words of a script or flags file.
- SECONDS: a time bound on the whole reading (SIGALRM, where the platform has it).
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
from pathlib import Path

MAX_BYTES = 1 << 20
MAX_DEPTH = 32
MAX_NODES = 100_000
MAX_WORDS = 20_000
SECONDS = 5


def refuse(path: Path, limit: str) -> ValueError:
    return ValueError(f"{path}: {limit}: refused (`klrl audit --config` reads launch files within fixed bounds)")


def read_text(path: Path) -> str:
    """The file's text, or one line: missing, too large, or binary."""
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise refuse(path, f"{size:,} bytes, over the size cap of {MAX_BYTES:,}")
    data = path.read_bytes()
    if b"\0" in data:
        raise refuse(path, "binary (a NUL byte), not a text launch file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise refuse(path, f"not UTF-8 text (byte {error.start})") from None


@contextlib.contextmanager
def time_bound(path: Path):
    """Raise one line naming the file if the block runs past SECONDS."""

    def expire(signum, frame):
        raise refuse(path, f"reading took over the time bound of {SECONDS} s")

    if not hasattr(signal, "SIGALRM"):
        yield
        return
    try:
        previous = signal.signal(signal.SIGALRM, expire)
    except ValueError:  # not the main thread: no alarm there
        yield
        return
    signal.setitimer(signal.ITIMER_REAL, SECONDS)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def json_mapping(path: Path, text: str):
    """A JSON document, its nesting checked on the text first (brackets outside strings)."""
    depth = 0
    for match in re.finditer(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise refuse(path, f"nested over the nesting cap of {MAX_DEPTH}")
        elif token in "]}":
            depth -= 1
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}:{error.lineno}: not valid JSON: {error.msg}") from None


def yaml_document(path: Path, text: str):
    """A YAML document as (data, the line of each dotted key), within the nesting and alias caps."""
    import yaml

    try:
        depth = 0
        for event in yaml.parse(text, Loader=yaml.SafeLoader):  # iterative: nesting counted before composing
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise refuse(path, f"nested over the nesting cap of {MAX_DEPTH}")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if node is None:
            return None, {}
        _expanded_size(path, node)
        loader = yaml.SafeLoader("")
        data = loader.construct_document(node)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ValueError(f"{where}: not valid YAML: {getattr(error, 'problem', None) or error}") from None
    return data, _key_lines(node)


def _expanded_size(path: Path, root) -> None:
    """Refuse a document whose node graph, aliases expanded, is over MAX_NODES (memoised: linear)."""
    import yaml

    size: dict[int, int] = {}
    order, stack = [], [root]
    while stack:  # a post-order without recursion
        node = stack.pop()
        if id(node) in size:
            continue
        size[id(node)] = 0
        order.append(node)
        if isinstance(node, yaml.SequenceNode):
            stack += node.value
        elif isinstance(node, yaml.MappingNode):
            stack += [part for pair in node.value for part in pair]
    for node in reversed(order):
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        else:
            children = []
        size[id(node)] = 1 + sum(size[id(child)] for child in children)
        if size[id(node)] > MAX_NODES:
            raise refuse(path, f"its aliases expand to over {MAX_NODES:,} nodes (the alias-expansion cap)")


def _key_lines(root) -> dict[str, int]:
    """The 1-based line of every scalar key, by its dotted path."""
    import yaml

    lines, stack = {}, [("", root)]
    while stack:
        prefix, node = stack.pop()
        if not isinstance(node, yaml.MappingNode):
            continue
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                dotted = prefix + key.value
                lines.setdefault(dotted, key.start_mark.line + 1)
                stack.append((dotted + ".", value))
    return lines
