"""zeus-plugins-torch: zeus policies steering real PyTorch training.

``ZeusLoop`` is the handle a training function receives; ``run_job`` runs a
job from the user's own script; the ``lr`` helpers scale learning rates with
the batch size. The plugin itself registers from :mod:`zeus_plugins_torch.plugin`.
"""

from zeus_plugins_torch.api import run_job
from zeus_plugins_torch.loop import ZeusLoop
from zeus_plugins_torch.lr import lr_factor, rule_for, scale_lr, scale_optimizer

__all__ = ["ZeusLoop", "lr_factor", "rule_for", "run_job", "scale_lr", "scale_optimizer"]
