"""The Perseus plan server (``zeus perseus serve``): jobs, ranks, schedules and profiling results over HTTP."""
