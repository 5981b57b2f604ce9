"""Zeus^2 for zeus: exact batch-size and power-limit allocation across heterogeneous GPUs.

Modules: ``profile`` (the published profile format), ``model`` (the synchronous
step model), ``solver`` (the exact optimiser), ``baselines`` and ``bruteforce``
(what it is compared and checked against), ``options``/``allocator``/``plugin``
(the zeus parts).
"""
