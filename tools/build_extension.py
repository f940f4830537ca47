"""Build Surge's installable extension zips, one per platform, and validate each.

Command line (from anywhere; the default output folder is ``dist/`` at the repository root)::

    .venv/bin/python tools/build_extension.py                      # all platforms of the manifest
    .venv/bin/python tools/build_extension.py --platform current   # only this machine's platform
    .venv/bin/python tools/build_extension.py --platform linux-x64 --platform windows-x64 -o out/zips

From Python: ``build(output_dir, platforms=None) -> list[str]`` (zip paths, in manifest order).

Steps:

1. Read ``blender_manifest.toml`` and pick the requested platforms (``None``: all of the manifest's
   ``platforms``; ``"current"``: this machine's, e.g. ``linux-x64``).
2. Download the wheels those platforms need into ``wheels/`` (git-ignored) with
   ``pip download``; wheels already there are reused. The manifest's ``wheels`` list is the
   single source of truth: pip is asked for exactly the name, version, Python and platform tags
   written in each file name.
3. Stage a copy of the add-on in a temporary folder: the files the manifest's
   ``[build] paths_exclude_pattern`` keeps (matched with Blender's own matcher), plus the needed
   wheels. When only some platforms are requested, the staged manifest lists only those
   platforms and their wheels, so building never needs another platform's wheels. For a full
   build the manifest is copied verbatim.
4. Build with the standalone ``blender_ext.py`` shipped in the bpy wheel
   (``build --split-platforms``, Blender's list of valid tags), then run its ``validate`` on
   every zip and check that each zip holds the wheels its manifest names.

Needs only Python 3.11 with the ``bpy`` wheel installed (for ``blender_ext.py``) and ``pip``
(for downloads); ``bpy`` itself is never imported. When the running interpreter lacks either,
the repository's ``.venv`` is used for it.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import math
import os
import platform as platform_module
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import types
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MANIFEST_NAME = "blender_manifest.toml"
DEFAULT_OUTPUT_DIR = os.path.join(ROOT, "dist")
DEFAULT_WHEELS_DIR = os.path.join(ROOT, "wheels")
VENV_SITE_PACKAGES = os.path.join(ROOT, ".venv", "lib", "python3.11", "site-packages")
VENV_PYTHON = os.path.join(ROOT, ".venv", "bin", "python")

# Inside the bpy wheel: <site-packages>/bpy/<major.minor>/scripts/...
BLENDER_EXT_GLOB = os.path.join("*", "scripts", "addons_core", "bl_pkg", "cli", "blender_ext.py")
BLENDER_TAGS_GLOB = os.path.join("*", "scripts", "modules", "_bpy_internal", "extensions", "tags.py")

# sys.platform / platform.machine() -> Blender platform names.
_SYSTEMS = {"linux": "linux", "win32": "windows", "darwin": "macos"}
_MACHINES = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}

# name-version(-build)?-python-abi-platform.whl (PEP 427); names are normalised in wheel files.
_WHEEL_RE = re.compile(
    r"^(?P<name>[A-Za-z0-9_.]+)-(?P<version>[^-]+)(?:-(?P<build>\d[^-]*))?"
    r"-(?P<python>[^-]+)-(?P<abi>[^-]+)-(?P<platform>[^-]+)\.whl$"
)
_BARE_KEY_RE = re.compile(r"^[A-Za-z0-9_-]+$")


class BuildError(Exception):
    """The extension could not be built or did not validate; the message says why."""


# ---------------------------------------------------------------------------------------------
# Locating Blender's tools


def _bpy_package_dir() -> str:
    """The folder of the installed bpy wheel, found without importing bpy."""
    spec = importlib.util.find_spec("bpy")
    if spec is not None and spec.submodule_search_locations:
        return list(spec.submodule_search_locations)[0]
    candidate = os.path.join(VENV_SITE_PACKAGES, "bpy")
    if os.path.isdir(candidate):
        return candidate
    raise BuildError(
        "the bpy wheel (Blender as a Python module) is not installed for "
        f"{sys.executable}, and {candidate} does not exist: run `bash tools/setup_env.sh` "
        "(or `pip install bpy==5.0.1` into a Python 3.11) and use that Python"
    )


def _find_in_bpy(pattern: str, what: str) -> str:
    bpy_dir = _bpy_package_dir()
    matches = sorted(glob.glob(os.path.join(bpy_dir, pattern)))
    if len(matches) != 1:
        raise BuildError(
            f"expected exactly one {what} matching {os.path.join(bpy_dir, pattern)}, "
            f"found {len(matches)}: is the bpy installation complete?"
        )
    return matches[0]


def blender_ext_path() -> str:
    """Path of the standalone extension tool ``blender_ext.py`` inside the bpy wheel."""
    return _find_in_bpy(BLENDER_EXT_GLOB, "blender_ext.py")


def blender_tags_path() -> str:
    """Path of Blender's list of valid extension tags (the one Blender's own CLI enforces)."""
    return _find_in_bpy(BLENDER_TAGS_GLOB, "extension tags file")


def _load_blender_ext() -> types.ModuleType:
    """``blender_ext.py`` as a module, for its path matcher and wheel-platform mapping.

    Importing it has no side effects (it is a script guarded by ``__main__``); building and
    validating still go through its command line.
    """
    path = blender_ext_path()
    spec = importlib.util.spec_from_file_location("_surge_blender_ext", path)
    if spec is None or spec.loader is None:
        raise BuildError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in ("PathPatternMatch", "blender_platforms_from_wheel_platform"):
        if not hasattr(module, name):
            raise BuildError(f"{path} has no {name}; this script expects Blender 5.0's blender_ext.py")
    return module


def _run_blender_ext(args: list[str]) -> subprocess.CompletedProcess:
    command = [sys.executable, blender_ext_path(), *args]
    return subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True)


# ---------------------------------------------------------------------------------------------
# Platforms and wheels


def current_platform() -> str:
    """This machine's platform in Blender's naming (``linux-x64``, ``macos-arm64``, ...)."""
    system = _SYSTEMS.get(sys.platform)
    machine = _MACHINES.get(platform_module.machine().lower())
    if system is None or machine is None:
        raise BuildError(
            f"unknown platform: sys.platform={sys.platform!r}, machine={platform_module.machine()!r}"
        )
    return f"{system}-{machine}"


def _parse_wheel_name(path: str) -> re.Match:
    match = _WHEEL_RE.match(os.path.basename(path))
    if match is None:
        raise BuildError(f"manifest wheel {path!r} is not a wheel file name (name-version-python-abi-platform.whl)")
    return match


def wheels_for_platform(manifest: dict, platform: str, blender_ext: types.ModuleType) -> list[str]:
    """The manifest's wheel paths that Blender installs on ``platform``."""
    result = []
    for wheel in manifest.get("wheels", []):
        wheel_platform = _parse_wheel_name(wheel)["platform"]
        if wheel_platform == "any" or platform in blender_ext.blender_platforms_from_wheel_platform(wheel_platform):
            result.append(wheel)
    return result


