"""Learning-rate scaling with the batch size: square root for Adam-type, linear for SGD."""

from __future__ import annotations

import math

import pytest
import torch

from zeus_plugins_torch.loop import ZeusLoop
from zeus_plugins_torch.lr import lr_factor, rule_for, scale_lr, scale_optimizer


def test_rules_by_optimizer():
    params = [torch.nn.Parameter(torch.zeros(2))]
    assert rule_for(torch.optim.Adam(params)) == "sqrt"
    assert rule_for(torch.optim.AdamW) == "sqrt"
    assert rule_for("Adadelta") == "sqrt"
    assert rule_for(torch.optim.SGD(params, lr=0.1)) == "linear"
    with pytest.raises(ValueError, match="workload.lr_scaling"):
        rule_for(torch.optim.LBFGS(params))


def test_factors():
    assert scale_lr(0.1, 256, 64, "linear") == pytest.approx(0.4)
    assert scale_lr(0.1, 256, 64, "sqrt") == pytest.approx(0.2)
    assert scale_lr(0.1, 16, 64, "sqrt") == pytest.approx(0.05)
    assert lr_factor(16, 64, "none") == 1.0
    with pytest.raises(ValueError, match="sqrt"):
        lr_factor(16, 64, "cubic")


def test_scale_optimizer_in_place_once():
    params = [torch.nn.Parameter(torch.zeros(2))]
    opt = torch.optim.SGD([{"params": params[:1], "lr": 0.1}], lr=0.1)
    assert scale_optimizer(opt, 128, 32) == pytest.approx(4.0)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.4)
    with pytest.raises(ValueError, match="already scaled"):
        scale_optimizer(opt, 128, 32)


def test_handle_scales_for_its_batch_size():
    params = [torch.nn.Parameter(torch.zeros(2))]
    zeus = ZeusLoop(None, batch_size=128, base_batch_size=32, lr_scaling="auto")
    adam = torch.optim.Adam(params, lr=1e-3)
    assert zeus.scale_optimizer(adam) == pytest.approx(2.0)
    assert adam.param_groups[0]["lr"] == pytest.approx(2e-3)
    assert zeus.scale_lr(0.1, "sgd") == pytest.approx(0.4)
    with pytest.raises(ValueError, match="pass the optimizer"):
        zeus.scale_lr(0.1)
    fixed = ZeusLoop(None, batch_size=128, base_batch_size=32, lr_scaling="sqrt")
    assert fixed.scale_lr(0.1) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="default_batch_size"):
        ZeusLoop(None, batch_size=128, base_batch_size=None, lr_scaling="sqrt").scale_lr(0.1)
    assert math.isclose(ZeusLoop(None, batch_size=128, base_batch_size=32, lr_scaling="none").scale_lr(0.1), 0.1)
