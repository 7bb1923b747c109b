"""OpenRLHF's own KL code under `klrl audit` (run in .venv-audit-openrlhf by `make test-audit`):
its rows equal klrl's exact gradients for the configurations both name, the findings hold, a bug
planted in a copy of its function (the importance weight dropped) changes the row, and the empty
flash-attn stand-in is never called."""

import inspect

import pytest
import torch

from audit.library_env import require

require("openrlhf")

from klrl.audit import openrlhf_adapter  # noqa: E402
from klrl.audit.gradients import audit_rows  # noqa: E402
from klrl_audit import expected_gradient  # noqa: E402
from klrl.objective.kl_config import KLConfig  # noqa: E402
from klrl.toy import exact  # noqa: E402
from klrl_audit.toy import make_problem  # noqa: E402

VERSION = "test"
UNBIASED = "--algo.kl.use_loss --algo.kl.estimator k3 --algo.kl.unbiased_gradient"


@pytest.fixture(scope="module")
def problem():
    return make_problem(vocab=2, horizon=3, seed=1)


@pytest.mark.parametrize(
    ("setting", "name"),
    [
        (lambda: openrlhf_adapter.reward_setting(VERSION, "k1"), "k1-reward"),
        (lambda: openrlhf_adapter.loss_setting(VERSION, "k3"), "k3-loss"),
        (lambda: openrlhf_adapter.loss_setting(VERSION, "k1"), "k1-loss"),
    ],
)
def test_rows_equal_klrl_exact_gradient(problem, setting, name):
    ours = exact.expected_gradient(problem, KLConfig.from_name(name, beta=1.0), "on")
    # OpenRLHF computes its KL in float32 (compute_approx_kl casts with .float()): equal to float32 precision
    audited = setting()
    torch.testing.assert_close(
        expected_gradient(audited.loss, "on", problem, audited.tokens_averaged), ours, rtol=1e-6, atol=1e-9
    )


def _rows():
    settings = [openrlhf_adapter.loss_setting(VERSION, "k3"), openrlhf_adapter.loss_setting(VERSION, "k3", True)]
    return {(row["setting"], row["mode"]): row for row in audit_rows(settings, 2, 3, 1)}


def test_findings_and_a_dropped_importance_weight(monkeypatch):
    rows = _rows()
    assert rows[("--algo.kl.use_loss --algo.kl.estimator k3", "on")]["estimates"] == "token-forward-kl"
    assert [rows[(UNBIASED, mode)]["estimates"] for mode in ("on", "off", "mismatch")] == [
        "token-reverse-kl",
        "token-reverse-kl",
        "other",
    ]
    from openrlhf.models import utils

    weight = "w = (log_probs.float() - log_probs_old.float()).exp().clamp(max=KL_IS_WEIGHT_CLIP).detach()"
    source = inspect.getsource(utils.compute_approx_kl)
    assert weight in source
    namespace = dict(vars(utils))
    exec(source.replace(weight, "w = 1.0"), namespace)
    monkeypatch.setattr(utils, "compute_approx_kl", namespace["compute_approx_kl"])
    planted = _rows()
    assert planted[(UNBIASED, "on")]["estimates"] == "token-reverse-kl"
    assert planted[(UNBIASED, "off")]["estimates"] == "other"


def test_the_flash_attn_stand_in_is_imported_and_never_called(problem):
    import flash_attn
    from openrlhf.models import ring_attn_utils

    assert flash_attn.STUB and ring_attn_utils.unpad_input is flash_attn.bert_padding.unpad_input
    with pytest.raises(RuntimeError, match="empty stand-in"):
        ring_attn_utils.unpad_input()
    rows = audit_rows(openrlhf_adapter.settings(), 2, 2, 1)  # every setting: a call to the stand-in would raise
    assert len(rows) == 3 * len(openrlhf_adapter.settings())


def _readme_command(variant: str = "") -> str:
    """The train_ppo_ray example of OpenRLHF's README (its package metadata), with a README variant added."""
    import re
    from importlib.metadata import distribution

    blocks = re.findall(r"```bash\n(.*?)```", distribution("openrlhf").read_text("METADATA"), re.S)
    (block,) = [block for block in blocks if "openrlhf.cli.train_ppo_ray" in block and "--algo.kl" in block]
    if variant:
        assert variant in re.findall(r"^# (--\S+ \S+)", block, re.M)  # one of the README's own variants
        block = block.replace("--algo.kl.init_coef 0.01 \\\n", f"--algo.kl.init_coef 0.01 \\\n   {variant} \\\n")
    return block


