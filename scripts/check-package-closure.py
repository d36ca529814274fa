#!/usr/bin/env python3
"""Checks that every Debian package a Tessera build touches is installed by the project's
own scripts, so that a machine where someone installed a package by hand cannot hide a
missing install step.

A package counts as installed by the project when it is in the package list
(scripts/lib/debian-packages.txt, the list scripts/setup-deps.sh installs), in the
Depends/Pre-Depends closure of the listed packages (Recommends do not count: the script
installs with --no-install-recommends), or Priority required / Essential.

The files a build touches:
  - every file a fresh configure opened or executed (traced with strace), and every file
    its find_* probes found (the paths in its CMakeCache.txt), for each `--configure`;
  - every header in the compiler dependency files (*.d) of each `--build` tree;
  - every shared library the built programs and libraries load (ldd).
Files no package owns (the build tree, /opt, /usr/local, generated files) are skipped.

  scripts/check-package-closure.py --build build --configure ""
  scripts/check-package-closure.py --build build-cuda --configure "-DTESSERA_ENABLE_CUDA=ON ..."
  ... --negative-control ocl-icd-opencl-dev,opencl-c-headers

--negative-control P,Q also checks the list with P and Q left out, and fails unless that
check names P (or Q) as missing: proof that the check can fail for the package it guards.

Exit status: 0 every package is covered; 1 a package is missing (each named with a file
that needed it); 2 the check could not run (bad arguments, a failed configure, no strace).
"""

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DPKG_STATUS = Path("/var/lib/dpkg/status")
DPKG_INFO = Path("/var/lib/dpkg/info")
SKIPPED_PREFIXES = ("/proc/", "/sys/", "/dev/", "/tmp/", "/run/", "/var/tmp/",
                    # read only when present, by every program that starts (gettext's
                    # catalogs and aliases) or links (the linker's ld.so.conf.d fragments)
                    "/usr/share/locale/", "/etc/ld.so.conf.d/")


def fail(message):
    print(f"check-package-closure: error: {message}", file=sys.stderr)
    sys.exit(2)


def read_list(path):
    packages = []
    for line in Path(path).read_text().splitlines():
        name = line.split("#", 1)[0].strip()
        if name:
            packages.append(name)
    if not packages:
        fail(f"no packages listed in {path}")
    return packages


def read_dpkg_status():
    """Installed packages: name -> {priority, essential, depends (groups of alternatives)};
    and virtual name -> installed providers."""
    installed, providers = {}, defaultdict(set)
    for stanza in DPKG_STATUS.read_text(errors="replace").split("\n\n"):
        fields, key = {}, None
        for line in stanza.splitlines():
            if line[:1].isspace() and key:
                fields[key] += " " + line.strip()
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        name = fields.get("Package")
        if not name or "install ok installed" not in fields.get("Status", ""):
            continue
        groups = []
        for field in ("Depends", "Pre-Depends"):
            for group in filter(None, (g.strip() for g in fields.get(field, "").split(","))):
                groups.append([re.split(r"[\s(:]", alt.strip(), maxsplit=1)[0] for alt in group.split("|")])
        installed[name] = {
            "priority": fields.get("Priority", ""),
            "essential": fields.get("Essential", "") == "yes",
            "depends": groups,
        }
        for provided in filter(None, (p.strip() for p in fields.get("Provides", "").split(","))):
            providers[re.split(r"[\s(:]", provided, maxsplit=1)[0]].add(name)
    return installed, providers


def closure(listed, installed, providers):
    """Every installed package reachable from `listed` by Depends/Pre-Depends: of a group
    of alternatives, each installed alternative (or installed provider) counts."""
    seen, todo = set(), [p for p in listed if p in installed]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for group in installed[name]["depends"]:
            for alt in group:
                for candidate in ({alt} if alt in installed else set()) | providers.get(alt, set()):
                    if candidate not in seen:
                        todo.append(candidate)
    return seen


