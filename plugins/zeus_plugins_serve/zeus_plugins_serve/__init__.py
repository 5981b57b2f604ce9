"""zeus-plugins-serve: ``zeus serve`` (the optimizer as a service) and its client store (``job.store = "http://..."``)."""
