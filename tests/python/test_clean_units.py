"""scripts/clean_units.py: a unit's key names the tool and its configuration, not the machine it runs on; the header
check compiles what is not listed clean and lists what passed."""

import importlib.util
import json
import re
import subprocess


def _load(repo_root):
    spec = importlib.util.spec_from_file_location("clean_units", repo_root / "scripts" / "clean_units.py")
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


def _header_build(tmp_path, units: dict[str, str]):
    """A build folder whose compile_commands.json lists header-check units (as cmake/HeaderCheck.cmake makes them),
    compiled by g++ as the plain build does."""
    build = tmp_path / "build"
    (build / "header_check").mkdir(parents=True)
    entries = []
    for name, text in units.items():
        tu = build / "header_check" / f"{name}.cpp"
        tu.write_text(text)
        entries.append({"directory": str(build), "file": str(tu),
                        "command": f"g++ -std=c++20 -Wall -Werror -o header_check/{name}.o -c {tu}"})
    (build / "compile_commands.json").write_text(__import__("json").dumps(entries))
    return build


def test_the_header_check_compiles_what_is_not_listed_and_lists_what_passed(repo_root, monkeypatch, tmp_path, capsys):
    mod = _load(repo_root)
    monkeypatch.chdir(tmp_path)
    build = _header_build(tmp_path, {
        "good": "#include <vector>\ninline std::vector<int> v;\n",
        "bad": "inline std::vector<int> v;  // leans on an include it does not make\n",
    })
    cache = tmp_path / "clean.txt"
    assert mod.headers(str(build), str(cache), update=True) == 1
    out = capsys.readouterr()
    assert "build/header_check/bad.cpp does not compile alone" in out.err and "vector" in out.err
    assert "good.cpp does not" not in out.err
    assert "2 headers, 0 as they were when found clean" in out.out and "1 failed" in out.out
    assert len(cache.read_text().split()) == 1  # the good unit's key only
    # Again: the good unit is skipped, the bad one compiled (and failing) again.
    assert mod.headers(str(build), str(cache), update=False) == 1
    assert "2 headers, 1 as they were when found clean" in capsys.readouterr().out
    # A changed unit has another key: compiled again even though its old key is listed.
    (build / "header_check" / "good.cpp").write_text("#include <vector>\ninline std::vector<long> v;\n")
    (build / "header_check" / "bad.cpp").write_text("#include <vector>\ninline std::vector<int> w;\n")
    assert mod.headers(str(build), str(cache), update=True) == 0
    out = capsys.readouterr().out
    assert "2 headers, 0 as they were when found clean" in out and "2 compiled, 0 failed" in out
    assert len(cache.read_text().split()) == 2


def test_the_tools_read_each_unit_as_written_without_the_precompiled_header(repo_root, monkeypatch, tmp_path):
    """A unit of src/ that leans on the precompiled header for an include it does not make compiles in the build; the
    commands the tools read (compdb, the keys) have no precompiled header, so clang-tidy over them fails the unit as
    scripts/lint.sh counts a finding, and a unit's key is the same with or without the header in the build."""
    mod = _load(repo_root)
    monkeypatch.chdir(tmp_path)
    build = tmp_path / "build"
    pch = build / "CMakeFiles" / "host.dir" / "cmake_pch.hxx"
    pch.parent.mkdir(parents=True)
    pch.write_text("#include <vector>\n")
    (tmp_path / "src").mkdir()
    units = {"good": "#include <vector>\nstd::vector<int> v;\n", "leans": "std::vector<int> w;\n"}
    entries, plain = [], {}
    for name, text in units.items():
        tu = tmp_path / "src" / f"{name}.cpp"
        tu.write_text(text)
        entries.append({"directory": str(build), "file": str(tu),
                        "command": f"g++ -std=c++20 -Wall -Werror -Winvalid-pch -include {pch} -o {name}.o -c {tu}"})
        plain[name] = {"directory": str(build), "file": str(tu),
                       "command": f"g++ -std=c++20 -Wall -Werror -o {name}.o -c {tu}"}
    (build / "compile_commands.json").write_text(json.dumps(entries))
    # The build's own command compiles the leaning unit (the precompiled header brings <vector>).
    assert subprocess.run(["g++", "-std=c++20", "-include", str(pch), "-fsyntax-only", entries[1]["file"]]).returncode == 0
    # compdb: the tools' copy of the commands has no precompiled header.
    mod.compdb(str(build), str(tmp_path / "db"))
    db = json.loads((tmp_path / "db" / "compile_commands.json").read_text())
    assert all("cmake_pch" not in " ".join(e["arguments"]) and "-Winvalid-pch" not in e["arguments"] for e in db)
    # clang-tidy over that copy, as lint.sh runs it: an error in src/ (a finding) for the leaning unit only.
    finding = re.compile(r"^/.*: (warning|error): ")  # lint.sh's pattern; it then keeps those under src/
    for name in units:
        out = subprocess.run(["clang-tidy", "-p", str(tmp_path / "db"), "--quiet", "--checks=-*,bugprone-*",
                              str(tmp_path / "src" / f"{name}.cpp")], capture_output=True, text=True)
        lines = [line for line in (out.stdout + out.stderr).splitlines() if finding.match(line)]
        if name == "leans":
            assert lines, out.stdout + out.stderr
            assert all(line.startswith(f"{tmp_path}/src/leans.cpp:") and ": error: " in line for line in lines), lines
        else:
            assert lines == [], lines
    # The cached keys: a unit's key with the precompiled header in its build command is its key without.
    for i, name in enumerate(units):
        assert mod._key(entries[i], str(tmp_path), b"tool") == mod._key(plain[name], str(tmp_path), b"tool") != "none"
