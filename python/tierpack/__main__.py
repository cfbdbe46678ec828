"""``python -m tierpack ARGS`` and the ``tierpack`` command pip installs: run this installation's CLI."""
import os
import sys


def main():
    from tierpack._libs import cli_path

    cli = cli_path()
    if cli is None:
        sys.stderr.write("tierpack: the tierpack executable was not found next to the Python package (%s): "
                         "install tierpack with pip, or build it (cmake --build build)\n"
                         % os.path.dirname(os.path.abspath(__file__)))
        return 1
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(cli, ["tierpack"] + sys.argv[1:])
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
