"""`python -m gputwin …` is the `gputwin` command (what sweep tasks on other machines run)."""

from gputwin.cli.main import main

main()
