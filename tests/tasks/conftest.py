"""Fixtures of the task tests: no network for any of them, and a fake `datasets` for the Hub branches."""

from __future__ import annotations

import socket
import sys
import types

import pytest


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a task loader touched the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture
def fake_datasets(monkeypatch):
    """A function that installs a `datasets` module whose load_dataset serves
    tables[(name, config, split)], and returns its call log."""

    def install(tables: dict) -> list:
        calls = []

        def load_dataset(name, config=None, split=None):
            calls.append((name, config, split))
            return tables[(name, config, split)]

        module = types.ModuleType("datasets")
        module.load_dataset = load_dataset
        monkeypatch.setitem(sys.modules, "datasets", module)
        return calls

    return install
