"""`klrl audit`: the one-call expectation equals the exact loop over groups (and, under an engine
mismatch, klrl's own exact gradient with that engine), planted bugs are caught (a KL term under
no_grad reads as a zero gradient, a flipped sign as biased), TRL's settings estimate the gradients
the registry names, a library whose environment is missing is one line naming its make target, a
mistake in the worker comes back as its own line, and the blocks of docs/audit.md are a fresh run's (verl's
and OpenRLHF's from their own environments): the audit tables, and the `--config` examples (their readings
checked without the libraries too)."""

import importlib.util
import re
from pathlib import Path

import pytest
import torch

from klrl.audit.report import doc_block, markdown
from klrl.audit import libraries
from klrl.audit.gradients import AuditSetting, audit_rows
from klrl_audit import expected_gradient
from klrl_audit.expectation import engine_theta
from klrl.objective.kl_config import KLConfig
from klrl.objective.loss import batch_loss
from klrl.toy import exact
from klrl_audit.toy import make_problem


def klrl_setting(name: str, wrap=lambda loss: loss, bug: str = "") -> AuditSetting:
    """This project's own loss for `name` as an audited library; `wrap` plants a bug in it."""
    config = exact.toy_loss_config(KLConfig.from_name(name, beta=1.0))

    def loss(batch):
        behaviour = batch.sampling_logp if batch.off_policy else None
        rewards = torch.zeros(batch.seqs.shape[0], dtype=batch.logp.dtype)
        return wrap(lambda: batch_loss(config, batch.logp, batch.ref_logp, behaviour, rewards, batch.mask)[0])()

    return AuditSetting("klrl", "test", name + bug, loss, tokens_averaged=False)


@pytest.mark.parametrize("name", ["k1-reward", "k3-loss", "k1-reward-prefixis"])
@pytest.mark.parametrize("mode", ["on", "off"])
def test_one_call_expectation_equals_the_loop_over_groups(name, mode):
    problem = make_problem(vocab=2, horizon=3, seed=1)
    reference = exact.expected_gradient(problem, KLConfig.from_name(name, beta=1.0), mode)
    setting = klrl_setting(name)
    torch.testing.assert_close(expected_gradient(setting.loss, mode, problem), reference, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["k1-reward", "k3-loss"])
def test_mismatch_expectation_equals_klrl_exact_with_that_engine(name):
    problem = make_problem(vocab=2, horizon=3, seed=1)
    config = KLConfig.from_name(name, beta=1.0)
    reference = exact.expected_gradient(problem, config, "on", engine_theta(problem))
    assert (reference - exact.expected_gradient(problem, config, "on")).norm() > 1e-3  # the engine differs
    torch.testing.assert_close(
        expected_gradient(klrl_setting(name).loss, "mismatch", problem), reference, rtol=1e-10, atol=1e-12
    )


def test_a_missing_environment_names_its_make_target(monkeypatch, tmp_path):
    monkeypatch.setattr(libraries, "REPO_ROOT", tmp_path)
    if importlib.util.find_spec("verl") is None:
        with pytest.raises(
            ValueError,
            match=r"^verl's audit environment .venv-audit-verl is missing: run `make audit-env LIBRARY=verl`$",
        ):
            libraries.library_rows("verl", 2, 3, 0)
    with pytest.raises(ValueError, match="--library: 'nemo' is not one of TRL, verl, OpenRLHF"):
        libraries.library_name("nemo")


def _under_no_grad(compute):
    def run():
        with torch.no_grad():
            return compute()

    return run


def _flipped(compute):
    return lambda: -compute()


def test_planted_bugs_are_caught():
    settings = [
        klrl_setting("k1-reward"),
        klrl_setting("k1-reward", _under_no_grad, " under no_grad"),
        klrl_setting("k1-reward", _flipped, " sign flipped"),
    ]
    rows = audit_rows(settings, 2, 3)
    on = {row["setting"]: row for row in rows if row["mode"] == "on"}
    assert on["k1-reward"]["estimates"] == "sequence-reverse-kl" and on["k1-reward"]["rel_bias"] < 1e-12
    assert on["k1-reward under no_grad"]["estimates"] == "zero"
    assert on["k1-reward under no_grad"]["rel_bias"] == pytest.approx(1.0, abs=1e-12)
    assert on["k1-reward sign flipped"]["estimates"] == "other"
    assert on["k1-reward sign flipped"]["rel_bias"] == pytest.approx(2.0, abs=1e-12)
    assert (
        "| k1-reward under no_grad | biased, 1.000 (zero) | biased, 1.000 (zero) | biased, 1.000 (zero) |"
        in markdown(rows)
    )


