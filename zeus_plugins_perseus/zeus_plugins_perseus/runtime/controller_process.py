"""The frequency controller's process: ``python -m zeus_plugins_perseus.runtime.controller_process FD_IN FD_OUT``.

A module of its own, so that running it does not re-execute ``controller`` (which the
``runtime`` package imports) as ``__main__``.
"""

import sys

from zeus_plugins_perseus.runtime.controller import _child_main

if __name__ == "__main__":
    _child_main(int(sys.argv[1]), int(sys.argv[2]))