def _pip_command() -> list[str]:
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    if os.path.isfile(VENV_PYTHON):
        return [VENV_PYTHON, "-m", "pip"]
    raise BuildError(f"pip is not available for {sys.executable} and {VENV_PYTHON} does not exist: "
                     "run `bash tools/setup_env.sh` first")


def _is_complete_wheel(path: str) -> bool:
    return os.path.isfile(path) and zipfile.is_zipfile(path)


def ensure_wheels(wheels: list[str], wheels_dir: str) -> None:
    """Download each wheel (a manifest path such as ``./wheels/x.whl``) missing from ``wheels_dir``.

    pip is asked for exactly the distribution, version, Python, ABI and platform tags written in
    the file name (one pip run per set of tags, so a platform's numba and llvmlite come together);
    a download that yields other file names is an error. Files are downloaded into a temporary
    folder and moved into place, so ``wheels_dir`` never holds partial files.
    """
    missing = [os.path.basename(w) for w in wheels
               if not _is_complete_wheel(os.path.join(wheels_dir, os.path.basename(w)))]
    if not missing:
        return
    groups: dict[tuple[str, str, str], list[re.Match]] = {}
    for filename in missing:
        fields = _parse_wheel_name(filename)
        if not re.fullmatch(r"cp3\d+", fields["python"]):
            raise BuildError(f"{filename}: only CPython wheels (cp3XX) are supported here, "
                             f"found {fields['python']!r}")
        groups.setdefault((fields["python"], fields["abi"], fields["platform"]), []).append(fields)
    os.makedirs(wheels_dir, exist_ok=True)
    pip = _pip_command()
    for (python_tag, abi_tag, platform_tags), group in groups.items():
        filenames = [fields.string for fields in group]
        with tempfile.TemporaryDirectory(prefix="surge_wheel_", dir=wheels_dir) as download_dir:
            command = [
                *pip, "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
                "--no-input", "--python-version", f"3.{python_tag[3:]}", "--implementation", "cp",
                "--abi", abi_tag,
                *[arg for tag in platform_tags.split(".") for arg in ("--platform", tag)],
                *[f"{fields['name']}=={fields['version']}" for fields in group],
                "--dest", download_dir,
            ]
            print(f"build_extension: downloading {', '.join(filenames)}", file=sys.stderr)
            result = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True)
            if result.returncode != 0:
                raise BuildError(f"pip could not download {', '.join(filenames)}:\n$ {' '.join(command)}\n"
                                 f"{result.stdout}{result.stderr}")
            absent = [f for f in filenames if not _is_complete_wheel(os.path.join(download_dir, f))]
            if absent:
                got = ", ".join(sorted(os.listdir(download_dir))) or "nothing"
                raise BuildError(f"pip downloaded {got}, but not {', '.join(absent)}: update the file "
                                 f"names in {MANIFEST_NAME} (the package may have re-tagged its wheels)")
            for filename in filenames:
                os.replace(os.path.join(download_dir, filename), os.path.join(wheels_dir, filename))