def file_owners():
    owners = defaultdict(set)
    for listing in DPKG_INFO.glob("*.list"):
        package = listing.name[: -len(".list")].split(":")[0]
        for line in listing.read_text(errors="replace").splitlines():
            owners[line].add(package)
    return owners


def usrmerge_variants(path):
    """/lib/x and /usr/lib/x are one file on a merged-/usr system; dpkg may list either."""
    yield path
    for top in ("/lib", "/lib64", "/bin", "/sbin"):
        if path.startswith(top + "/"):
            yield "/usr" + path
        elif path.startswith("/usr" + top + "/"):
            yield path[len("/usr"):]


def owners_of(path, owners):
    """Packages owning the path as named and the file it resolves to (a symlink such as
    libOpenCL.so and its target belong to different packages, and both are needed)."""
    found = []
    for candidate in {path, os.path.realpath(path)}:
        for variant in usrmerge_variants(candidate):
            if variant in owners:
                found.append(owners[variant])
                break
    return found


def traced_configure(cmake_args, log_dir):
    """Files a fresh configure with `cmake_args` opened or executed, and the files its
    find_* probes found (CMakeCache.txt). Bare stat calls are not counted: CMake stats
    every entry of a directory it searches, wanted or not."""
    if not shutil.which("strace"):
        fail("strace is not installed (it is in scripts/lib/debian-packages.txt: run scripts/setup-deps.sh)")
    build = tempfile.mkdtemp(prefix="closure-configure-", dir=log_dir)
    trace = os.path.join(log_dir, "configure.strace")
    command = ["strace", "-f", "-qq", "-o", trace, "-e", "trace=open,openat,execve",
               "cmake", "-S", str(ROOT), "-B", build] + shlex.split(cmake_args)
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        print(result.stdout[-4000:], file=sys.stderr)
        fail(f"the traced configure failed: {' '.join(command[6:])}")
    used = set()
    # 1234 openat(AT_FDCWD, "/usr/include/CL/cl.h", O_RDONLY) = 3   (failed calls end "= -1 E...")
    call = re.compile(r'^\d+\s+\w+\((?:AT_FDCWD, |\d+, )?"(/[^"]+)".*\)\s+=\s+(\d+|0x[0-9a-f]+)')
    with open(trace, errors="replace") as lines:
        for line in lines:
            match = call.match(line)
            if match:
                used.add(match.group(1))
    used.update(cached_file_paths(Path(build, "CMakeCache.txt")))
    shutil.rmtree(build, ignore_errors=True)
    return used


def cached_file_paths(cache):
    """Absolute paths of existing files among the cache's values: what find_library,
    find_file and find_program found (a library is found, not opened, at configure time)."""
    found = set()
    for line in cache.read_text(errors="replace").splitlines():
        name, _, value = line.partition("=")
        if line.startswith(("#", "//")) or ":" not in name:
            continue
        for item in value.split(";"):
            if item.startswith("/") and os.path.isfile(item):
                found.add(item)
    return found


def depfile_headers(build):
    used = set()
    for depfile in Path(build).rglob("*.d"):
        for token in depfile.read_text(errors="replace").replace("\\\n", " ").split():
            if token.startswith("/"):
                used.add(token.rstrip(":"))
    return used


def is_linked_elf(path):
    """An executable or shared library (not an object file): ELF type EXEC or DYN."""
    try:
        with open(path, "rb") as f:
            header = f.read(18)
    except OSError:
        return False
    return len(header) == 18 and header[:4] == b"\x7fELF" and header[16] in (2, 3)


