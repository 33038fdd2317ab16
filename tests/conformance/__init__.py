"""The backend conformance suite: one suite, run unchanged against every backend."""
