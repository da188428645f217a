"""The ``kvzarr`` command, one module per subcommand.

    kvzarr demo [STORE]               write, read back and verify a sample dataset
    kvzarr ls STORE [PATH]            list the members of a group
    kvzarr tree STORE [PATH]          draw the hierarchy below a group
    kvzarr info STORE [PATH]          describe an array or a group
    kvzarr cp SRC DST [--path P]      copy a hierarchy or a node between stores, verified
    kvzarr verify STORE [PATH]        check every value against its checksum record
    kvzarr compact STORE [PATH]       rewrite appended shards without their garbage
    kvzarr upgrade URL [--table T]    migrate a SQL store to this kvzarr's schema
    kvzarr migrate v3 STORE [--to DST] [--dry-run]
                                      migrate a Zarr v2 / v1 hierarchy to Zarr v3

STORE is a path or URL: NAME.sqlite / .db, NAME.lmdb, NAME.zip, a directory, file://...,
sqlite:///..., postgresql://... (see kvzarr.open_store). ``kvzarr COMMAND --help``
describes each command. Progress bars go to stderr when it is a terminal.

Exit status:
  0    success
  1    the command ran and found something wrong: a failed check (demo, verify, cp's
       read-back) or a shard compact could not read
  2    it could not run: a kvzarr error (no such store or node, a node in the way,
       a read-only store, bad options), printed on stderr; also usage errors
  130  interrupted (Ctrl-C)
"""

from __future__ import annotations

import argparse
import sys

from . import compact, cp, demo, info, ls, migrate, tree, upgrade, verify

#: the subcommand modules, in the order ``kvzarr --help`` lists them; each has
#: ``add_parser(subparsers)``, which sets ``run(args) -> exit status`` as the default
SUBCOMMANDS = [demo, ls, tree, info, cp, verify, compact, upgrade, migrate]

#: exit statuses (documented in the module docstring, which ``kvzarr --help`` prints)
OK, FOUND_PROBLEMS, ERROR, INTERRUPTED = 0, 1, 2, 130


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__
    parser = argparse.ArgumentParser(prog="kvzarr", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"kvzarr {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in SUBCOMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); return the exit status.
    Usage errors, ``--help`` and ``--version`` exit through SystemExit as argparse does
    (status 2 for a usage error, 0 for the others)."""
    args = build_parser().parse_args(argv)
    from ..errors import KvzarrError
    try:
        return args.run(args)
    except KvzarrError as e:
        print(f"kvzarr: {e}", file=sys.stderr)
        return ERROR
    except KeyboardInterrupt:
        print("kvzarr: interrupted", file=sys.stderr)
        return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
