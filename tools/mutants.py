"""Mutation check of the gradient path: apply each declared one-line bug to a copy of the
package and run the gradient-path tests against it; print killed / survived per mutant.

    python tools/mutants.py                 # this checkout
    python tools/mutants.py --root DIR      # another checkout (e.g. an older commit)

A mutant lists (file, original, replacement) alternatives; the first whose original text occurs
in the checkout is applied (one declared bug, written for each layout of the code it is tried
on); a mutant none of whose originals occurs is reported as n/a: the code it names has changed,
and its lines need writing again. The tests run with -x (a killed
mutant stops at the first failure), OMP_NUM_THREADS=1, from a temporary copy of the checkout,
.git included (a cell records the commit it ran at, which the tests check).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

K = "workflow/klrl/"
A = "workflow/klrl_audit/"
OBJ = K + "objective/"
MUTANTS = {
    "toy expectation without the probability weight": [
        (A + "expectation.py", "logp=logp + (weight - 1) * (logp - logp.detach()),", "logp=logp,"),
    ],
    "per-token targets without the prefix probability": [
        (A + "targets.py", "(e.q[:, None] * per_prefix * e.mask)", "(per_prefix * e.mask)"),
    ],
    "penalty sign flipped (R + penalty)": [
        (
            OBJ + "loss.py",
            "at_least_fp32(rewards).to(penalty.device) - penalty",
            "at_least_fp32(rewards).to(penalty.device) + penalty",
        ),
    ],
    "estimator sign flipped (δ = log πref − log πθ)": [
        (
            OBJ + "kl.py",
            "delta = at_least_fp32(logp) - at_least_fp32(ref_logp)",
            "delta = at_least_fp32(ref_logp) - at_least_fp32(logp)",
        ),
    ],
    "K1 and K3 swapped": [(OBJ + "estimators.py", "            _k1,\n", "            _k3,\n")],
    "K3 of the other direction (ρ ↔ 1/ρ)": [
        (OBJ + "estimators.py", "(-delta).expm1() + delta)", "delta.expm1() - delta)")
    ],
    "stop-gradient dropped on the IS-weighted K1": [
        (
            OBJ + "kl.py",
            "loss_tokens = beta * values.detach() * weight * mask",
            "loss_tokens = beta * values * weight * mask",
        ),
    ],
    "stop-gradient dropped on the reward penalty": [
        (OBJ + "kl.py", "reward_penalty = beta * values.detach().sum(-1)", "reward_penalty = beta * values.sum(-1)"),
    ],
    "token-is weight dropped": [
        (OBJ + "kl.py", "loss_tokens = beta * values * weight * mask", "loss_tokens = beta * values * mask"),
    ],
    "prefix weight not cumulated": [
        (
            OBJ + "kl.py",
            "_importance_weight(masked.cumsum(-1), config.is_truncation)",
            "_importance_weight(masked, config.is_truncation)",
        )
    ],
    "sequence weight cumulated as a prefix": [
        (
            OBJ + "kl.py",
            "_importance_weight(masked.sum(-1, keepdim=True), config.is_truncation).expand_as",
            "_importance_weight(masked.cumsum(-1), config.is_truncation).expand_as",
        ),
    ],
    "IS truncation inverted": [
        (
            OBJ + "kl.py",
            "(log_w.detach() - math.log(truncation)).clamp(min=0)",
            "(log_w.detach() - math.log(truncation)).clamp(max=0)",
        )
    ],
    "ratio clamp inverted": [
        (OBJ + "policy_terms.py", "ratio = ratio.clamp(0.0, ratio_clamp)", "ratio = ratio.clamp(min=ratio_clamp)")
    ],
    "policy ratio not detached from the anchor (on-policy)": [
        (
            OBJ + "loss.py",
            "anchor_logp = logp.detach() if behaviour_logp is None",
            "anchor_logp = logp if behaviour_logp is None",
        ),
    ],
    "KL weight's μ not detached on-policy": [
        (
            OBJ + "kl.py",
            "log_ratio = importance_log_ratio(logp, logp.detach())",
            "log_ratio = importance_log_ratio(logp, logp)",
        ),
    ],
    "RLOO baseline includes the sample": [
        (OBJ + "policy_terms.py", "baseline = (total - grouped) / (group_size - 1)", "baseline = total / group_size")
    ],
    "advantage sign flipped": [
        (OBJ + "policy_terms.py", "return (grouped - baseline).reshape(-1)", "return (baseline - grouped).reshape(-1)")
    ],
    "engine weights inverted (e/μ for μ/e)": [
        (
            OBJ + "engine_correction.py",
            "log_ratio = ((anchor_logp - engine_logp) * mask).detach()",
            "log_ratio = ((engine_logp - anchor_logp) * mask).detach()",
        ),
    ],
    "engine weights dropped from the loss": [
        (
            OBJ + "loss.py",
            "policy, kl = policy * sample_weights, kl * sample_weights",
            "policy, kl = policy, kl",
        ),
    ],
    "μ replaced by πθ in the update": [
        (
            K + "training/learner.py",
            "anchor_logp = batch.behaviour_logp.to(mask.device) if off_policy else logp",
            "anchor_logp = logp",
        ),
    ],
    "off-by-one lag (μ one step too fresh)": [
        (
            K + "training/actor.py",
            "last = min(step + self.config.async_lag,",
            "last = min(step + max(self.config.async_lag - 1, 0),",
        ),
    ],
    "the queue's newest rollout learned from, not the oldest": [
        (K + "training/actor.py", "return self.queue.popleft()", "return self.queue.pop()"),
    ],
    "KL loss term not masked": [(OBJ + "kl.py", "    values = values * mask\n", "")],
    "seq-sum divides by tokens": [
        (OBJ + "policy_terms.py", "return torch.tensor(float(mask.shape[0]), device=mask.device)", "return mask.sum()"),
    ],
    "micro-batch normalised by its own rows or tokens, not the minibatch's": [
        (
            K + "training/learner.py",
            "                denominator,\n",
            "                normaliser(mask[index], self.loss.aggregation),\n",
        ),
    ],
}
TESTS = [
    "packages/klrl-audit/tests/test_targets.py",
    "packages/klrl-audit/tests/test_examples.py",
    "tests/objective/test_kl.py",
    "tests/objective/test_policy_terms.py",
    "tests/toy/test_engine_correction.py",
    "tests/toy/test_exact.py",
    "tests/training/test_engine_step.py",
    "tests/training/test_golden.py",
    "tests/training/test_golden_off_policy.py",
    "tests/training/test_step.py",
    "tests/training/test_trainer.py",
]


def run(root: Path, names: list[str]) -> dict[str, str]:
    results = {}
    tests = [t for t in TESTS if (root / t).exists()]
    for name, alternatives in MUTANTS.items():
        if names and name not in names:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / "tree"
            shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".venv", "results", "__pycache__", ".snakemake"))
            applied = False
            for path, original, replacement in alternatives:
                text = (copy / path).read_text() if (copy / path).exists() else ""
                if original in text:
                    (copy / path).write_text(text.replace(original, replacement, 1))
                    applied = True
                    break
            if not applied:
                results[name] = "n/a"
                print(f"{'n/a':9} {name}", flush=True)
                continue
            env = os.environ | {"PYTHONPATH": str(copy / "workflow"), "OMP_NUM_THREADS": "1"}
            start = time.monotonic()
            proc = subprocess.run(
                # the audit library's fixtures (its entry point registers them where it is installed)
                [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "klrl_audit.pytest_plugin"]
                + ["-m", "not slow", *tests],
                cwd=copy,
                env=env,
                capture_output=True,
                text=True,
            )
            results[name] = "killed" if proc.returncode else "SURVIVED"
            failed = next((line for line in proc.stdout.splitlines() if line.startswith("FAILED")), "")
            print(f"{results[name]:9} {name}  ({time.monotonic() - start:.0f} s) {failed[:150]}", flush=True)
    counts = {state: sum(v == state for v in results.values()) for state in ("killed", "SURVIVED", "n/a")}
    print(f"summary: {counts}")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1], help="checkout to mutate")
    parser.add_argument("--only", action="append", default=[], help="run only this mutant (repeatable)")
    args = parser.parse_args()
    run(args.root, args.only)


if __name__ == "__main__":
    main()
