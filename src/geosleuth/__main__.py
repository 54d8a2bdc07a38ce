"""``python -m geosleuth``: the command line, for environments without the console script."""

from geosleuth.cli.app import main

if __name__ == "__main__":
    main()
