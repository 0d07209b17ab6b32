"""`vdl acls list|create|delete`: Kafka ACLs through DescribeAcls, CreateAcls and DeleteAcls.

    vdl acls create --allow User:alice --operation WRITE --operation DESCRIBE --topic orders
    vdl acls create --deny User:bob --operation READ --topic pay- --prefixed
    vdl acls create --allow User:spark --operation WRITE --transactional-id vdl-spark/ --prefixed
    vdl acls list [--principal User:alice] [--topic orders | --group g | --cluster | --transactional-id T]
    vdl acls delete --principal User:alice --topic orders     (every ACL the filter matches)

A resource option without --prefixed is a LITERAL pattern (`*` = every resource of the type).
"""

from __future__ import annotations

import argparse

from vdl_client import admin
from vdl_client.cli.common import Parser, UsageError, open_client
from vdl_wire.acls import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    principal_problem,
)

OPERATIONS = tuple(op.name for op in Operation if op not in (Operation.UNKNOWN, Operation.ANY))


def _resource(args: argparse.Namespace, required: bool) -> tuple[int, str | None]:
    given = [(kind, name) for kind, name in ((ResourceType.TOPIC, args.topic), (ResourceType.GROUP, args.group),
                                             (ResourceType.TRANSACTIONAL_ID, args.transactional_id),
                                             (ResourceType.CLUSTER, CLUSTER_NAME if args.cluster else None))
             if name is not None]
    if len(given) > 1:
        raise UsageError("give one of --topic, --group, --transactional-id, --cluster")
    if not given:
        if required:
            raise UsageError("an ACL needs a resource: --topic, --group, --transactional-id or --cluster")
        return ResourceType.ANY, None
    return int(given[0][0]), given[0][1]


def _check_operations(kind: ResourceType, operations: list[str]) -> None:
    """Refuse an operation an ACL on `kind` cannot name, as kafka-acls does (READ on the cluster)."""
    accepted = ["ALL", *(op.name for op in SUPPORTED_OPERATIONS[kind])]
    refused = [op for op in dict.fromkeys(operations) if op not in accepted]
    if refused:
        option = "--" + kind.name.lower().replace("_", "-")
        raise UsageError(f"{option} ACLs accept --operation {', '.join(accepted)}; not {', '.join(refused)}")


def _describe(binding: AclBinding) -> str:
    pattern = PatternType(binding.pattern_type).name
    return (f"{ResourceType(binding.resource_type).name}:{binding.name} ({pattern})  {binding.principal}  "
            f"host {binding.host}  {Permission(binding.permission).name} {Operation(binding.operation).name}")


def cmd_acls(args: argparse.Namespace) -> int:
    if args.action == "create":
        principal = args.allow or args.deny
        if not principal or (args.allow and args.deny):
            raise UsageError("give exactly one of --allow PRINCIPAL or --deny PRINCIPAL")
        if not args.operation:
            raise UsageError(f"give at least one --operation ({', '.join(OPERATIONS)})")
        kind, name = _resource(args, required=True)
        _check_operations(ResourceType(kind), args.operation)
        permission = Permission.ALLOW if args.allow else Permission.DENY
        pattern = PatternType.PREFIXED if args.prefixed else PatternType.LITERAL
        bindings = [AclBinding(kind, name or "", int(pattern), principal, args.host, int(Operation[op]), int(permission))
                    for op in dict.fromkeys(args.operation)]
        for binding in bindings:
            problem = binding.problem()
            if problem is not None:
                raise UsageError(problem)
        with open_client(args) as client:
            admin.create_acls(client, bindings)
        for binding in bindings:
            print(f"created {_describe(binding)}")
        return 0
    if args.principal is not None and (problem := principal_problem(args.principal)) is not None:
        raise UsageError(f"--principal: {problem}")
    kind, name = _resource(args, required=False)
    if args.action == "delete" and kind != ResourceType.ANY:
        _check_operations(ResourceType(kind), args.operation)
    pattern = PatternType.PREFIXED if args.prefixed else (PatternType.LITERAL if name is not None else PatternType.ANY)
    acl_filter = AclFilter(kind, name, int(pattern), args.principal, None,
                           int(Operation[args.operation[0]]) if args.operation else int(Operation.ANY))
    with open_client(args) as client:
        if args.action == "delete":
            for binding in admin.delete_acls(client, acl_filter):
                print(f"deleted {_describe(binding)}")
        else:
            for binding in admin.describe_acls(client, acl_filter):
                print(_describe(binding))
    return 0


def register(commands: argparse._SubParsersAction[Parser], connection: Parser) -> None:
    acls = commands.add_parser("acls", help="list, create or delete ACLs")
    actions = acls.add_subparsers(dest="action", required=True, parser_class=Parser)
    for action in ("list", "create", "delete"):
        sub = actions.add_parser(action, parents=[connection])
        sub.add_argument("--topic")
        sub.add_argument("--group")
        sub.add_argument("--transactional-id")
        sub.add_argument("--cluster", action="store_true")
        sub.add_argument("--prefixed", action="store_true", help="a PREFIXED pattern (default LITERAL)")
        sub.add_argument("--operation", action="append", choices=OPERATIONS, type=str.upper, default=[])
        if action == "create":
            sub.add_argument("--allow", metavar="PRINCIPAL", help="User:NAME (or User:*)")
            sub.add_argument("--deny", metavar="PRINCIPAL", help="User:NAME (or User:*)")
            sub.add_argument("--host", default="*")
        else:
            sub.add_argument("--principal", help="only ACLs of this principal (User:NAME)")
    acls.set_defaults(run=cmd_acls)
