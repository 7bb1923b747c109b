"""The names the tracking server (klrl.tracking.server) is reached by: whether a host is this
machine's loopback alone, the Host headers MLflow admits, the URI its jobs set, and the refusal of
clear HTTP off loopback.

MLflow 3.17 answers 403 to a request whose Host header is not in its allowed hosts (by default
loopback and private address ranges: a defence against DNS rebinding), so a server that jobs
reach as `login01:5001` must list that name: `allowed_hosts` gives the host as given, its
canonical name and aliases, its addresses, and, for a wildcard address (0.0.0.0, ::), this
machine's name and fully qualified name with theirs, each with the port. CORS is left at
MLflow's default: it concerns browsers' pages of other origins, not the jobs' clients.

The server speaks clear HTTP: its basic-auth passwords cross the network readable by anyone on
its path. Off loopback it starts only when the operator says so (`--plain-http`), and then says
it in a warning.
"""

from __future__ import annotations

import ipaddress
import socket

WILDCARDS = ("0.0.0.0", "::")


def loopback(host: str) -> bool:
    """Whether `host` is this machine's loopback alone: localhost, or an address of 127.0.0.0/8 or ::1.

    >>> loopback("127.0.0.2"), loopback("[::1]"), loopback("localhost"), loopback("127.evil.example")
    (True, True, True, False)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _names_of(host: str) -> set[str]:
    """`host`, its canonical name and aliases and its addresses, as far as the resolver knows them."""
    names = {host}
    try:
        canonical, aliases, _ = socket.gethostbyname_ex(host)
        names |= {canonical, *aliases}
    except OSError:
        pass
    try:
        names |= {found[4][0] for found in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
    except OSError:
        pass
    return names


def allowed_hosts(host: str, port: int) -> list[str]:
    """The Host headers (`name:port`, and the name alone) under which the server on `host`:`port` answers."""
    names = _names_of(host)
    if host in WILDCARDS:
        names |= _names_of(socket.gethostname()) | _names_of(socket.getfqdn())
    shown = sorted(f"[{name}]" if ":" in name else name for name in names)
    return [entry for name in shown for entry in (f"{name}:{port}", name)]


def jobs_uri(host: str, port: int) -> str:
    """The `tracking.uri` the jobs set: the host as given, this machine's name for a wildcard address."""
    name = socket.getfqdn() if host in WILDCARDS else host
    return f"http://{f'[{name}]' if ':' in name else name}:{port}"


def clear_http_problem(host: str, auth: bool, plain_http: bool) -> str:
    """Why a server on `host` may not start ('' where it may): off loopback, a server without
    authentication, or one with passwords over clear HTTP that the operator did not allow."""
    if loopback(host):
        return ""
    if not auth:
        return f"--host {host}: a server reachable from other machines requires authentication"
    if not plain_http:
        return (
            f"--host {host}: the jobs' passwords would cross the network in clear HTTP; on a network you"
            " trust pass --plain-http (make tracking-server TRACKING_PLAIN_HTTP=1), else keep 127.0.0.1 and"
            " reach it through an SSH tunnel"
        )
    return ""


def clear_http_warning(host: str) -> str:
    """The warning of a server that serves passwords over clear HTTP off loopback ('' on loopback)."""
    if loopback(host):
        return ""
    return (
        f"warning: {host} is reachable from other machines over clear HTTP: the MLflow passwords of every"
        " request can be read on the network's path"
    )
