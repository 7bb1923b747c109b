"""The toy policy: a tabular autoregressive policy small enough to enumerate every sequence.

The policy has one row of V logits per prefix (all prefixes of length 0..T−1), so the
parameters are a (n_prefixes, V) table θ and πθ(y_t | y<t) = softmax(θ[prefix(y<t)])[y_t].
With V^T sequences in all, every expectation over πθ is a finite, exact sum.

With an `eos` token, sequences end at their first EOS (included in the completion mask, as in
the trainer's rollouts) and the positions after it are padding: filled with the EOS token,
masked out, but still given log-probs by θ, so a loss that forgets the mask gets them wrong.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class TabularSpace:
    vocab: int
    horizon: int
    eos: int | None = None  # a token that ends the sequence (None: every sequence has `horizon` tokens)

    def __post_init__(self) -> None:
        if self.vocab < 2 or self.horizon < 1 or self.vocab**self.horizon > 100_000:
            raise ValueError(f"toy space: vocab {self.vocab} ≥ 2, horizon {self.horizon} ≥ 1, vocab^horizon ≤ 1e5")
        if self.eos is not None and not 0 <= self.eos < self.vocab:
            raise ValueError(f"toy space: eos {self.eos} is not a token of the vocabulary of {self.vocab}")

    @property
    def n_prefixes(self) -> int:
        return sum(self.vocab**t for t in range(self.horizon))

    def sequences(self) -> torch.Tensor:
        """Every distinct sequence, (N, T) long, in lexicographic order: the V^T of them without
        EOS; with it, each cut after its first EOS and padded with EOS."""
        seqs = torch.tensor(list(itertools.product(range(self.vocab), repeat=self.horizon)), dtype=torch.long)
        if self.eos is None:
            return seqs
        padded = torch.where(self.mask(seqs).bool(), seqs, self.eos)
        return torch.unique(padded, dim=0)

    def mask(self, seqs: torch.Tensor) -> torch.Tensor:
        """(N, T) float64: 1 up to and including the first EOS, 0 after it."""
        if self.eos is None:
            return torch.ones(seqs.shape, dtype=torch.float64)
        ended_before = (seqs == self.eos).long().cumsum(-1) - (seqs == self.eos).long()
        return (ended_before == 0).double()

    def sequence_logp(self, theta: torch.Tensor, seqs: torch.Tensor) -> torch.Tensor:
        """log πθ(y): the masked sum of the token log-probs, (N,)."""
        return (self.token_logp(theta, seqs) * self.mask(seqs)).sum(-1)

    def prefix_ids(self, seqs: torch.Tensor) -> torch.Tensor:
        """Row of θ used at each step: prefixes of length t get ids offset_t + base-V value."""
        ids = torch.zeros_like(seqs)
        value = torch.zeros(seqs.shape[0], dtype=torch.long)
        offset = 0
        for t in range(self.horizon):
            ids[:, t] = offset + value
            offset += self.vocab**t
            value = value * self.vocab + seqs[:, t]
        return ids

    def log_dists(self, theta: torch.Tensor, seqs: torch.Tensor) -> torch.Tensor:
        """log πθ(· | y<t) for every step of every sequence: (N, T, V)."""
        return torch.log_softmax(theta[self.prefix_ids(seqs)], dim=-1)

    def token_logp(self, theta: torch.Tensor, seqs: torch.Tensor) -> torch.Tensor:
        """log πθ(y_t | y<t): (N, T)."""
        return self.log_dists(theta, seqs).gather(-1, seqs[..., None]).squeeze(-1)

    def random_table(self, generator: torch.Generator, scale: float = 1.0) -> torch.Tensor:
        return scale * torch.randn(self.n_prefixes, self.vocab, generator=generator, dtype=torch.float64)


@dataclass
class ToyProblem:
    """πθ, a frozen πref, and a behaviour μ = πθ a few gradient steps ago."""

    space: TabularSpace
    theta: torch.Tensor  # (n_prefixes, V) float64, the parameters differentiated
    ref_theta: torch.Tensor
    behaviour_theta: torch.Tensor


def make_problem(
    vocab: int = 3, horizon: int = 4, seed: int = 0, lag_steps: int = 3, lag_lr: float = 0.2, eos: int | None = None
) -> ToyProblem:
    """Random πθ and πref; μ is πθ before `lag_steps` gradient-ascent steps on a random reward.

    That is what an asynchronous actor's stale weights are: the learner has moved on.
    """
    space = TabularSpace(vocab, horizon, eos)
    gen = torch.Generator().manual_seed(seed)
    behaviour = space.random_table(gen)
    ref = space.random_table(gen)
    seqs = space.sequences()
    reward = torch.rand(seqs.shape[0], generator=gen, dtype=torch.float64)
    theta = behaviour.clone()
    for _ in range(lag_steps):
        theta.requires_grad_(True)
        expected_reward = (space.sequence_logp(theta, seqs).exp() * reward).sum()
        (grad,) = torch.autograd.grad(expected_reward, theta)
        theta = (theta + lag_lr * grad / grad.norm() * theta.shape[0] ** 0.5).detach()
    return ToyProblem(space, theta.detach(), ref, behaviour)


def total_variation(problem: ToyProblem) -> float:
    """TV(μ, πθ) = ½ Σ_y |μ(y) − πθ(y)| over whole sequences."""
    seqs = problem.space.sequences()
    pi = problem.space.token_logp(problem.theta, seqs).sum(-1).exp()
    mu = problem.space.token_logp(problem.behaviour_theta, seqs).sum(-1).exp()
    return 0.5 * (pi - mu).abs().sum().item()
