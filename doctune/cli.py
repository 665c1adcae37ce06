"""``doctune search|study|report|evaluate ARGS``: the module commands by name, from any directory.

The search driver is the package ``platform``, which shares its name with the standard library's
module (the design's ``python -m platform.search``). It is therefore never installed as a top-level
package: an installed doctune carries it, with the shipped search spaces, under ``doctune/_driver``,
and only this command puts that directory first on ``sys.path``, in its own process. Every other
program in the environment imports the standard ``platform``. From a checkout (``pip install -e``)
the command uses the checkout's own driver.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from doctune_core.run_layout import REPORT_FILE

COMMANDS = {
    "search": ("platform.search", "run a search (python -m platform.search)"),
    "study": ("platform.study", "run a recipe study (python -m platform.study)"),
    "report": ("platform.report.__main__", f"write a run's {REPORT_FILE} again (python -m platform.report)"),
    "evaluate": ("evaluators.__main__", "score an encoder on tasks (python -m evaluators)"),
}
USAGE = "usage: doctune {search,study,report,evaluate} ...\n\n" + "\n".join(
    f"  {name:<9} {help_text}" for name, (_, help_text) in COMMANDS.items()
)


def driver_root() -> Path:
    """The directory holding the ``platform`` driver and ``search_spaces``: the checkout beside this
    package (an editable install), else the copy installed with it."""
    package = Path(__file__).resolve().parent
    checkout = package.parent
    return checkout if (checkout / "platform" / "search.py").is_file() else package / "_driver"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    if argv[0] not in COMMANDS:
        print(f"{USAGE}\n\ndoctune: error: unknown command {argv[0]!r}", file=sys.stderr)
        return 2
    module_name, _ = COMMANDS[argv[0]]
    sys.path.insert(0, str(driver_root()))
    # the standard module, if something imported it already: the driver re-exports all of it
    if "platform" in sys.modules and not hasattr(sys.modules["platform"], "__path__"):
        del sys.modules["platform"]
    sys.argv = [f"doctune {argv[0]}", *argv[1:]]
    return importlib.import_module(module_name).main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
