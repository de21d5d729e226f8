"""pyproject.toml as a library's metadata: its dependency ranges are what the code imports, the
exact lock (requirements.txt) satisfies every one of them, and the wheel built from the repository
installs beside a present CPU torch without pulling anything and runs from outside the repository
(docs/running.md, "Installing the library")."""
from __future__ import annotations

import ast
import json
import os
import shutil
import site
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from experiments.studies.faults.watch import run

ROOT = Path(__file__).resolve().parents[1]
OWN = {"digest", "baselines", "experiments"}


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def declared(*extras: str) -> list[Requirement]:
    """The core dependencies, then those of ``extras``."""
    p = project()
    return [Requirement(r) for r in p["dependencies"]] + \
        [Requirement(r) for e in extras for r in p["optional-dependencies"][e]]


def pins() -> dict[str, str]:
    """requirements.txt: canonical name -> the exact version it pins (every line is name==version)."""
    out = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            req = Requirement(line)
            (spec,) = req.specifier
            assert spec.operator == "==", f"requirements.txt is an exact lock, not '{line}'"
            out[canonicalize_name(req.name)] = spec.version
    return out


def unmet(requirements, pinned: dict[str, str]) -> list[str]:
    return [f"{r} (requirements.txt: {pinned.get(canonicalize_name(r.name), 'not pinned')})"
            for r in requirements if canonicalize_name(r.name) not in pinned
            or not r.specifier.contains(pinned[canonicalize_name(r.name)], prereleases=True)]


def test_the_lock_satisfies_every_declared_range():
    extras = tuple(project()["optional-dependencies"])
    assert {"experiments", "test"} <= set(extras)
    assert unmet(declared(*extras), pins()) == []


def test_a_range_the_lock_misses_is_reported():
    pinned = {"torch": "2.13.0", "numpy": "2.4.6"}
    bad = unmet([Requirement("torch>=2.14"), Requirement("numpy>=1.26"), Requirement("pymetis")],
                pinned)
    assert bad == ["torch>=2.14 (requirements.txt: 2.13.0)", "pymetis (requirements.txt: not pinned)"]


def third_party_imports(folders, local: set[str] = frozenset()) -> dict[str, str]:
    """Top-level module -> one file importing it, for every absolute import (function-level ones
    too) of the .py files under ``folders`` that is neither the standard library, the project's
    own packages nor a module of ``local``."""
    found = {}
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    names = [node.module]
                else:
                    continue
                for name in (n.split(".")[0] for n in names):
                    if name not in sys.stdlib_module_names and name not in OWN | local \
                            and name != "__future__":
                        found.setdefault(name, str(path.relative_to(ROOT)))
    return found


def undeclared(modules: dict[str, str], requirements) -> list[str]:
    """The modules no distribution of ``requirements`` provides (read from this environment)."""
    wanted = {canonicalize_name(r.name) for r in requirements}
    providers = packages_distributions()
    return sorted(f"{m} (imported by {where}; provided by {providers.get(m, 'nothing installed')})"
                  for m, where in modules.items()
                  if not wanted & {canonicalize_name(d) for d in providers.get(m, ())})


@pytest.mark.parametrize("folders, extras", [
    (("digest", "baselines"), ()),  # the wheel's packages: the core dependencies alone
    (("experiments",), ("experiments",)),
    (("tests", "benchmarks"), ("test",)),
])
def test_every_imported_distribution_is_declared(folders, extras):
    local = {p.stem for f in ("tests", "benchmarks") for p in (ROOT / f).rglob("*.py")}
    modules = third_party_imports(folders, local)
    assert "torch" in modules
    assert undeclared(modules, declared(*extras)) == []


def test_an_undeclared_import_is_reported():
    assert undeclared({"yaml": "x.py"}, [Requirement("PyYAML>=6")]) == []
    assert undeclared({"yaml": "x.py"}, [Requirement("torch")]) == \
        ["yaml (imported by x.py; provided by ['PyYAML'])"]


# ---- the wheel, installed into a fresh environment (slow: builds, installs, trains) ----------

