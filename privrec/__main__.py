"""`python -m privrec …` is the `privrec` command."""

from privrec.sim.cli import main

raise SystemExit(main())
