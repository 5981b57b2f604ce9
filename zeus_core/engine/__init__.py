"""The engine: what composes registered parts into a running job, for the core's commands and
for the plugins that must reach behind the contract (a store backend, a history service, a
launcher's ranks). ``import zeus_core`` is the contract; each module here holds one step:

* :mod:`~zeus_core.engine.registry`: plugins found through the ``zeus`` entry points;
* :mod:`~zeus_core.engine.validation`: a job file read and checked, every problem at once;
* :mod:`~zeus_core.engine.assembly`: a job (a file, a script's objects, a client's setup)
  turned into its parts, checked to fit, with its identity and where its history is kept;
* :mod:`~zeus_core.engine.runner`: the recurring-job loop of ``zeus run``;
* :mod:`~zeus_core.engine.session`: one try, as a workload trains it;
* :mod:`~zeus_core.engine.history`: recurrences and tries in the store, and what policies learn;
* :mod:`~zeus_core.engine.remote`: a history kept by a service (``zeus serve``);
* :mod:`~zeus_core.engine.ranks`: the ranks of one job, rank 0 deciding for all;
* :mod:`~zeus_core.engine.stores`: where a job's state lives (SQLite, or a backend's URL).
"""
