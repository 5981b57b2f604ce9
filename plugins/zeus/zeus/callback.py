"""Training-loop callbacks: every hook a no-op, and a set that forwards each call to its members in order."""

from __future__ import annotations


class Callback:
    """Override the hooks a callback needs; the others do nothing."""

    def on_train_begin(self) -> None: ...

    def on_train_end(self) -> None: ...

    def on_epoch_begin(self) -> None: ...

    def on_epoch_end(self) -> None: ...

    def on_step_begin(self) -> None: ...

    def on_step_end(self) -> None: ...

    def on_evaluate(self, metric: float) -> None: ...

    def on_instruction_begin(self, name: str) -> None: ...

    def on_instruction_end(self, name: str) -> None: ...


class CallbackSet(Callback):
    """Several callbacks driven as one: each hook calls its members' in order, with the same arguments."""

    def __init__(self, callbacks: list[Callback]) -> None:
        self.callbacks = callbacks

    def on_train_begin(self) -> None:
        for callback in self.callbacks:
            callback.on_train_begin()

    def on_train_end(self) -> None:
        for callback in self.callbacks:
            callback.on_train_end()

    def on_epoch_begin(self) -> None:
        for callback in self.callbacks:
            callback.on_epoch_begin()

    def on_epoch_end(self) -> None:
        for callback in self.callbacks:
            callback.on_epoch_end()

    def on_step_begin(self) -> None:
        for callback in self.callbacks:
            callback.on_step_begin()

    def on_step_end(self) -> None:
        for callback in self.callbacks:
            callback.on_step_end()

    def on_evaluate(self, metric: float) -> None:
        for callback in self.callbacks:
            callback.on_evaluate(metric)

    def on_instruction_begin(self, name: str) -> None:
        for callback in self.callbacks:
            callback.on_instruction_begin(name)

    def on_instruction_end(self, name: str) -> None:
        for callback in self.callbacks:
            callback.on_instruction_end(name)
