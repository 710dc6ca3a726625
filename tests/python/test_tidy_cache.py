"""scripts/tidy_cache.py: a unit's key names the tool and its configuration, not the machine it runs on."""

import importlib.util
import subprocess


def _load(repo_root):
    spec = importlib.util.spec_from_file_location("tidy_cache", repo_root / "scripts" / "tidy_cache.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _version_text(cpu, release="14.0.6"):
    return (f"Debian LLVM version {release}\n  Optimized build.\n  Default target: x86_64-pc-linux-gnu\n"
            f"  Host CPU: {cpu}\n")


def _fingerprint(mod, monkeypatch, tmp_path, text, config=b"Checks: bugprone-*\n"):
    (tmp_path / ".clang-tidy").write_bytes(config)
    monkeypatch.setattr(mod.subprocess, "run",
                        lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout=text, stderr=""))
    return mod._tool_fingerprint(str(tmp_path))


def test_the_host_cpu_does_not_change_the_key(repo_root, monkeypatch, tmp_path):
    mod = _load(repo_root)
    a = _fingerprint(mod, monkeypatch, tmp_path, _version_text("rocketlake"))
    b = _fingerprint(mod, monkeypatch, tmp_path, _version_text("znver3"))
    assert a == b  # CI's machines have other CPUs than the one that filled .ci/tidy-clean.txt


def test_the_tool_release_and_the_config_do(repo_root, monkeypatch, tmp_path):
    mod = _load(repo_root)
    a = _fingerprint(mod, monkeypatch, tmp_path, _version_text("znver3"))
    assert a != _fingerprint(mod, monkeypatch, tmp_path, _version_text("znver3", release="15.0.7"))
    assert a != _fingerprint(mod, monkeypatch, tmp_path, _version_text("znver3"), config=b"Checks: '*'\n")
