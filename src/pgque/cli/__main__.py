"""``python -m pgque.cli``: the same as the ``pgque`` console script."""

from pgque.cli import main

main()
