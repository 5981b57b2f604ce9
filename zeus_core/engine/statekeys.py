"""Where the engine keeps its own state in a job's store (the state keys it reads and writes).

The history (:mod:`zeus_core.engine.history`) writes them; a store's checks
(:mod:`zeus_core.engine.stores.checks`) know their shapes; the service keeps clients' remote
transactions off them. A module of its own, so that every one of those may import it.
"""

#: The runner's own state: the next recurrence number and the cheapest finished recurrence.
RUNNER_KEY = "runner"
#: Recurrences begun and not ended: ``{"7": {"owner": <the runner's process>, "began": <epoch s>}}``
#: (:func:`zeus_core.engine.owner.this_process`).
OPEN_KEY = "runner:open"
#: Recurrences that ended without a try that reached the target: ``{"7": {"reason": "...", "at": <epoch s>}}``.
ABANDONED_KEY = "runner:abandoned"
#: Which history the store holds: ``{"id": "<hex>", "at": <epoch s>, "by": <the process that began it>}``,
#: written when a history is started over (``zeus run --fresh``); absent in a store never started
#: over. A runner remembers the one it joined, and stops when the store holds another.
HISTORY_KEY = "runner:history"
#: Where the policies' states live in the store.
BATCH_SIZE_KEY = "policy:batch_size"
POWER_KEY = "policy:power"
