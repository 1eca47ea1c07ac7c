"""Example jobs."""