def test_the_readme_example_is_the_setting_it_states(tmp_path):
    from klrl.audit.user_config import read_config

    path = tmp_path / "train.sh"
    path.write_text(_readme_command())
    with pytest.raises(ValueError, match=r"--algo\.advantage\.estimator gae with the KL in the reward \(audited: rloo"):
        read_config(path)  # the example's critic (gae): not an audited setting
    in_reward = "--algo.kl.estimator k1 (KL in the reward)"
    audited = {setting.name for setting in openrlhf_adapter.settings()}
    for variant, expected in {
        "--algo.advantage.estimator rloo": (in_reward, ""),
        "--algo.advantage.estimator group_norm": (in_reward, ""),
        "--algo.advantage.estimator dr_grpo": (in_reward, ""),
        "--algo.kl.init_coef 0": (None, "--algo.kl.init_coef is 0"),
    }.items():
        path.write_text(_readme_command(variant))
        reading = read_config(path)
        assert (reading.library, reading.setting, reading.no_kl) == ("OpenRLHF", *expected)
        assert expected[0] is None or expected[0] in audited
    path.write_text(_readme_command("--algo.advantage.estimator reinforce_baseline"))
    with pytest.raises(ValueError, match=r"estimator reinforce_baseline with the KL in the reward"):
        read_config(path)  # whitens the advantages over the batch


def test_the_report_on_the_readme_example(tmp_path):
    from klrl.audit.gradients import setting_rows
    from klrl.audit.report import setting_report
    from klrl.audit.user_config import read_config

    path = tmp_path / "train.sh"
    path.write_text(_readme_command("--algo.advantage.estimator rloo"))
    name = read_config(path).setting
    settings = [
        openrlhf_adapter.reward_setting(VERSION, "k1"),
        openrlhf_adapter.reward_setting(VERSION, "k1", is_correction_level="seq"),
        openrlhf_adapter.loss_setting(VERSION, "k3"),
    ]
    report = setting_report(str(path), name, setting_rows(settings, name, 2, 3, 1))
    assert f"| {name} | unbiased, 0.000 (sequence-reverse-kl) |" in report
    assert "On-policy its expected gradient is the sequence's reverse KL's, the objective the config states." in report
    other = report.split("OpenRLHF's other settings with that gradient on-policy:")[1]
    assert f"| {settings[1].name} | unbiased, 0.000 (sequence-reverse-kl) |" in other
    assert settings[2].name not in report


def _installed_parser():
    """OpenRLHF's own argparse parser: the statements of the installed train_ppo_ray.py's main block
    before its parse_args (importing the module imports ray)."""
    import argparse
    import ast
    import datetime
    import importlib.util

    cli = importlib.util.find_spec("openrlhf.cli.train_ppo_ray").origin
    tree = ast.parse(open(cli).read(), cli)
    (main,) = [node for node in tree.body if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)]
    body = []
    for statement in main.body:
        if "parse_args" in ast.unparse(statement):
            break
        body.append(statement)
    namespace = {"argparse": argparse, "datetime": datetime.datetime}
    exec(compile(ast.Module(body, type_ignores=[]), cli, "exec"), namespace)
    return namespace["parser"]


def test_the_readers_tables_are_the_installed_openrlhfs():
    """klrl.audit.openrlhf_flags' flags and openrlhf_config's KL defaults and choices equal the installed parser's;
    the old flags' names are today's."""
    from importlib.metadata import version

    from klrl.audit import openrlhf_config, openrlhf_flags

    assert version("openrlhf") == openrlhf_config.VERSION
    parser = _installed_parser()
    options = {
        option[2:]: action for action in parser._actions for option in action.option_strings if option[:2] == "--"
    }
    options.pop("help")
    assert set(openrlhf_flags.SWITCHES) == {name for name, action in options.items() if action.nargs == 0}
    assert set(openrlhf_flags.VALUED) == {name for name, action in options.items() if action.nargs != 0}
    for flag, (default, kind, _) in openrlhf_config.KL_FLAGS.items():
        assert options[flag].default == default, flag
        assert (tuple(options[flag].choices) if options[flag].choices else None) == (
            kind if isinstance(kind, tuple) else None
        )
    assert set(openrlhf_flags.RENAMED_0_10_2.values()) <= set(options)
    assert {new for new, _, _ in openrlhf_flags.EARLIER.values()} <= set(options)


def test_the_maintainers_page_example_and_the_assertion_on_the_audited_settings():
    """klrl-audit's OpenRLHF example runs as written; `assert_kl_gradient` gives docs/audit.md's verdicts."""
    from klrl_audit import assert_kl_gradient

    from audit.readme_examples import example

    example("OpenRLHF")["test_openrlhf_kl_loss_gradients"](assert_kl_gradient)
    in_reward = openrlhf_adapter.reward_setting(VERSION, "k1")
    assert_kl_gradient(in_reward.loss, "sequence-reverse-kl", "on", tokens_averaged=True)
    with pytest.raises(
        AssertionError, match="on-policy follows none of the named targets .closest: the per-token forward"
    ):
        assert_kl_gradient(openrlhf_adapter.loss_setting(VERSION, "k3").loss, tokens_averaged=True)
