"""The plan server the optimizer talks to: ``zeus perseus serve``, or :mod:`.router`'s ``app`` for
upstream's launch line (``uvicorn zeus.optimizer.pipeline_frequency.server.router:app --port 7787``)."""
