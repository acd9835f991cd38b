"""The ``bertqa`` command of the wheel: bertqa's command line, run in this process."""

import signal
import sys

from . import _native


def main() -> None:
    """Runs ``bertqa`` with this process's arguments and exits with its status."""
    # Ctrl-C acts as on the cargo-built binary: the default action (the process ends),
    # or, where a command watches for it (eval), the command's own handling; a SIGINT
    # ignored on entry (a script's `cmd &`) stays ignored, as the binary keeps it.
    if signal.getsignal(signal.SIGINT) != signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(_native.cli_main(sys.argv))


if __name__ == "__main__":
    main()
