"""The `lagrax` console command, with Ctrl-C caught from its first instant.

Importing lagrax imports JAX, which takes seconds. Python's own Ctrl-C handling
raises KeyboardInterrupt wherever Python code runs: inside a garbage-collection
callback it is swallowed and the run goes on to write its results; inside the
initialization of an extension module it aborts the interpreter. So the handler
here is installed before that import and only notes each Ctrl-C; the command
stops at its next safe point (see `lagrax._output.Interrupts`). Once the command
has finished, Ctrl-C is ignored while the interpreter shuts down (JAX's exit
handlers would otherwise print a traceback).
"""

import signal
import sys


def main() -> int:
    pressed: list[bool] = []

    def handle(signum, frame):
        del signum, frame
        pressed.append(True)

    signal.signal(signal.SIGINT, handle)
    from lagrax import cli

    if pressed:
        print("lagrax: interrupted; nothing written", file=sys.stderr)
        status = 130
    else:
        status = cli.main(interrupted=pressed)  # says so itself if interrupted
    sys.stderr.flush()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return status


if __name__ == "__main__":
    sys.exit(main())
