"""`vdl users create|list|delete`: SCRAM users, through AlterUserScramCredentials and
DescribeUserScramCredentials (the metadata leader stores only SCRAM keys, never the password).

    vdl users create NAME --mechanism SCRAM-SHA-256 [--password-stdin] [--iterations N]
    vdl users list
    vdl users delete NAME [--mechanism SCRAM-SHA-512]      (default: every mechanism)

Without --password-stdin the password is asked for on the terminal (twice, not echoed).
"""

from __future__ import annotations

import argparse
import getpass
import sys

from vdl_client import admin
from vdl_client.cli.common import CliError, Parser, UsageError, open_client
from vdl_wire.sasl import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
)

MECHANISMS = (SCRAM_SHA_256, SCRAM_SHA_512)


def _password(args: argparse.Namespace) -> str:
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    elif not sys.stdin.isatty():
        # getpass would fall back to reading stdin with a warning, and end in an EOFError.
        raise UsageError("no terminal to ask for the password on: give it as stdin's first line with "
                         "--password-stdin")
    else:
        try:
            password = getpass.getpass(f"password for {args.name}: ")
            if getpass.getpass("again: ") != password:
                raise CliError("the passwords differ")
        except EOFError:
            raise CliError("no password given") from None
    if not password:
        raise CliError("the password is empty")
    return password


def cmd_users(args: argparse.Namespace) -> int:
    if args.action == "create":
        if not MIN_ITERATIONS <= args.iterations <= MAX_ITERATIONS:
            raise UsageError(f"--iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, got {args.iterations}")
        password = _password(args)
        with open_client(args) as client:
            admin.upsert_user(client, args.name, args.mechanism, password, args.iterations)
        print(f"user {args.name}: {args.mechanism} credential stored")
    elif args.action == "delete":
        with open_client(args) as client:
            admin.delete_user(client, args.name, args.mechanism)
        print(f"user {args.name}: deleted" + (f" ({args.mechanism})" if args.mechanism else ""))
    else:
        with open_client(args) as client:
            for user in admin.list_users(client):
                print(user.name + "  " + ", ".join(f"{m} (iterations {i})" for m, i in user.mechanisms))
    return 0


def register(commands: argparse._SubParsersAction[Parser], connection: Parser) -> None:
    users = commands.add_parser("users", help="create, list or delete SCRAM users")
    actions = users.add_subparsers(dest="action", required=True, parser_class=Parser)
    create = actions.add_parser("create", parents=[connection])
    create.add_argument("name")
    create.add_argument("--mechanism", choices=MECHANISMS, default=SCRAM_SHA_512)
    create.add_argument("--password-stdin", action="store_true", help="read the password from stdin's first line")
    create.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS,
                        help=f"PBKDF2 iterations, {MIN_ITERATIONS}..{MAX_ITERATIONS} (default {DEFAULT_ITERATIONS})")
    actions.add_parser("list", parents=[connection])
    delete = actions.add_parser("delete", parents=[connection])
    delete.add_argument("name")
    delete.add_argument("--mechanism", choices=MECHANISMS, default=None)
    users.set_defaults(run=cmd_users)