# ---------------------------------------------------------------------------------------------
# Manifest


def read_manifest(source_dir: str) -> dict:
    path = os.path.join(source_dir, MANIFEST_NAME)
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise BuildError(f"{path} not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise BuildError(f"{path} is not valid TOML: {exc}") from exc


def _toml_string(value: str) -> str:
    out = ['"']
    for ch in value:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _toml_key(key: str) -> str:
    return key if _BARE_KEY_RE.match(key) else _toml_string(key)


def _toml_value(value: object, where: str) -> str:
    # bool before int: bool is a subclass of int.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    if isinstance(value, list):
        items = [_toml_value(item, where) for item in value]
        if sum(len(item) for item in items) > 60:
            return "[\n" + "".join(f"  {item},\n" for item in items) + "]"
        return "[" + ", ".join(items) + "]"
    raise BuildError(f"cannot write {where} = {value!r} back to TOML (type {type(value).__name__})")


def _toml_table(table: dict, path: list[str], lines: list[str]) -> None:
    scalars = [(k, v) for k, v in table.items() if not isinstance(v, dict)]
    tables = [(k, v) for k, v in table.items() if isinstance(v, dict)]
    if path and (scalars or not tables):
        lines.append("")
        lines.append("[" + ".".join(_toml_key(p) for p in path) + "]")
    for key, value in scalars:
        lines.append(f"{_toml_key(key)} = {_toml_value(value, '.'.join([*path, key]))}")
    for key, value in tables:
        _toml_table(value, [*path, key], lines)


def dump_manifest(manifest: dict) -> str:
    """The manifest as TOML text; comments are not kept. Checked by parsing it back."""
    lines = ["# Generated by tools/build_extension.py from the repository's blender_manifest.toml."]
    _toml_table(manifest, [], lines)
    text = "\n".join(lines) + "\n"
    if tomllib.loads(text) != manifest:
        raise BuildError("internal error: the rewritten manifest does not parse back to the same data")
    return text


# ---------------------------------------------------------------------------------------------
# Staging


def _stage_sources(source_dir: str, stage_dir: str, manifest: dict, blender_ext: types.ModuleType,
                   skip_dirs: list[str]) -> None:
    """Copy the files the build keeps, filtered exactly as ``blender_ext.py build`` filters them.

    Symbolic links are skipped, as Blender's build skips them.
    """
    build = manifest.get("build", {})
    if "paths" in build:
        raise BuildError(f"{MANIFEST_NAME}: [build] paths is not supported by this script; "
                         "use paths_exclude_pattern")
    patterns = build.get("paths_exclude_pattern")
    if not patterns:
        raise BuildError(f"{MANIFEST_NAME} has no [build] paths_exclude_pattern; without it Blender "
                         "would pack the whole repository (.venv, tests, ...)")
    matcher = blender_ext.PathPatternMatch(patterns)
    skip = {os.path.realpath(d) for d in skip_dirs}

    def copy_dir(src: str, rel: str) -> None:
        with os.scandir(src) as entries:
            for entry in entries:
                if entry.is_symlink():
                    continue
                entry_rel = f"{rel}{entry.name}"
                if entry.is_dir():
                    if os.path.realpath(entry.path) in skip or matcher.test_path(entry_rel + "/"):
                        continue
                    os.makedirs(os.path.join(stage_dir, entry_rel), exist_ok=True)
                    copy_dir(entry.path, entry_rel + "/")
                elif entry.is_file() and not matcher.test_path(entry_rel) and entry_rel != MANIFEST_NAME:
                    shutil.copy2(entry.path, os.path.join(stage_dir, entry_rel))

    copy_dir(source_dir, "")


def _link_or_copy(src: str, dst: str) -> None:
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        # Another file system, or links not permitted: copy instead.
        shutil.copy2(src, dst)


# ---------------------------------------------------------------------------------------------
# Validation


def validate(zip_path: str) -> None:
    """Run Blender's validator on ``zip_path`` (manifest rules and Blender's valid tags).

    Also checks that every wheel the zip's manifest names is inside the zip. Raises
    :class:`BuildError` with the validator's messages on failure.
    """
    result = _run_blender_ext(["validate", zip_path, "--valid-tags", blender_tags_path()])
    if result.returncode != 0:
        raise BuildError(f"Blender's validator rejected {zip_path}:\n{result.stdout}{result.stderr}".rstrip())
    with zipfile.ZipFile(zip_path) as archive:
        names = set(archive.namelist())
        try:
            manifest = tomllib.loads(archive.read(MANIFEST_NAME).decode("utf-8"))
        except KeyError:
            raise BuildError(f"{zip_path} has no {MANIFEST_NAME} at its root") from None
    generated = manifest.get("build", {}).get("generated", {})
    wheels = generated.get("wheels", manifest.get("wheels", []))
    missing = [w for w in wheels if os.path.normpath(w).replace(os.sep, "/") not in names]
    if missing:
        raise BuildError(f"{zip_path} lacks wheels its manifest lists: {', '.join(missing)}")


# ---------------------------------------------------------------------------------------------
# Build


def resolve_platforms(manifest: dict, platforms: list[str] | None) -> list[str]:
    """Requested platforms in manifest order; ``None`` means all, ``"current"`` this machine's."""
    declared = manifest.get("platforms")
    if not declared:
        raise BuildError(f"{MANIFEST_NAME} declares no platforms")
    if platforms is None:
        return list(declared)
    wanted = set()
    for name in platforms:
        name = current_platform() if name == "current" else name
        if name not in declared:
            raise BuildError(f"platform {name!r} is not one of the manifest's platforms "
                             f"({', '.join(declared)})")
        wanted.add(name)
    if not wanted:
        raise BuildError("no platforms requested")
    return [p for p in declared if p in wanted]


def build(output_dir: str, platforms: list[str] | None = None, *, source_dir: str = ROOT,
          wheels_dir: str | None = None) -> list[str]:
    """Build and validate one extension zip per platform; return the zip paths (manifest order).

    Parameters
    ----------
    output_dir : str
        Folder for the zips (created if missing); existing zips of the same name are replaced.
    platforms : list of str, optional
        Blender platform names (``"linux-x64"``, ...) or ``"current"``; ``None`` builds every
        platform the manifest lists. Only the requested platforms' wheels are needed.
    source_dir : str
        The add-on folder (holding ``blender_manifest.toml``); the repository root by default.
    wheels_dir : str, optional
        Where the manifest's ``./wheels/...`` files are kept and downloaded to;
        ``<source_dir>/wheels`` by default.
    """
    source_dir = os.path.abspath(source_dir)
    output_dir = os.path.abspath(output_dir)
    wheels_dir = os.path.abspath(wheels_dir or os.path.join(source_dir, "wheels"))
    manifest = read_manifest(source_dir)
    if not os.path.isfile(os.path.join(source_dir, "__init__.py")):
        raise BuildError(f"{source_dir} has no __init__.py: not an add-on")
    blender_ext = _load_blender_ext()
    selected = resolve_platforms(manifest, platforms)

    wheels = []
    for name in selected:
        platform_wheels = wheels_for_platform(manifest, name, blender_ext)
        if not platform_wheels:
            raise BuildError(f"{MANIFEST_NAME} lists no wheels for {name}")
        wheels.extend(w for w in platform_wheels if w not in wheels)
    for wheel in wheels:
        if not os.path.normpath(wheel).replace(os.sep, "/").startswith("wheels/"):
            raise BuildError(f"{MANIFEST_NAME}: wheel {wheel!r} must be under ./wheels/")
    ensure_wheels(wheels, wheels_dir)

    os.makedirs(output_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="surge_build_") as temp:
        stage = os.path.join(temp, manifest.get("id", "addon"))
        os.makedirs(stage)
        _stage_sources(source_dir, stage, manifest, blender_ext, skip_dirs=[output_dir, wheels_dir])
        for wheel in wheels:
            _link_or_copy(os.path.join(wheels_dir, os.path.basename(wheel)),
                          os.path.join(stage, os.path.normpath(wheel)))
        if selected == list(manifest["platforms"]):
            shutil.copy2(os.path.join(source_dir, MANIFEST_NAME), os.path.join(stage, MANIFEST_NAME))
        else:
            staged = dict(manifest, platforms=selected, wheels=wheels)
            with open(os.path.join(stage, MANIFEST_NAME), "w", encoding="utf-8") as fh:
                fh.write(dump_manifest(staged))

        result = _run_blender_ext(["build", "--split-platforms", "--source-dir", stage,
                                   "--output-dir", output_dir, "--valid-tags", blender_tags_path()])
        if result.returncode != 0:
            raise BuildError(f"blender_ext.py build failed:\n{result.stdout}{result.stderr}".rstrip())

    zips = []
    for name in selected:
        path = os.path.join(output_dir, f"{manifest['id']}-{manifest['version']}-{name.replace('-', '_')}.zip")
        if not os.path.isfile(path):
            raise BuildError(f"blender_ext.py reported success but {path} is missing:\n{result.stdout}")
        validate(path)
        zips.append(path)
    return zips


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--platform", "-p", action="append", dest="platforms", metavar="NAME",
                        help="build only this platform (repeatable): a manifest platform such as "
                             "linux-x64, or 'current' for this machine; default: all")
    parser.add_argument("--output-dir", "-o", default=DEFAULT_OUTPUT_DIR,
                        help=f"folder for the zips (default: {os.path.relpath(DEFAULT_OUTPUT_DIR)})")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        zips = build(args.output_dir, args.platforms)
    except (BuildError, OSError) as exc:
        print(f"build_extension: error: {exc}", file=sys.stderr)
        return 1
    for path in zips:
        print(path)
    print(f"build_extension: {len(zips)} zip(s) built and validated in "
          f"{time.perf_counter() - started:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
