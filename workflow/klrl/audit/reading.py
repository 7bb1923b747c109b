"""What `klrl audit --config` read a launch file as: the library and why, each KL key with the line
it came from, the KL configuration it maps to, the audited setting it is, and the change that
gives the sequence's reverse KL's gradient in the library's own keys; printed before the rows."""

from __future__ import annotations

from dataclasses import dataclass, field

# the gradient each klrl configuration's expectation equals on-policy (`klrl describe`'s table)
TARGETS = {
    "k1-reward": "the sequence's reverse KL (unbiased)",
    "k1-loss": "zero: K1 in the loss does nothing in expectation",
    "k2-loss": "the per-token reverse KL, summed over prefixes (biased for the sequence's)",
    "k3-reward": "none the registry names (K3's value as a reward: biased)",
    "k3-loss": "the per-token forward KL, summed over prefixes (biased for the sequence's)",
    "k1-loss-tokis": "the per-token reverse KL, summed over prefixes (biased for the sequence's)",
    "k3-loss-tokis": "the per-token reverse KL, summed over prefixes (biased for the sequence's)",
}


@dataclass
class Reading:
    library: str
    why: str  # what in the file says which library it is
    setting: str | None = None  # the audited setting's name; None: no KL term
    no_kl: str = ""  # why the file applies no KL term
    keys: list[tuple[str, object, int]] = field(default_factory=list)  # (key, value read, line; 0: a default)
    kl: str = ""  # the KL configuration in words: placement, estimator, clamp, aggregation, β
    beta: float | None = None  # the KL coefficient β the file states
    target: str = ""  # the gradient its expectation equals on-policy, in words
    fix: str = ""  # the library's own keys that give the sequence's reverse KL's gradient on-policy
    notes: list[str] = field(default_factory=list)  # keys ignored, words not understood

    def lines(self, path) -> list[str]:
        """The reading, one fact a line."""
        out = [f"{path}: {self.library} ({self.why})"]
        for key, value, line in self.keys:
            where = f"line {line}" if line else "default"
            out.append(f"  {key} = {value}  ({where})")
        out += [f"  note: {note}" for note in self.notes]
        if self.setting is None:
            return out
        out += [f"KL: {self.kl}", f"Its gradient, on-policy: {self.target}", f"Unbiased on-policy instead: {self.fix}"]
        return out