def loaded_libraries(build):
    programs = [str(p) for p in Path(build).rglob("*") if p.is_file() and not p.is_symlink() and is_linked_elf(p)]
    used = set()
    for start in range(0, len(programs), 64):
        result = subprocess.run(["ldd"] + programs[start:start + 64], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        used.update(re.findall(r"=>\s+(/\S+)\s+\(0x", result.stdout))
    return used


def counted(used_by):
    """The touched files that speak for a package: not directories, not the checkout, not
    the kernel's or temporary files."""
    return {path: source for path, source in used_by.items()
            if not path.startswith(SKIPPED_PREFIXES) and not path.startswith(str(ROOT)) and not os.path.isdir(path)}


def missing_packages(used_by, allowed, installed, owners):
    """package -> (a file that needed it, what found that file), for packages outside `allowed`."""
    missing = {}
    for path, source in sorted(used_by.items()):
        for package_set in owners_of(path, owners):
            if not package_set & allowed:
                for package in sorted(package_set):
                    missing.setdefault(package, (path, source))
    return {p: v for p, v in missing.items() if p in installed}


def allowed_packages(listed, installed, providers):
    base = {p for p, info in installed.items() if info["priority"] == "required" or info["essential"]}
    return closure(listed, installed, providers) | closure(base, installed, providers)


def report(missing, list_path):
    for package, (path, source) in sorted(missing.items()):
        print(f"check-package-closure: '{package}' is used but not installed by scripts/setup-deps.sh "
              f"(nor a Depends of what it installs): {path} ({source}); add it to {list_path}", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", default=str(ROOT / "scripts/lib/debian-packages.txt"))
    parser.add_argument("--build", action="append", default=[], help="a built tree: its depfiles and programs")
    parser.add_argument("--configure", action="append", default=[],
                        help="cmake arguments of a fresh configure to trace ('' for a plain one)")
    parser.add_argument("--negative-control", default="",
                        help="comma-separated packages: the list without them must fail naming one")
    args = parser.parse_args()
    for build in args.build:
        if not Path(build, "CMakeCache.txt").is_file():
            fail(f"'{build}' is not a configured build tree")
    if not args.build and not args.configure:
        fail("nothing to check: give --build and/or --configure")

    listed = read_list(args.list)
    installed, providers = read_dpkg_status()
    not_installed = [p for p in listed if p not in installed]
    if not_installed:
        print(f"check-package-closure: listed but not installed: {' '.join(not_installed)} "
              "(run scripts/setup-deps.sh)", file=sys.stderr)
        return 1
    owners = file_owners()

    used_by = {}
    with tempfile.TemporaryDirectory(prefix="tessera-closure-") as log_dir:
        for cmake_args in args.configure:
            for path in traced_configure(cmake_args, log_dir):
                used_by.setdefault(path, "opened by a fresh configure")
    for build in args.build:
        for path in depfile_headers(build):
            used_by.setdefault(path, f"a header in {build}'s dependency files")
        for path in loaded_libraries(build):
            used_by.setdefault(path, f"loaded by a program of {build}")

    used_by = counted(used_by)
    allowed = allowed_packages(listed, installed, providers)
    missing = missing_packages(used_by, allowed, installed, owners)
    used_packages = {p for path in used_by for s in owners_of(path, owners) for p in s}
    print(f"check-package-closure: {len(used_by)} files touched, owned by {len(used_packages)} packages; "
          f"{len(listed)} listed, {len(allowed)} allowed with their closure")
    if missing:
        report(missing, args.list)
        return 1

    control = [p for p in args.negative_control.split(",") if p]
    if control:
        reduced = [p for p in listed if p not in control]
        caught = missing_packages(used_by, allowed_packages(reduced, installed, providers), installed, owners)
        named = sorted(set(caught) & set(control))
        if not named:
            print(f"check-package-closure: negative control failed: without {', '.join(control)} the list still "
                  "passes, so the check cannot see that they are needed", file=sys.stderr)
            return 1
        package = named[0]
        print(f"check-package-closure: negative control: without {', '.join(control)} the check names "
              f"'{package}' ({caught[package][0]}, {caught[package][1]})")
    print("check-package-closure: every package the build touched is installed by scripts/setup-deps.sh")
    return 0


if __name__ == "__main__":
    sys.exit(main())
