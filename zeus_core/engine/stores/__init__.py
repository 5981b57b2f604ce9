"""Where a job's state lives: what a store is and its errors are the backends' contract
(:mod:`zeus_core.backends`); here :mod:`~zeus_core.engine.stores.locations` (opening a store by its location, masking secrets)
and :mod:`~zeus_core.engine.stores.sqlite` (the embedded default).

A job store holds what a recurring job learned (policy states, the runner's counters) and
its results, under the identity of the job that wrote it first. Backends register by URL
scheme (``zeus_register_stores``); the core's own is SQLite, registered through the same hook.
"""
