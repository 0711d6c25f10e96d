"""privrec."""
