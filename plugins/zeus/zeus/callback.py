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


def _forward(hook: str):
    def call(self: CallbackSet, *args: object) -> None:
        for callback in self.callbacks:
            getattr(callback, hook)(*args)

    call.__name__ = hook
    call.__doc__ = f"Call ``{hook}`` of every member, in order."
    return call


class CallbackSet(Callback):
    """Several callbacks driven as one."""

    def __init__(self, callbacks: list[Callback]) -> None:
        self.callbacks = callbacks

    on_train_begin = _forward("on_train_begin")
    on_train_end = _forward("on_train_end")
    on_epoch_begin = _forward("on_epoch_begin")
    on_epoch_end = _forward("on_epoch_end")
    on_step_begin = _forward("on_step_begin")
    on_step_end = _forward("on_step_end")
    on_evaluate = _forward("on_evaluate")
    on_instruction_begin = _forward("on_instruction_begin")
    on_instruction_end = _forward("on_instruction_end")
