"""``python -m querator.cli``."""

from querator.cli import main

main()
