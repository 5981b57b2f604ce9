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

if TYPE_CHECKING:  # loaded on first use (lazy_exports reads this list), so the entry point stays light
    from zeus_plugins_torch.api import run_job
    from zeus_plugins_torch.loop import ZeusLoop
    from zeus_plugins_torch.lr import lr_factor, rule_for, scale_lr, scale_optimizer

__all__ = ["ZeusLoop", "lr_factor", "rule_for", "run_job", "scale_lr", "scale_optimizer"]
__getattr__ = lazy_exports(__name__)
