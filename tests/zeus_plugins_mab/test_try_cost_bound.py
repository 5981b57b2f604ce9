"""The improved variant's own cost bound on exploratory tries (``try_cost_bound``), as the simulator applies it."""

from __future__ import annotations

from zeus_core import JobOptions
from zeus_plugins_mab.options import MabOptions
from zeus_plugins_mab.policy import MabPolicy
from zeus_plugins_trace.simulate import simulate
from zeus_plugins_trace.traces import load_traces, select

# bs 8: steady epoch cost 1740 (100 W), reaches at epoch 3; bs 16: epoch cost 1140 (200 W), never reaches.
TRAIN = (
    "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch\nd,n,8,sgd,0.1,1,0.5,3\nd,n,16,sgd,0.1,1,0.5,nan\n"
)
POWER = (
    "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"
    "d,n,8,sgd,200,10,150\nd,n,8,sgd,100,12,90\nd,n,16,sgd,200,6,180\nd,n,16,sgd,100,9,100\n"
)


def run(tmp_path, **options):
    (tmp_path / "summary_train.csv").write_text(TRAIN)
    (tmp_path / "summary_power_g.csv").write_text(POWER)
    trace = select(load_traces(tmp_path, "g"), "d", "n", "sgd", 0.5)
    job = JobOptions(name="t", recurrences=2, seed=0, eta_knob=0.5, beta_knob=2.0, target_metric=0.5, max_epochs=100)
    policy = MabPolicy(MabOptions(default=8, **options))  # no predictions: the walk explores 16
    return policy, simulate(trace, policy, job, default_batch_size=8)


def test_an_exploratory_try_stops_at_the_best_known_cost(tmp_path):
    policy, r = run(tmp_path, explore_bound_sds=0.0)
    first, explore = r.records[0], r.records[1]
    assert (first.batch_size, first.reached, explore.batch_size) == (8, True, 16)
    best = 3 * 1740.0  # the steady cost the policy learnt from 8
    # 4 epochs of 16 (4560) fit under 5220; beta x min_cost (2 x 5225) would have allowed 9.
    assert (explore.epochs, explore.stopped) == (4, "early-stop")
    assert policy.try_cost_bound(None, 8) is None  # 8 reached the target: the paper's bound
    assert policy.options.explore_bound_sds == 0.0 and best == 5220.0


def test_the_margin_scales_with_the_pooled_noise_and_is_off_by_default(tmp_path):
    _p, r = run(tmp_path, explore_bound_sds=2.0, cv0=0.1)
    assert r.records[1].epochs == 5  # floor(5220 x 1.2 / 1140)
    policy, r = run(tmp_path)
    assert r.records[1].epochs == 9 and policy.try_cost_bound(None, 16) is None


def test_the_papers_pruning_sets_no_bound_of_its_own(tmp_path):
    policy, r = run(tmp_path, variant="paper", explore_bound_sds=0.0)
    explore = r.records[1]
    # Pruning goes up from 8 to 16; only beta x min_cost (2 x 5225) stops it: 9 epochs.
    assert (explore.batch_size, explore.epochs, explore.stopped) == (16, 9, "early-stop")
    assert policy.try_cost_bound(None, 16) is None
