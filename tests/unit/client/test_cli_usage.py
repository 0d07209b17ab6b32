"""A bad `vdl` command line: one line naming the argument and what it accepts, and exit code 2,
whether argparse finds it or a check after parsing does (a value out of range, options that go
together); 1 stays for failures of what the command did. None of these reaches a broker."""

from __future__ import annotations

import io

import pytest

from vdl_client.cli import main

pytestmark = pytest.mark.unit

OPERATIONS = "ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, " \
             "IDEMPOTENT_WRITE"
NOWHERE = ["--bootstrap", "127.0.0.1:1"]  # never dialled: each command stops before it connects


def exit_code(argv: list[str]) -> int | str | None:
    """What `vdl ARGV` exits with (argparse's errors exit from inside the parser)."""
    try:
        return main(argv)
    except SystemExit as exit_:
        return exit_.code


@pytest.mark.parametrize(("argv", "error"), [
    # argparse's own
    (["produce", "orders", "--acks", "2"], "argument --acks: invalid choice: 2 (choose from 0, 1, -1)"),
    (["nodes", "remove", "abc"], "argument id: invalid int value: 'abc'"),
    (["streams", "reassign", "orders", "--replicas", "a,b"],
     "argument --replicas: expected node ids like 2,3,4, got 'a,b'"),
    # checks after parsing (exit code 1 before)
    (["streams", "alter-config", "orders"], "alter-config needs --set KEY=VALUE or --delete KEY"),
    (["streams", "alter-config", "orders", "--set", "novalue"], "--set takes KEY=VALUE, got 'novalue'"),
    (["streams", "reassign", "orders"], "reassign needs --replicas N,N,... or --cancel"),
    (["consume", "orders", "--from", "soon"], "--from must be earliest, latest or an offset, got 'soon'"),
    (["consume", "orders", "--from", "-5"], "--from offset must be >= 0, got -5"),
    (["groups", "reset-offsets", "web", "--to", "soon"],
     "--to must be earliest, latest, an offset or an ISO-8601 time (2026-01-31T12:00:00Z; no zone = UTC), got 'soon'"),
    (["cluster", "status", "--min-disk-free", "101"], "--min-disk-free must be a percentage from 0 to 100, got 101.0"),
    (["users", "create", "bob", "--password-stdin", "--iterations", "10"],
     "--iterations must be between 4096 and 16384, got 10"),
    (["acls", "create", "--operation", "READ", "--topic", "orders"],
     "give exactly one of --allow PRINCIPAL or --deny PRINCIPAL"),
    (["acls", "create", "--allow", "User:alice", "--topic", "orders"], f"give at least one --operation ({OPERATIONS})"),
    (["acls", "create", "--allow", "User:alice", "--operation", "READ"],
     "an ACL needs a resource: --topic, --group, --transactional-id or --cluster"),
    (["acls", "create", "--allow", "alice", "--operation", "READ", "--topic", "orders"],
     "principal must be User:<name> or User:*, got 'alice'"),
    # kafka-acls' table of the operations each resource type takes (AclEntry.supportedOperations)
    (["acls", "create", "--allow", "User:alice", "--operation", "READ", "--cluster"],
     "--cluster ACLs accept --operation ALL, CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, "
     "ALTER_CONFIGS, IDEMPOTENT_WRITE; not READ"),
    (["acls", "create", "--deny", "User:bob", "--operation", "write", "--operation", "IDEMPOTENT_WRITE",
      "--operation", "READ", "--transactional-id", "tx"],
     "--transactional-id ACLs accept --operation ALL, WRITE, DESCRIBE; not IDEMPOTENT_WRITE, READ"),
    (["acls", "create", "--allow", "User:alice", "--operation", "WRITE", "--group", "g"],
     "--group ACLs accept --operation ALL, READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS; not WRITE"),
    (["acls", "create", "--allow", "User:alice", "--operation", "IDEMPOTENT_WRITE", "--topic", "orders"],
     "--topic ACLs accept --operation ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, "
     "ALTER_CONFIGS; not IDEMPOTENT_WRITE"),
    (["acls", "delete", "--principal", "User:alice", "--operation", "READ", "--cluster"],
     "--cluster ACLs accept --operation ALL, CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, "
     "ALTER_CONFIGS, IDEMPOTENT_WRITE; not READ"),
    (["acls", "list", "--principal", "alice"], "--principal: principal must be User:<name> or User:*, got 'alice'"),
    (["acls", "delete", "--principal", "alice", "--topic", "orders"],
     "--principal: principal must be User:<name> or User:*, got 'alice'"),
    (["streams", "list", "--bootstrap", "no-port"], "--bootstrap must be HOST:PORT[,HOST:PORT...], got 'no-port'"),
    (["streams", "list", "-X", "security.protocol"], "-X expects KEY=VALUE, got 'security.protocol' without '='"),
    (["streams", "list", "-X", "security.protocol=BOGUS"],
     "-X/--config security.protocol accepts PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL, got 'BOGUS'"),
    (["streams", "list", "--config", "retention.ms=1"], "--config takes a client properties FILE, got retention.ms=..."),
    (["dev-cluster", "--nodes", "0", "--data-dir", "/nonexistent"], "--nodes must be at least 1, got 0"),
])
def test_a_bad_command_line_is_one_line_and_exit_code_2(argv: list[str], error: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_code(argv if argv[0] == "dev-cluster" or "--bootstrap" in argv else [*argv, *NOWHERE]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", f"vdl: error: {error}\n")


def test_users_create_without_a_terminal_asks_for_password_stdin(monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Without --password-stdin the password is asked for on the terminal; with no terminal,
    getpass read stdin after a warning and the command ended in `vdl: error: EOFError: `."""
    monkeypatch.setattr("sys.stdin", io.StringIO("not-read\n"))
    assert exit_code(["users", "create", "bob", *NOWHERE]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == (
        "", "vdl: error: no terminal to ask for the password on: give it as stdin's first line with --password-stdin\n")
