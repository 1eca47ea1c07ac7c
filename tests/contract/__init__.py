"""Contract suites: one suite per contract, run against every implementation."""
