"""`python -m bot.cli`: the same as the `digestbot` command."""

from bot.cli import main

main()
