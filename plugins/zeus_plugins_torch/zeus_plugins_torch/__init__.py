"""zeus-plugins-torch: zeus policies steering real PyTorch training.

``ZeusLoop`` is the handle a training function receives; ``run_job`` runs a
job from the user's own script; the ``lr`` helpers scale learning rates with
the batch size. The plugin itself registers from :mod:`zeus_plugins_torch.plugin`.

Names load on first use: every ``zeus`` command loads the plugin's entry point
(this package, then ``plugin``), and only a job that trains should pay for
the runner, the handle or torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeus_core.loading import lazy_exports

#: public name -> module it lives in
_EXPORTS = {
    "run_job": "zeus_plugins_torch.api",
    "ZeusLoop": "zeus_plugins_torch.loop",
    "lr_factor": "zeus_plugins_torch.lr",
    "rule_for": "zeus_plugins_torch.lr",
    "scale_lr": "zeus_plugins_torch.lr",
    "scale_optimizer": "zeus_plugins_torch.lr",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # for type checkers; at run time the names load lazily
    from zeus_plugins_torch.api import run_job
    from zeus_plugins_torch.loop import ZeusLoop
    from zeus_plugins_torch.lr import lr_factor, rule_for, scale_lr, scale_optimizer
