"""One router per area."""
