"""The examples of klrl-audit's page for library maintainers (packages/klrl-audit/README.md), run as they are
written: each library's code block executed, its test functions returned."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "packages" / "klrl-audit" / "README.md"


def example(library: str) -> dict:
    """The namespace of the code block under the paragraph that starts with `library`:."""
    (code,) = re.findall(rf"^{re.escape(library)}: .*?```python\n(.*?)```", README.read_text(), re.S | re.M)
    namespace: dict = {}
    exec(compile(code, f"{README}:{library}", "exec"), namespace)
    return namespace