@pytest.fixture(scope="module")
def trl_rows():
    pytest.importorskip("trl")
    from klrl.audit.trl_adapter import settings

    return {(row["setting"], row["mode"]): row for row in audit_rows(settings(), vocab=2, horizon=3)}


@pytest.mark.slow
def test_trl_settings_estimate_the_gradients_the_registry_names(trl_rows):
    from importlib.metadata import version

    estimates = {key: row["estimates"] for key, row in trl_rows.items()}
    grpo = "GRPOTrainer beta>0, loss_type=dapo, use_bias_correction_kl={}, importance_sampling_level={}"
    assert estimates[(grpo.format(True, "token") + " (defaults)", "on")] == "token-reverse-kl"
    assert estimates[(grpo.format(True, "token") + " (defaults)", "off")] == "token-reverse-kl"
    assert estimates[(grpo.format(False, "token"), "on")] == "token-forward-kl"
    assert estimates[(grpo.format(True, "sequence"), "on")] == "other"
    assert estimates[("RLOOTrainer beta>0 (KL in the reward, defaults)", "on")] == "sequence-reverse-kl"
    assert estimates[("RLOOTrainer beta>0 (KL in the reward, defaults)", "off")] == "other"
    assert {row["version"] for row in trl_rows.values()} == {version("trl")}
    assert {row["method"] for row in trl_rows.values()} == {"exact"}


@pytest.mark.slow
@pytest.mark.audit_envs
def test_the_audit_block_of_docs_audit_equals_a_fresh_run(repo_root):
    pytest.importorskip("trl")
    rows = []
    for library in libraries.ADAPTERS:
        try:
            rows += libraries.library_rows(library, 3, 4, 0)
        except ValueError as error:
            pytest.skip(str(error))  # make test builds every environment first
    assert doc_block(rows) in (repo_root / "docs" / "audit.md").read_text()


@pytest.mark.audit_envs
def test_the_worker_passes_a_mistake_back_as_its_own_line():
    python = libraries.REPO_ROOT / libraries.ADAPTERS["verl"][2] / "bin" / "python"
    if importlib.util.find_spec("verl") is None and not python.exists():
        pytest.skip("make audit-env LIBRARY=verl builds verl's environment")
    with pytest.raises(
        ValueError,
        match=r"^'no such setting' is not one of verl's audited settings \(`klrl audit --library verl` lists them\)$",
    ):
        libraries.library_rows("verl", 2, 3, 0, setting="no such setting")


def documented_config_examples(repo_root) -> list[tuple[str, str]]:
    """(launch file, output) of each `klrl audit --config` example in docs/audit.md's generated block."""
    text = (repo_root / "docs" / "audit.md").read_text()
    block = text.split("<!-- audit-config:begin -->")[1].split("<!-- audit-config:end -->")[0]
    examples = re.findall(r"```console\n\$ \.venv/bin/python -m klrl audit --config (\S+)\n(.*?)\n```", block, re.S)
    return [(path, output + "\n") for path, output in examples]


def test_the_config_examples_of_docs_audit_read_as_a_fresh_reading(repo_root, monkeypatch):
    """The reading each example's generated output starts with (no library environment needed) is today's."""
    from klrl.audit.user_config import read_config
    from klrl.verbs.audit import CONFIG_EXAMPLES

    examples = documented_config_examples(repo_root)
    assert [path for path, _ in examples] == list(CONFIG_EXAMPLES)
    monkeypatch.chdir(repo_root)
    for path, output in examples:
        if path.endswith(".yaml"):
            pytest.importorskip("trl")
        reading = "\n".join(read_config(Path(path)).lines(path)) + "\n"
        assert output.startswith(reading + "\n"), path
        assert "exact, on the toy policy: V = 3, T = 4, seed 0" in output, path


@pytest.mark.slow
@pytest.mark.audit_envs
def test_the_config_examples_of_docs_audit_equal_fresh_runs(repo_root, monkeypatch):
    pytest.importorskip("trl")
    from klrl.audit.report import config_examples_block
    from klrl.verbs.audit import CONFIG_EXAMPLES, config_output

    monkeypatch.chdir(repo_root)
    examples = []
    for path in CONFIG_EXAMPLES:
        pieces = []
        try:
            config_output(Path(path), None, 3, 4, 0, pieces.append)
        except ValueError as error:
            if "run `make" not in str(error):
                raise
            pytest.skip(str(error))  # make test builds every environment first
        examples.append((path, "".join(pieces)))
    assert config_examples_block(examples) in (repo_root / "docs" / "audit.md").read_text()
