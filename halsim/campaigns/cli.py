"""``halsim sweep`` and ``halsim fuzz`` (``docs/campaigns.md``): the parsers and commands.

>>> import argparse
>>> p = argparse.ArgumentParser(prog="halsim")
>>> add_parsers(p.add_subparsers(dest="command"))
>>> sorted(COMMANDS)
['fuzz', 'sweep']
"""

from __future__ import annotations

from . import fuzz, sweep


def add_parsers(sub) -> None:
    sweep.add_parsers(sub)
    fuzz.add_parsers(sub)


COMMANDS = {**sweep.COMMANDS, **fuzz.COMMANDS}
