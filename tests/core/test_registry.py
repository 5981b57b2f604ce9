"""Discovery through entry points, blocking, name clashes, hooks without specs, tracing."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from zeus_core import hookimpl, hookspecs
from zeus_core.engine import registry as zreg


class _ClashPlugin:
    @hookimpl
    def zeus_register_devices(self, register):
        register("toy", object)


def test_builtin_baseline_plugin_arrives_through_entry_points():
    reg = zreg.load()
    fixed = reg.get("batch_size_policy", "fixed")
    assert fixed.plugin == "baseline"
    assert fixed.distribution == "zeus-plugins-baseline"
    info = {p.name: p for p in reg.plugins()}["baseline"]
    assert info.version == "0.1.0"
    assert "zeus_register_power_policies" in info.hooks
    assert info.provides["power_policy"] == ["fixed", "max"]


def test_disabled_plugins_are_blocked(monkeypatch):
    monkeypatch.setenv("ZEUS_DISABLED_PLUGINS", " baseline , other")
    reg = zreg.load()
    assert "fixed" not in reg.names("batch_size_policy")
    assert "baseline" not in {p.name for p in reg.plugins()}


def test_disabled_plugins_also_block_directly_registered_ones(monkeypatch, toy_plugin):
    monkeypatch.setenv("ZEUS_DISABLED_PLUGINS", "toy")
    reg = zreg.load(extra_plugins=[("toy", toy_plugin)])
    assert "toy" not in reg.names("device")


def test_same_name_twice_names_both_distributions(toy_plugin):
    with pytest.raises(zreg.PluginError) as e:
        zreg.load(extra_plugins=[("toy", toy_plugin), ("clash", _ClashPlugin())])
    msg = str(e.value)
    assert "device 'toy' is registered twice" in msg
    assert "'toy'" in msg and "'clash'" in msg
    assert "ZEUS_DISABLED_PLUGINS=clash" in msg


def test_clash_with_installed_distribution_names_it():
    class Again:
        @hookimpl
        def zeus_register_batch_size_policies(self, register):
            register("fixed", object)

    with pytest.raises(zreg.PluginError, match=r"distribution zeus-plugins-baseline\)"):
        zreg.load(extra_plugins=[("again", Again())])


def test_hookimpl_without_spec_is_an_error():
    class Typo:
        @hookimpl
        def zeus_register_device(self, register):  # missing "s"
            pass

    with pytest.raises(zreg.PluginError, match="zeus_register_device"):
        zreg.load(extra_plugins=[("typo", Typo())])


def test_options_must_be_attrs():
    class Bad:
        @hookimpl
        def zeus_register_devices(self, register):
            register("weird", lambda o, c: None, options=dict)

    with pytest.raises(zreg.PluginError, match="must be an attrs class"):
        zreg.load(extra_plugins=[("bad", Bad())])


def test_trace_plugins_prints_hook_calls(monkeypatch, capsys, toy_plugin):
    monkeypatch.setenv("ZEUS_TRACE_PLUGINS", "1")
    zreg.load(extra_plugins=[("toy", toy_plugin)])
    err = capsys.readouterr().err
    assert "zeus_register_devices" in err
    assert "toy" in err


def test_every_hook_has_a_docstring_and_is_documented(repo_root: Path):
    """Like datasette's test: a hook missing from docs/hooks.md fails here."""
    docs = (repo_root / "docs" / "hooks.md").read_text()
    specs = [(name, fn) for name, fn in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("zeus_")]
    assert len(specs) >= 13
    for name, fn in specs:
        assert (fn.__doc__ or "").strip(), f"hook {name} has no docstring"
        sig = inspect.signature(fn)
        typed = all(p.annotation is not p.empty for p in sig.parameters.values()) and sig.return_annotation is not sig.empty
        assert typed, f"hook {name} is not typed: annotate every parameter and the return"
        args = ", ".join(f"{p.name}: {p.annotation}" for p in sig.parameters.values())
        heading = f"### `{name}({args}) -> {sig.return_annotation}`"
        assert re.search(rf"^{re.escape(heading)}$", docs, re.M), f"hook {name}({args}) is not documented in docs/hooks.md"


def test_distribution_names_and_versions_come_from_the_metadata_headers(tmp_path):
    import importlib.metadata as md

    from zeus_core.engine.registry import name_and_version

    installed = [d for d in md.distributions() if d.entry_points.select(group="zeus")]
    assert installed and all(name_and_version(d) == (d.metadata["Name"], d.version) for d in installed)
    info = tmp_path / "x_y-1.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: x-y\nVersion: 1.2\n\nName: not-this\nVersion: 9\n")
    assert name_and_version(md.PathDistribution(info)) == ("x-y", "1.2")
    (info / "METADATA").write_text("Metadata-Version: 2.1\n")  # no headers to read: importlib.metadata's answer
    assert name_and_version(md.PathDistribution(info)) == (None, None)


def _lazy_plugin(options: str):
    class Plugin:
        @hookimpl
        def zeus_register_batch_size_policies(self, register):
            register("lazy", lambda o, c: None, options=options)

    return Plugin()


def test_options_named_by_module_load_when_the_part_is_first_used(tmp_path, monkeypatch):
    import sys

    (tmp_path / "lazy_opts_mod.py").write_text("import attrs\n\n@attrs.define\nclass Opts:\n    size: int = 8\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = zreg.load(extra_plugins=[("lazyplug", _lazy_plugin("lazy_opts_mod:Opts"))], entry_points=False)
    assert "lazy_opts_mod" not in sys.modules  # registered, not imported
    opts = reg.get("batch_size_policy", "lazy").options
    assert "lazy_opts_mod" in sys.modules and opts.__name__ == "Opts" and opts().size == 8
    assert reg.get("batch_size_policy", "lazy").options is opts


@pytest.mark.parametrize(
    "target, message",
    [
        (
            "no_such_module_here:Opts",
            r"plugin 'lazyplug' \(.*\): the options of batch_size_policy 'lazy' 'no_such_module_here:Opts': "
            "cannot import",
        ),
        ("os.path:join", r"plugin 'lazyplug' \(.*\): the options of batch_size_policy 'lazy' must be an attrs class"),
    ],
)
def test_options_named_by_module_that_are_wrong_are_bad_input_naming_the_plugin(tmp_path, target, message):
    from zeus_test_helpers import run_cli

    reg = zreg.load(extra_plugins=[("lazyplug", _lazy_plugin(target))], entry_points=False)
    with pytest.raises(zreg.PluginError, match=message):
        reg.get("batch_size_policy", "lazy").options  # noqa: B018
    job = tmp_path / "job.toml"
    job.write_text('[job]\nname = "j"\n\n[batch_size]\nplugin = "lazy"\n')
    r = run_cli(reg, "validate", str(job))
    assert r.exit_code == 2 and "$.batch_size.plugin" in r.output, r.output
