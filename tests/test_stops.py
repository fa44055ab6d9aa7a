"""Stop signals as `Interrupted` (pipeline.base.stops): one that Python drops is delivered again."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from conftest import REPO

DROPPED = textwrap.dedent(
    """
    import signal, time
    from pipeline.base.stops import Interrupted, on_stop_signals, raise_interrupted

    class Finalized:
        def __del__(self):  # the handler of a signal that arrives while a collection runs a finalizer
            raise Interrupted(signal.SIGINT)

    on_stop_signals(raise_interrupted)
    try:
        Finalized()  # dropped at once: its Interrupted can only be printed ("Exception ignored in ...")
        deadline = time.monotonic() + 60  # the signal sent again is handled long before, on a loaded machine too
        while time.monotonic() < deadline:
            pass
    except Interrupted as stop:
        print("caught", stop.name)
        raise SystemExit(stop.status)
    print("went on")
    """
)


def test_an_interrupted_dropped_in_a_finalizer_reaches_the_main_code():
    """A stopped sweep once finished with exit 0: SIGINT's handler ran inside SQLAlchemy's weakref callback, whose
    exception Python prints and drops. Such an Interrupted is now sent again and stops the main code."""
    result = subprocess.run([sys.executable, "-c", DROPPED], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout) == (130, "caught SIGINT\n"), result.stderr
    assert "Exception ignored" not in result.stderr, result.stderr
