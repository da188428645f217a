"""The ``kvzarr`` command, one module per subcommand.

    kvzarr demo [STORE]        write, read back and verify a sample dataset (the main job)
    kvzarr info STORE [PATH]   show the hierarchy or one array
    kvzarr upgrade URL [--table T]   migrate a SQL store to this kvzarr's schema
    kvzarr verify STORE [PATH] [--repair-missing]   check every value against its checksum
    kvzarr compact STORE [PATH] [--dry-run]   rewrite appended shards without their garbage

Exit status: 0 on success, 1 when the command found something wrong (a failed check),
2 when it could not run (a kvzarr error, printed on stderr).
"""

from __future__ import annotations

import argparse
import sys

from . import compact, demo, info, upgrade, verify

#: the subcommand modules, in the order ``kvzarr --help`` lists them; each has
#: ``add_parser(subparsers)``, which sets ``run(args) -> exit status`` as the default
SUBCOMMANDS = [demo, info, upgrade, verify, compact]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kvzarr", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for module in SUBCOMMANDS:
        module.add_parser(sub)
    args = parser.parse_args(argv)
    from ..errors import KvzarrError
    try:
        return args.run(args)
    except KvzarrError as e:
        print(f"kvzarr: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