def _pip_env() -> dict:
    """This environment without any pip setting of the machine's (config file, index, links)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIP_NO_INPUT="1", PYTHONPATH="")
    return env


def _pip(*args, cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "pip", *args], cwd=cwd, env=_pip_env(),
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def _packages() -> list[str]:
    """The top-level folders of the repository that pyproject.toml's package patterns take."""
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"]["find"]["include"]
    return sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()
                  and any(p.name == pat.rstrip("*") for pat in patterns))


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A wheel built offline from a copy of the repository (so that no build folder lands in the
    checkout), installed with --no-index into a fresh venv whose only other packages are this
    environment's (the pinned CPU torch and the rest of the lock, on the path through a .pth file,
    after the venv's own site-packages): the new venv's python."""
    base = tmp_path_factory.mktemp("wheel")
    src, dist, venv = base / "src", base / "dist", base / "venv"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in _packages():
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    _pip("wheel", ".", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(dist), cwd=src)
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        top = {n.split("/")[0] for n in z.namelist() if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"digest", "baselines"}  # the library; the harness and the tests stay out

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    own = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                               "['purelib'])"], capture_output=True, text=True, check=True,
                              env=_pip_env()).stdout.strip())
    (own / "pinned.pth").write_text("".join(f"{p}\n" for p in site.getsitepackages()))
    report = base / "report.json"
    _pip("--python", str(python), "install", "--no-index", "--report", str(report), str(wheel),
         cwd=base)
    got = [i["metadata"]["name"] for i in json.loads(report.read_text())["install"]]
    assert got == ["digest-suite"]  # every dependency was already there: no torch, nothing CUDA
    assert not [p for p in own.iterdir() if p.name.startswith(("nvidia", "torch", "triton"))]
    return python


@pytest.fixture
def outside(tmp_path) -> Path:
    """A working folder outside the repository."""
    assert ROOT not in tmp_path.parents
    return tmp_path


def _run(program, args, outside: Path, timeout: float = 150):
    """``program *args`` in ``outside`` as a user there runs it: no PYTHONPATH, no plug-ins, a data
    root of its own (every process it starts is killed past ``timeout``)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DIGEST_PLUGINS")}
    env["DIGEST_DATA"] = str(outside / "data")
    return run([*program, *args], outside, env, timeout)


@pytest.mark.slow
def test_the_wheel_runs_the_cli_from_outside_the_repository(installed, outside):
    where = _run([installed, "-c"], ["import digest, baselines, importlib.util as u; "
                                     "print(digest.__file__, baselines.__file__, "
                                     "u.find_spec('experiments'))"], outside)
    assert where.rc == 0, where.stderr
    files = where.stdout.split()
    assert all(Path(f).is_relative_to(installed.parents[1]) for f in files[:2]), files
    assert files[2] == "None"  # the harness is not installed

    helped = _run([installed.parent / "digest"], ["--help"], outside)
    assert helped.rc == 0 and "train" in helped.stdout, helped.stderr

    ran = _run([installed, "-m", "digest"], ["train", "--dataset", "synthetic", "--workers", "2",
                                             "--epochs", "2"], outside)
    assert ran.rc == 0, ran.stderr[-3000:]
    summary = json.loads((outside / "runs" / "synthetic_exact_w2_s0" / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["world_size"] == 2 and summary["epochs"] == 2


@pytest.mark.slow
def test_the_wheel_runs_an_example_from_outside_the_repository(installed, outside):
    """The first examples/*.py that imports from digest (copied out of the repository, so that
    only the installed packages can be imported)."""
    found = [p for p in sorted((ROOT / "examples").glob("*.py"))
             if "from digest import" in p.read_text()]
    if not found:
        pytest.skip("no examples/*.py importing from digest in this checkout")
    script = outside / found[0].name
    shutil.copy(found[0], script)
    ran = _run([installed, script.name], [], outside, timeout=170)
    assert ran.rc == 0, f"{found[0].name}: {ran.stderr[-3000:]}"
