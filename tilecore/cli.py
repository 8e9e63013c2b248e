"""`tilecore targets`: list installed targets and whether each can run on this machine."""

from __future__ import annotations

import argparse


def main(argv=None) -> int:
    """Entry point of the `tilecore` command."""
    parser = argparse.ArgumentParser(prog="tilecore", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("targets", help="list installed targets")
    args = parser.parse_args(argv)
    if args.cmd == "targets":
        from .plugins import target_infos

        for kind, info in sorted(target_infos().items(), key=lambda kv: -kv[1].priority):
            ok, why = info.runnable()
            archs = f" [{', '.join(info.archs)}]" if info.archs else ""
            state = "runnable" if ok else f"not runnable here: {why}"
            print(f"{kind:10s} {info.description}{archs} ({state})")
    return 0
