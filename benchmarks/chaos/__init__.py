"""The chaos run: a state-machine job and windows under random faults (issue 42 item 4)."""
