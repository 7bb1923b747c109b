"""Grading a completion: answer extraction, the rewards, and the time-bounded math-verify worker."""
