"""The extension build (``tools/build_extension.py``): what goes into the zip, and that it validates.

Builds for this machine's platform once per module (about a second once the wheels are in
``wheels/``; the first run downloads them, about 63 MB on linux-x64).
"""

from __future__ import annotations

import importlib.util
import os
import tomllib
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load_tool():
    spec = importlib.util.spec_from_file_location(
        "surge_build_extension_under_test", os.path.join(ROOT, "tools", "build_extension.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tool = _load_tool()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(zip paths, the manifest's wheels for this platform, this platform)."""
    out = tmp_path_factory.mktemp("build")
    zips = tool.build(str(out), platforms=["current"])
    manifest = tool.read_manifest(ROOT)
    platform = tool.current_platform()
    wheels = tool.wheels_for_platform(manifest, platform, tool._load_blender_ext())
    return zips, wheels, platform


def _names(zip_path):
    with zipfile.ZipFile(zip_path) as archive:
        return archive.namelist()


def test_one_zip_named_for_this_platform(built):
    zips, _, platform = built
    assert len(zips) == 1
    assert os.path.isfile(zips[0])
    assert os.path.basename(zips[0]) == f"surge-0.1.0-{platform.replace('-', '_')}.zip"


def test_zip_holds_the_add_on_and_this_platforms_wheels(built):
    zips, wheels, _ = built
    names = set(_names(zips[0]))
    for required in ("blender_manifest.toml", "__init__.py", "engine/__init__.py", "engine/settings/__init__.py"):
        assert required in names, f"{required} missing from the zip"
    wheel_names = sorted(n for n in names if n.endswith(".whl"))
    assert wheel_names == sorted(os.path.normpath(w) for w in wheels)
    assert len(wheel_names) == 3
    assert any(os.path.basename(n).startswith("numba-0.68.1-cp311-") for n in wheel_names)
    assert any(os.path.basename(n).startswith("pysplashsurf-0.14.1.0-cp310-abi3-") for n in wheel_names)
    assert any(os.path.basename(n).startswith("llvmlite-0.50.0-cp311-") for n in wheel_names)
    assert not any(os.path.basename(n).startswith("numpy-") for n in wheel_names)


@pytest.mark.parametrize("prefix", [
    "tests/", "tools/", "bench/", ".venv/", ".git/", ".ci/", ".pytest_cache/", "out/", "dist/",
])
def test_zip_leaves_out_development_folders(built, prefix):
    assert not [n for n in _names(built[0][0]) if n.startswith(prefix)]


def test_zip_leaves_out_caches_and_dev_files(built):
    names = _names(built[0][0])
    assert not [n for n in names if "__pycache__/" in n or n.endswith(".pyc")]
    assert not [n for n in names if "surge_cache/" in n or n.endswith((".blend", ".blend1"))]
    assert not [n for n in names if os.path.basename(n).startswith(".")]
    assert "requirements.txt" not in names


def test_zip_manifest_names_only_this_platform(built):
    zips, wheels, platform = built
    with zipfile.ZipFile(zips[0]) as archive:
        manifest = tomllib.loads(archive.read("blender_manifest.toml").decode("utf-8"))
    assert manifest["id"] == "surge"
    assert manifest["build"]["generated"]["platforms"] == [platform]
    assert manifest["build"]["generated"]["wheels"] == wheels


def _zip_with_manifest(path, manifest_text):
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("blender_manifest.toml", manifest_text)
        archive.writestr("__init__.py", "")
    return str(path)


def test_validator_accepts_the_source_manifest(tmp_path):
    # The positive control for the failures below: the same tiny zip with the real manifest
    # (its wheels are not inside, so drop them: the validator reads the manifest only).
    manifest = tool.read_manifest(ROOT)
    del manifest["wheels"]
    tool.validate(_zip_with_manifest(tmp_path / "good.zip", tool.dump_manifest(manifest)))


@pytest.mark.parametrize("field, value, message", [
    ("tagline", "Particle liquid simulation.", "punctuation"),
    ("tags", ["Physics", "Liquids"], "Liquids"),
    ("permissions", {"files": "x" * 65}, "64"),
    ("id", "surge-addon", "identifier"),
])
def test_validator_rejects_a_broken_manifest(tmp_path, field, value, message):
    manifest = tool.read_manifest(ROOT)
    del manifest["wheels"]
    manifest[field] = value
    broken = _zip_with_manifest(tmp_path / "broken.zip", tool.dump_manifest(manifest))
    with pytest.raises(tool.BuildError, match=message):
        tool.validate(broken)


def test_validator_rejects_a_zip_missing_its_wheels(tmp_path):
    manifest = tool.read_manifest(ROOT)
    broken = _zip_with_manifest(tmp_path / "no_wheels.zip", tool.dump_manifest(manifest))
    with pytest.raises(tool.BuildError, match="lacks wheels"):
        tool.validate(broken)


def test_unknown_platform_is_refused_before_building(tmp_path):
    with pytest.raises(tool.BuildError, match="macos-x64"):
        tool.build(str(tmp_path), platforms=["macos-x64"])
    assert not os.listdir(tmp_path)


def test_manifest_round_trips_through_the_writer():
    manifest = tool.read_manifest(ROOT)
    manifest["tagline"] = 'Quotes " backslash \\ tab \t and ünïcode'
    assert tomllib.loads(tool.dump_manifest(manifest)) == manifest
